"""deskrig's key names as macOS virtual key codes and flags, text as Unicode-carrying key events
(deskrig.desktop.macos_keys). Codes are Carbon's kVK_* (HIToolbox/Events.h)."""

from __future__ import annotations

import pytest

from deskrig.desktop.keys import NAMED_KEYS, parse_key
from deskrig.desktop.macos_keys import (
    CHARACTER_KEYS,
    FLAG_COMMAND,
    FLAG_CONTROL,
    FLAG_OPTION,
    FLAG_SHIFT,
    MAX_EVENT_UNITS,
    TEXT_KEY_CODE,
    UNSUPPORTED_KEYS,
    VIRTUAL_KEYS,
    MacKey,
    TextStroke,
    chord_flags,
    mac_key,
    text_strokes,
)
from deskrig.errors import DeskrigError, ErrorCode


@pytest.mark.parametrize(
    ("spelled", "code"),
    [
        ("Return", 0x24),  # kVK_Return
        ("tab", 0x30),
        ("esc", 0x35),
        ("backspace", 0x33),  # kVK_Delete
        ("Delete", 0x75),  # kVK_ForwardDelete
        ("Left", 0x7B),
        ("Up", 0x7E),
        ("F1", 0x7A),
        ("F5", 0x60),
        ("F12", 0x6F),
        ("pgup", 0x74),
        ("KP_Enter", 0x4C),
        ("KP_7", 0x59),
        ("cmd", 0x37),
        ("option", 0x3A),
        ("rctrl", 0x3E),
    ],
)
def test_named_keys_are_their_virtual_key_codes(spelled: str, code: int) -> None:
    assert mac_key(parse_key(spelled)).code == code


def test_every_key_name_is_a_mac_key_or_refused_as_one_a_mac_lacks() -> None:
    assert VIRTUAL_KEYS.keys() <= NAMED_KEYS  # no table entry for a name deskrig does not know
    assert {"F21", "F24", "Menu", "XF86AudioPlay", "KP_Home", "Hyper_L"} <= UNSUPPORTED_KEYS
    for name in sorted(UNSUPPORTED_KEYS):
        with pytest.raises(DeskrigError) as caught:
            mac_key(name)
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT and caught.value.details == {"key": name}


@pytest.mark.parametrize(
    ("name", "flag"),
    [("Control_L", FLAG_CONTROL), ("Shift_R", FLAG_SHIFT), ("Alt_L", FLAG_OPTION), ("Super_L", FLAG_COMMAND)],
)
def test_modifiers_carry_their_event_flag(name: str, flag: int) -> None:
    assert mac_key(name).flags == flag
    assert chord_flags([name, "a"]) == flag


def test_characters_are_their_us_key_with_shift_and_the_character_attached() -> None:
    assert mac_key("s") == MacKey(0x01, 0, "s")
    assert mac_key("S") == MacKey(0x01, FLAG_SHIFT, "S")
    assert mac_key("?") == MacKey(0x2C, FLAG_SHIFT, "?")
    assert mac_key(" ") == MacKey(0x31, 0, " ")
    assert len(CHARACTER_KEYS) == 95  # every printable ASCII character


def test_a_character_off_the_us_layout_goes_as_text_alone_but_not_in_a_shortcut() -> None:
    assert mac_key("é") == MacKey(TEXT_KEY_CODE, 0, "é")

    with pytest.raises(DeskrigError) as caught:
        mac_key("é", in_chord=True)

    assert caught.value.code is ErrorCode.INVALID_ARGUMENT and caught.value.remediation


def test_text_goes_in_runs_with_return_and_tab_as_keys() -> None:
    assert text_strokes("ab\r\ncd\te\rf") == [
        TextStroke(TEXT_KEY_CODE, "ab"),
        TextStroke(0x24),
        TextStroke(TEXT_KEY_CODE, "cd"),
        TextStroke(0x30),
        TextStroke(TEXT_KEY_CODE, "e"),
        TextStroke(0x24),
        TextStroke(TEXT_KEY_CODE, "f"),
    ]
    assert text_strokes("") == []


def test_long_text_is_cut_at_the_event_limit_never_inside_a_surrogate_pair() -> None:
    text = "x" * 19 + "😀" + "東" * 25  # the emoji is two UTF-16 units: it would straddle unit 20

    strokes = text_strokes(text)

    assert "".join(s.text for s in strokes) == text
    assert [s.text for s in strokes[:2]] == ["x" * 19, "😀" + "東" * 18]
    assert all(len(s.text.encode("utf-16-le")) // 2 <= MAX_EVENT_UNITS for s in strokes)
