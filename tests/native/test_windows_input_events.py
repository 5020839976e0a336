"""Key names, chords, text and pointer events as SendInput takes them (windows_keys, windows_events)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import pytest

from deskrig.desktop import windows_structs as w
from deskrig.desktop.keys import NAMED_KEYS, parse_combo
from deskrig.desktop.windows_events import (
    button_event,
    input_array,
    move_event,
    normalise_axis,
    pixel_of,
    wheel_events,
)
from deskrig.desktop.windows_keys import (
    NAMED_VIRTUAL_KEYS,
    UNSUPPORTED_KEYS,
    KeyEvent,
    plain_key,
    press_events,
    text_events,
)
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

from .windows_data import load

UP, EXT, UNI = w.KEYEVENTF_KEYUP, w.KEYEVENTF_EXTENDEDKEY, w.KEYEVENTF_UNICODE
#: MapVirtualKeyW(vk, MAPVK_VK_TO_VSC) on a US keyboard, for the keys the tests press.
SCANS = {
    0x11: 0x1D,
    0x10: 0x2A,
    0x12: 0x38,
    0x53: 0x1F,
    0x41: 0x1E,
    0x0D: 0x1C,
    0x09: 0x0F,
    0x51: 0x10,
    0x2E: 0x53,
}


def layout(name: str) -> Callable[[str], int]:
    table: dict[str, int] = load("vkscan")[name]

    def vk_scan(char: str) -> int:
        if ord(char) > 0xFFFF:  # as ctypes refuses it: a c_wchar is one UTF-16 unit on Windows
            raise ValueError(f"{char!r} is not one UTF-16 unit")
        return table.get(char, -1)

    return vk_scan


def scan_of(vk: int) -> int:
    return SCANS.get(vk, 0)


def chord(spec: str, on: str = "us") -> list[KeyEvent]:
    combo = parse_combo(spec)
    return press_events(combo.keys, layout(on), scan_of)


def test_every_key_name_is_a_virtual_key_or_refused_with_a_reason() -> None:
    assert set(NAMED_VIRTUAL_KEYS) | set(UNSUPPORTED_KEYS) == NAMED_KEYS
    assert not set(NAMED_VIRTUAL_KEYS) & set(UNSUPPORTED_KEYS)
    with pytest.raises(DeskrigError) as caught:
        chord("Hyper_L")
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT
    assert "Hyper" in caught.value.message


def test_a_chord_presses_in_order_and_releases_in_reverse() -> None:
    assert chord("ctrl+s") == [
        KeyEvent(0x11, 0x1D, 0),
        KeyEvent(0x53, 0x1F, 0),
        KeyEvent(0x53, 0x1F, UP),
        KeyEvent(0x11, 0x1D, UP),
    ]


def test_right_hand_and_navigation_keys_are_extended() -> None:
    assert chord("rctrl+Delete") == [
        KeyEvent(0x11, 0x1D, EXT),
        KeyEvent(0x2E, 0x53, EXT),
        KeyEvent(0x2E, 0x53, EXT | UP),
        KeyEvent(0x11, 0x1D, EXT | UP),
    ]
    # Right Shift is not extended: its own scan code tells it from the left one.
    assert chord("rshift")[0] == KeyEvent(0x10, 0x36, 0)
    assert chord("KP_Enter")[0] == KeyEvent(0x0D, 0x1C, EXT)
    assert chord("KP_Home")[0].flags == 0 and chord("Home")[0].flags == EXT


def test_a_character_needing_shift_holds_it_once() -> None:
    vks = [e.vk for e in chord("ctrl+A") if e.down]
    assert vks == [0x11, 0x10, 0x41]
    assert [e.vk for e in chord("ctrl+shift+A") if e.down] == [0x11, 0x10, 0x41]


def test_an_altgr_character_holds_ctrl_and_alt_on_a_layout_with_altgr() -> None:
    assert [e.vk for e in chord("@", on="de") if e.down] == [0x11, 0x12, 0x51]
    assert [e.vk for e in chord("@", on="us") if e.down] == [0x10, 0x32]
    # The German layout swaps Y and Z: the same character, another key.
    assert [e.vk for e in chord("ctrl+z", on="de") if e.down] == [0x11, 0x5A]


def test_a_character_no_key_types_is_sent_as_unicode_alone_and_refused_in_a_chord() -> None:
    assert chord("é") == [KeyEvent(0, 0xE9, UNI), KeyEvent(0, 0xE9, UNI | UP)]
    # Beyond the BMP no key types it (and VkKeyScanW, taking one UTF-16 unit, is not asked).
    assert [e.scan for e in chord("😀") if e.down] == [0xD83D, 0xDE00]
    with pytest.raises(DeskrigError) as caught:
        chord("ctrl+é")
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT
    assert caught.value.details is not None and caught.value.details["key"] == "é"


def test_key_down_holds_a_plain_key_only() -> None:
    assert plain_key("a", layout("us")).vk == 0x41
    assert plain_key("Control_L", layout("us")).vk == 0x11
    for refused in ("A", "é"):
        with pytest.raises(DeskrigError) as caught:
            plain_key(refused, layout("us"))
        assert caught.value.code == ErrorCode.INVALID_ARGUMENT


def test_text_is_unicode_units_with_return_and_tab_keys() -> None:
    typed = text_events("a\r\nb\tx\r😀", scan_of)
    assert len(typed) == 7
    assert typed[0] == [KeyEvent(0, ord("a"), UNI), KeyEvent(0, ord("a"), UNI | UP)]
    # CR LF is one Return; a lone CR too; tab is the Tab key: real keys, with their scan codes.
    assert typed[1] == [KeyEvent(0x0D, 0x1C, 0), KeyEvent(0x0D, 0x1C, UP)]
    assert typed[3] == [KeyEvent(0x09, 0x0F, 0), KeyEvent(0x09, 0x0F, UP)]
    assert typed[5] == typed[1]
    # Beyond the BMP: both UTF-16 surrogates, each pressed and released.
    assert [(e.scan, e.flags) for e in typed[6]] == [
        (0xD83D, UNI),
        (0xD83D, UNI | UP),
        (0xDE00, UNI),
        (0xDE00, UNI | UP),
    ]


DESKTOPS = [
    Bounds(x=0, y=0, width=1280, height=800),
    Bounds(x=-1920, y=0, width=5760, height=2160),
    Bounds(x=-1366, y=-312, width=3286, height=1392),
    Bounds(x=0, y=0, width=1, height=1),
    Bounds(x=0, y=0, width=65535, height=3),
]


@pytest.mark.parametrize("desktop", DESKTOPS, ids=lambda b: f"{b.x},{b.y}+{b.width}x{b.height}")
def test_every_pixel_survives_normalisation(desktop: Bounds) -> None:
    for axis_origin, size in ((desktop.x, desktop.width), (desktop.y, desktop.height)):
        for pixel in range(axis_origin, axis_origin + size):
            normalised = normalise_axis(pixel, axis_origin, size)
            assert 0 <= normalised <= 65535
            assert pixel_of(normalised, axis_origin, size) == pixel


def test_a_move_is_absolute_over_the_virtual_desktop() -> None:
    desktop = DESKTOPS[1]
    event = move_event(-1920, 2159, desktop)
    assert event.flags == w.MOUSEEVENTF_MOVE | w.MOUSEEVENTF_ABSOLUTE | w.MOUSEEVENTF_VIRTUALDESK
    # The smallest normalised value Windows maps to the last row (65535 would be too, less exactly).
    assert (event.dx, event.dy) == (0, 65506)
    centre = move_event(960, 1080, desktop)
    assert (centre.dx, centre.dy) == (32768, 32768)


def test_buttons_and_wheel() -> None:
    assert button_event("right", True).flags == w.MOUSEEVENTF_RIGHTDOWN
    assert button_event("middle", False).flags == w.MOUSEEVENTF_MIDDLEUP
    down = wheel_events("down", 3)
    assert len(down) == 3 and {(e.flags, e.data) for e in down} == {(w.MOUSEEVENTF_WHEEL, 0xFFFFFF88)}
    assert wheel_events("right", 1)[0].flags == w.MOUSEEVENTF_HWHEEL
    assert wheel_events("up", 1)[0].data == 120


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="the layouts checked are 64-bit Windows'")
def test_structures_have_the_64_bit_windows_layout() -> None:
    assert ctypes.sizeof(w.INPUT) == 40
    assert ctypes.sizeof(w.MOUSEINPUT) == 32
    assert ctypes.sizeof(w.KEYBDINPUT) == 24
    assert w.INPUT.union.offset == 8
    assert ctypes.sizeof(w.RECT) == 16
    assert ctypes.sizeof(w.MONITORINFOEXW) == 104
    assert ctypes.sizeof(w.BITMAPINFOHEADER) == 40
    assert ctypes.sizeof(w.WINDOWPLACEMENT) == 44
    info = w.MONITORINFOEXW()
    ctypes.memmove(info.szDevice, "\\\\.\\DISPLAY1".encode("utf-16-le"), 24)
    assert info.device == "\\\\.\\DISPLAY1"


def test_events_pack_into_an_input_array() -> None:
    events = [move_event(10, 20, DESKTOPS[0]), *chord("ctrl+s")[:1]]
    inputs = input_array(events)
    assert len(inputs) == 2
    assert inputs[0].type == w.INPUT_MOUSE
    assert (inputs[0].union.mi.dx, inputs[0].union.mi.dwFlags) == (events[0].dx, events[0].flags)
    assert inputs[1].type == w.INPUT_KEYBOARD
    assert (inputs[1].union.ki.wVk, inputs[1].union.ki.wScan) == (0x11, 0x1D)
