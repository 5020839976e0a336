"""X11-only facts of X11Input (XTEST): the keymap it borrows and restores, Caps Lock, layouts.

The forms of ``x11_forms`` (conftest.py, forms.py) on Xvfb with openbox; typing, clicks, keys and
refusals that every backend shares are in test_input.py. Key-name parsing
(deskrig.desktop.keys) is checked without a display at the end.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from Xlib import X
from Xlib.display import Display

from deskrig.desktop.keys import KeyCombo, parse_combo, parse_hotkey, parse_key
from deskrig.desktop.x11_input import X11Input
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import TypeReport

from .forms import Forms
from .helpers import UNICODE, UNICODE_LINE, focus_gtk_entry, focus_tk_field, send


@pytest.fixture(scope="module")
def xlib(x11_forms: Forms) -> Iterator[Display]:
    display = Display(x11_forms.x_display)
    yield display
    display.close()


def keyboard_mapping(xlib: Display) -> list[list[int]]:
    info = xlib.display.info
    count = info.max_keycode - info.min_keycode + 1
    return [list(row) for row in xlib.get_keyboard_mapping(info.min_keycode, count)]


def caps_lock_on(xlib: Display) -> bool:
    return bool(xlib.screen().root.query_pointer().mask & X.LockMask)


def test_unicode_through_xtest_remaps_keys_and_restores_the_mapping(x11_forms: Forms, xlib: Display) -> None:
    before = keyboard_mapping(xlib)
    focus_tk_field(x11_forms, "text")
    report: TypeReport = send(x11_forms, lambda d: d.type_text(UNICODE))
    assert report.chars == len(UNICODE) and report.path == "xtest"
    assert report.remapped_keysyms == 8  # ü ß Ñ ú — 東 京 😀 are not on the US layout
    x11_forms.tk.wait("text", lambda e: e["text"] == UNICODE, "the Tk text widget to hold the text")
    assert keyboard_mapping(xlib) == before


def test_capitals_are_typed_with_shift_held(x11_forms: Forms, xlib: Display) -> None:
    before = keyboard_mapping(xlib)
    focus_tk_field(x11_forms, "entry")
    send(x11_forms, lambda d: d.type_text(UNICODE_LINE))
    x11_forms.tk.wait("entry", lambda e: e["text"] == UNICODE_LINE, "the Tk entry to hold the text")
    # Shift was held for the capital G (state bit 0).
    keys = x11_forms.tk.events("key")
    assert {"keysym": "G", "state": 1} in [{"keysym": k["keysym"], "state": k["state"] & 1} for k in keys]
    assert keyboard_mapping(xlib) == before


def test_ascii_at_full_speed_and_caps_lock_is_put_back(x11_forms: Forms, xlib: Display) -> None:
    text = "The quick brown fox jumps over the lazy dog 0123456789 ~!@#$%^&*()_+{}|:<>? " * 2
    focus_gtk_entry(x11_forms)
    send(x11_forms, lambda d: d.press_key("Caps_Lock"))
    assert caps_lock_on(xlib)
    report: TypeReport = send(x11_forms, lambda d: d.type_text(text))
    assert report.remapped_keysyms == 0
    x11_forms.gtk.wait("entry", lambda e: e["text"] == text, "the GTK entry to hold the ASCII text")
    assert caps_lock_on(xlib), "Caps Lock was left off"
    send(x11_forms, lambda d: d.press_key("Caps_Lock"))


def test_typing_works_whatever_the_layout(x11_forms: Forms) -> None:
    """Under a German layout y and z swap, @ needs AltGr (not reachable with Shift), ü exists."""
    text = "yz@ü€ Grüße"

    def setxkbmap(layout: str) -> None:
        subprocess.run(["setxkbmap", "-display", x11_forms.x_display, layout], check=True)

    setxkbmap("de")
    try:
        focus_gtk_entry(x11_forms)
        send(x11_forms, lambda d: d.type_text(text))
        x11_forms.gtk.wait("entry", lambda e: e["text"] == text, "the GTK entry to hold the text under 'de'")
    finally:
        setxkbmap("us")


def test_connection_failures_are_structured(x11_forms: Forms) -> None:
    with pytest.raises(DeskrigError) as caught:
        X11Input(":9999")
    assert caught.value.code == ErrorCode.DISPLAY_NOT_FOUND
    device = X11Input(x11_forms.x_display)
    device.close()
    device.close()  # closing twice is harmless
    with pytest.raises(DeskrigError) as caught:
        device.move(1, 1)
    assert caught.value.code == ErrorCode.INPUT_FAILED


# -- key names, no display needed -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "combo"),
    [
        ("ctrl+s", KeyCombo(("Control_L",), "s")),
        ("Control+Shift+T", KeyCombo(("Control_L", "Shift_L"), "T")),
        ("shift+Tab", KeyCombo(("Shift_L",), "Tab")),
        ("ENTER", KeyCombo((), "Return")),
        ("esc", KeyCombo((), "Escape")),
        ("pgup", KeyCombo((), "Page_Up")),
        ("del", KeyCombo((), "Delete")),
        ("space", KeyCombo((), " ")),
        ("f24", KeyCombo((), "F24")),
        ("kp_enter", KeyCombo((), "KP_Enter")),
        ("super", KeyCombo((), "Super_L")),
        ("cmd+q", KeyCombo(("Super_L",), "q")),
        ("win+Left", KeyCombo(("Super_L",), "Left")),
        ("ctrl++", KeyCombo(("Control_L",), "+")),
        ("+", KeyCombo((), "+")),
        ("é", KeyCombo((), "é")),
    ],
)
def test_key_combinations_parse_to_canonical_names(spec: str, combo: KeyCombo) -> None:
    assert parse_combo(spec) == combo


def test_key_name_errors_explain_themselves() -> None:
    with pytest.raises(DeskrigError) as caught:
        parse_key("Retrun")
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT
    assert caught.value.details == {"key": "Retrun", "suggestions": ["Return"]}
    for bad in ("", "a+b", "ctrl+", "ctrl++a", "\n"):
        with pytest.raises(DeskrigError):
            parse_combo(bad)
    assert parse_combo("t", modifiers=["ctrl", "alt"]).keys == ["Control_L", "Alt_L", "t"]
    assert parse_hotkey(["ctrl", "shift", "esc"]) == ["Control_L", "Shift_L", "Escape"]
