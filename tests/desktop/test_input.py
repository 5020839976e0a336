"""Pointer and keyboard input on every backend, read back from the apps' own logs.

``backend`` runs each test on X11 (Xvfb + openbox, both forms X clients) and on sway (the GTK form
native Wayland, the Tk form under Xwayland). X11-only facts (XTEST keymap restoration, Caps Lock,
layouts) are in test_x11_input.py.
"""

from __future__ import annotations

from typing import Any

from tests.polling import poll
from Xlib import X

from deskrig.model import TypeReport

from .forms import Forms
from .helpers import (
    UNICODE,
    UNICODE_LINE,
    click_and_wait,
    focus_gtk_entry,
    focus_tk_field,
    refused,
    send,
    type_while_stalled,
)

# -- typing ------------------------------------------------------------------------------------------


def test_unicode_lands_exactly_in_tk_text(backend: Forms) -> None:
    focus_tk_field(backend, "text")
    report: TypeReport = send(backend, lambda d: d.type_text(UNICODE))
    assert report.chars == len(UNICODE)
    backend.tk.wait("text", lambda e: e["text"] == UNICODE, "the Tk text widget to hold the text")


def test_unicode_lands_exactly_in_a_tk_stalled_while_it_is_typed(backend: Forms) -> None:
    """X11 gave a client 1 s to re-read the keyboard mapping after binding the characters the
    layout lacks, then typed on and restored the mapping: a Tk stalled longer (load 8) translated
    the keys late and lost every bound character. It is waited for now."""
    focus_tk_field(backend, "text")
    report: TypeReport = type_while_stalled(
        backend.tk.pid, lambda: send(backend, lambda d: d.type_text(UNICODE))
    )
    assert report.chars == len(UNICODE)
    backend.tk.wait("text", lambda e: e["text"] == UNICODE, "the Tk text widget to hold the text")


def test_unicode_lands_exactly_in_tk_and_gtk_entries(backend: Forms) -> None:
    focus_tk_field(backend, "entry")
    send(backend, lambda d: d.type_text(UNICODE_LINE))
    backend.tk.wait("entry", lambda e: e["text"] == UNICODE_LINE, "the Tk entry to hold the text")

    focus_gtk_entry(backend)
    send(backend, lambda d: d.type_text(UNICODE_LINE))
    backend.gtk.wait("entry", lambda e: e["text"] == UNICODE_LINE, "the GTK entry to hold the text")


def test_hotkey_select_all_then_typing_replaces_the_gtk_entry(backend: Forms) -> None:
    focus_gtk_entry(backend)
    send(backend, lambda d: d.type_text("old text"))
    backend.gtk.wait("entry", lambda e: e["text"] == "old text")
    send(backend, lambda d: d.hotkey(["ctrl", "a"]))
    send(backend, lambda d: d.type_text("new"))
    backend.gtk.wait("entry", lambda e: e["text"] == "new", "select-all and typing to replace the text")


# -- refusals ---------------------------------------------------------------------------------------


def test_bad_input_is_refused_and_sends_nothing(backend: Forms) -> None:
    entry = backend.center(backend.tk, "entry")
    send(backend, lambda d: d.button(*entry))  # the Tk form focused, as after any use of it
    x, y = backend.center(backend.tk, "button")
    # A right click as a marker (a left one would make the last click a double click): the focus
    # change above is logged before it (under load Tk logged the entry's FocusIn after the count
    # below was taken).
    send(backend, lambda d: d.button(x, y, button="right"))
    backend.tk.wait("mouse", lambda e: e["num"] == 3, "the marker's right click on the Tk button")
    tk_before, gtk_before = len(backend.tk.events()), len(backend.gtk.events())

    details = refused(lambda: send(backend, lambda d: d.button(5000, 10)))
    assert details["screen"] == {"width": 1280, "height": 800} and details["x"] == 5000
    for call in (
        lambda d: d.button(10, -1),
        lambda d: d.drag((x, y), (x, 900)),
        lambda d: d.move(1280, 0),
        lambda d: d.scroll(x, y, "down", 0),
        lambda d: d.scroll(x, y, "sideways", 1),
        lambda d: d.button(x, y, button="fourth"),
        lambda d: d.button(x, y, modifiers=["a"]),
        lambda d: d.hotkey(["ctrl"]),
    ):
        refused(lambda call=call: send(backend, call))
    bell = refused(lambda: send(backend, lambda d: d.type_text("bell\x07")))
    assert bell == {"characters": [{"index": 4, "codepoint": "U+0007"}]}
    assert "Return" in refused(lambda: send(backend, lambda d: d.press_key("Retrun")))["suggestions"]
    assert "shift" in refused(lambda: send(backend, lambda d: d.press_key("ctrl+shfit+t")))["suggestions"]

    position = backend.desktop.cursor_position()
    assert (position.x, position.y) == (x, y), "a refused action moved the pointer"
    # One real click as a marker: once it has landed, anything sent before it has landed too.
    click_and_wait(backend, x, y)
    assert [e["event"] for e in backend.tk.events()[tk_before:]] == ["mouse", "button"]
    assert len(backend.gtk.events()) == gtk_before


# -- keys and pointer -------------------------------------------------------------------------------


def test_a_click_by_coordinates_updates_the_gtk_label(backend: Forms) -> None:
    before = (backend.gtk.events("button") or [{"count": 0}])[-1]["count"]
    x, y = backend.center(backend.gtk, "button")
    send(backend, lambda d: d.button(x, y))
    backend.gtk.wait("button", lambda e: e["count"] == before + 1, "the GTK button's count to rise")
    position = backend.desktop.cursor_position()
    assert (position.x, position.y) == (x, y)


def test_click_double_click_and_right_click_on_the_tk_button(backend: Forms) -> None:
    x, y = backend.center(backend.tk, "button")
    count = len(backend.tk.events("button"))
    send(backend, lambda d: d.button(x, y))
    backend.tk.wait("button", lambda e: e["count"] == count + 1)
    send(backend, lambda d: d.button(x, y, count=2))
    backend.tk.wait("button", lambda e: e["count"] == count + 3, "a double click to press the button twice")
    assert backend.tk.events("double_click"), "Tk did not see the second click as a double click"
    send(backend, lambda d: d.button(x, y, button="right", modifiers=["ctrl"]))
    pressed = backend.tk.wait("mouse", lambda e: e["num"] == 3, "a right click on the button")
    assert pressed["state"] & X.ControlMask
    assert len(backend.tk.events("button")) == count + 3  # a right click does not invoke a Tk button


def test_scroll_moves_the_listbox(backend: Forms) -> None:
    x, y = backend.center(backend.tk, "listbox")
    send(backend, lambda d: d.scroll(x, y, "down", 5))
    moved = backend.tk.wait("listbox_view", lambda e: e["first"] > 0, "the listbox to scroll down")
    send(backend, lambda d: d.scroll(x, y, "up", 5))
    backend.tk.wait("listbox_view", lambda e: e["first"] < moved["first"], "the listbox to scroll back up")


def test_drag_moves_the_slider(backend: Forms) -> None:
    layout = backend.tk.layout()
    knob = backend.on_screen(backend.tk, layout["scale_knob"])
    end = backend.on_screen(backend.tk, layout["scale_end"])
    send(backend, lambda d: d.drag(knob, end, duration_ms=100, steps=10))
    backend.tk.wait("scale", lambda e: e["value"] >= 90, "the slider to follow the drag to its end")


def test_named_keys_and_combinations_reach_the_tk_entry(backend: Forms) -> None:
    focus_tk_field(backend, "entry")
    send(backend, lambda d: d.type_text("abc"))
    backend.tk.wait("entry", lambda e: e["text"] == "abc")
    seen = len(backend.tk.events("key"))
    send(backend, lambda d: d.press_key("BackSpace"))
    backend.tk.wait("entry", lambda e: e["text"] == "ab")
    for key in ("Return", "F5", "KP_Enter", "esc"):
        send(backend, lambda d, key=key: d.press_key(key))
    send(backend, lambda d: d.press_key("a", modifiers=["alt"]))
    send(backend, lambda d: d.press_key("shift+Tab"))  # last: it moves the focus out of the entry

    def keys_through_shift_tab() -> list[dict[str, Any]] | None:
        keys = backend.tk.events("key")[seen:]
        return keys if any(k["state"] & X.ShiftMask for k in keys) else None

    keys = poll("shift+Tab to reach the entry", keys_through_shift_tab)
    named = [(k["keysym"], k["state"] & (X.ShiftMask | X.Mod1Mask)) for k in keys if k["keysym"] != "??"]
    assert named == [
        ("BackSpace", 0),
        ("Return", 0),
        ("F5", 0),
        ("KP_Enter", 0),
        ("Escape", 0),
        ("Alt_L", 0),
        ("a", X.Mod1Mask),
        ("Shift_L", 0),
        ("ISO_Left_Tab", X.ShiftMask),
    ]
