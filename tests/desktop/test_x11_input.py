"""X11-only facts of X11Input (XTEST): the keymap it borrows and restores, Caps Lock, layouts.

The forms of ``x11_forms`` (conftest.py, forms.py) on Xvfb with openbox; typing, clicks, keys and
refusals that every backend shares are in test_input.py. Key-name parsing
(deskrig.desktop.keys) is checked without a display at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.polling import json_lines, poll
from Xlib import X
from Xlib.display import Display

from deskrig.desktop import x11_binding
from deskrig.desktop.keys import KeyCombo, parse_combo, parse_hotkey, parse_key
from deskrig.desktop.x11_input import X11Input
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import TypeReport

from .conftest import APPS_DIR, start_xvfb, stop_process
from .forms import Forms
from .helpers import UNICODE, UNICODE_LINE, focus_gtk_entry, focus_tk_field, send, stopped


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


def test_typing_into_a_hung_app_fails_and_types_nothing_wrong(
    x11_forms: Forms, xlib: Display, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An app that re-read the keyboard mapping before and does not within CATCH_UP_TIMEOUT_S is
    hung: type_text fails with TIMEOUT before sending keys it would translate with a stale mapping
    (it used to type them blind), and the mapping is put back."""
    before = keyboard_mapping(xlib)
    focus_tk_field(x11_forms, "text")
    send(x11_forms, lambda d: d.type_text("é"))  # Tk is seen re-reading a binding
    x11_forms.tk.wait("text", lambda e: e["text"] == "é", "the Tk text widget to hold é")
    focus_tk_field(x11_forms, "text")
    monkeypatch.setattr(x11_binding, "CATCH_UP_TIMEOUT_S", 2.0)  # the test need not wait 10 s
    with stopped(x11_forms.tk.pid), pytest.raises(DeskrigError) as caught:
        send(x11_forms, lambda d: d.type_text(UNICODE))
    assert caught.value.code == ErrorCode.TIMEOUT, caught.value
    assert caught.value.details is not None and caught.value.details["waited_seconds"] == 2.0
    assert keyboard_mapping(xlib) == before
    # Once it runs again, nothing of that call reaches the text: only what is typed next.
    send(x11_forms, lambda d: d.type_text("x"))
    x11_forms.tk.wait("text", lambda e: e["text"] == "x", "the Tk text widget to hold only x")


def test_an_app_that_re_reads_the_mapping_only_for_its_next_key_is_waited_for(tmp_path: Path) -> None:
    """xedit (Xaw) re-reads the keyboard mapping only when it next translates a key. A key without
    keysyms after each binding makes it re-read then, so it is waited for like any app; it used to
    be taken for one that never re-reads (after 1 s, or after 10 s without that key) and typed at
    blind from then on. On a display of its own (no window manager: the keyboard follows the
    pointer), not to disturb the forms' focus."""
    xvfb, display = start_xvfb(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "WAYLAND_DISPLAY"} | {"DISPLAY": display}
    # Not "international": Xaw then reads Latin-1 keysyms without an input method.
    command = ["xedit", "-xrm", "*international: false", "-geometry", "600x400+0+0"]
    xedit = subprocess.Popen(command, env=env, cwd=tmp_path, stderr=subprocess.DEVNULL)
    keyboard = X11Input(display)
    try:
        xlib = Display(display)
        root = xlib.screen().root
        poll(
            "xedit's window", lambda: [w for w in root.query_tree().children if w.get_attributes().map_state]
        )
        xlib.close()
        keyboard.button(300, 300)  # in its text
        report = keyboard.type_text("Grüße")
        assert report.remapped_keysyms == 2
        assert not [d.message for d in keyboard.diagnostics if "re-read" in d.message]
    finally:
        keyboard.close()
        stop_process(xedit)
        stop_process(xvfb)


KEY_READER = APPS_DIR / "x_key_reader.py"


def test_an_app_that_misses_a_mapping_change_is_sent_it_again(tmp_path: Path) -> None:
    """Xlib misses a change made while it loads the map for the first time (tests/apps/
    x_key_reader.py says how). xedit, whose first key is our sentinel after the binding, so
    missed the sentinel change after the typed keys in 12 of 230 calls on a loaded machine, and
    the call failed: the app "did not re-read the keyboard mapping within 10 s". The change is
    made again, so the app re-reads and every key comes out right."""
    xvfb, display = start_xvfb(tmp_path)
    log = tmp_path / "keys.jsonl"
    reader = subprocess.Popen([sys.executable, str(KEY_READER), "--display", display, "--log", str(log)])
    keyboard = X11Input(display)
    try:
        poll("the key reader's window", lambda: {"ready": True} in json_lines(log))
        keyboard.button(200, 150)  # in its window: the keyboard follows the pointer
        report = keyboard.type_text("Grüße")
        assert report.remapped_keysyms == 2
        assert not [d.message for d in keyboard.diagnostics if "re-read" in d.message]
        entries = json_lines(log)
        assert {"missed": True} in entries, "the app missed no change: this proves nothing"
        # Latin-1 keysyms are their code points; Shift's own key and the sentinel's are not text.
        typed = [chr(keysym) for entry in entries if 0 < (keysym := entry.get("keysym", 0)) < 0x100]
        assert "".join(typed) == "Grüße"
    finally:
        keyboard.close()
        stop_process(reader)
        stop_process(xvfb)


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
