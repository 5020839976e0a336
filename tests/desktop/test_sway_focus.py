"""A click on an X window under Xwayland that was not focused waits for the X focus to arrive
(an event, with a deadline), never for a fixed time, and still lands where it was aimed."""

from __future__ import annotations

import copy
import time
from types import SimpleNamespace
from typing import Any

import pytest
from Xlib.protocol import display as protocol_display

from deskrig.desktop import sway_input
from deskrig.desktop.sway_xfocus import XwaylandFocus

from .conftest import Desktop
from .forms import Forms
from .helpers import focus_gtk_entry, send


def _no_sleeping(seconds: float) -> None:
    raise AssertionError(f"the sway input device slept for a fixed {seconds} s")


def test_a_click_on_an_unfocused_x_window_waits_for_its_focus_not_a_fixed_time(
    sway_forms: Forms, monkeypatch: pytest.MonkeyPatch
) -> None:
    forms = sway_forms
    monkeypatch.setattr(
        sway_input, "time", SimpleNamespace(monotonic=sway_input.time.monotonic, sleep=_no_sleeping)
    )
    for round_number in range(3):
        focus_gtk_entry(forms)  # the Tk window loses the focus to the native GTK one
        x, y = forms.center(forms.tk, "text")
        send(forms, lambda d, x=x, y=y: d.button(x, y))
        send(forms, lambda d, n=round_number: d.type_text(str(n)))
        forms.tk.wait(
            "text",
            lambda e, n=round_number: e["text"].endswith(str(n)),
            "the click to put Tk's focus in its text",
        )
    assert not any(d.component == "input" for d in forms.desktop.diagnostics)


def test_the_x_focus_watch_returns_on_the_focus_in_and_times_out_without_one(sway_forms: Forms) -> None:
    forms = sway_forms
    watch = XwaylandFocus(forms.x_display)  # as sway's user, as the device connects when run as root
    try:
        root = watch._display.screen().root
        tk = next(w for w in root.query_tree().children if w.get_wm_name() == forms.tk.title)
        tk_window = forms.window(forms.tk)
        focus_gtk_entry(forms)

        started = time.monotonic()
        nothing = watch.focus(tk.id, lambda: None, timeout=0.3)
        waited = time.monotonic() - started
        taken = watch.focus(tk.id, lambda: forms.desktop.activate_window(tk_window.id))
        focus = watch._display.get_input_focus().focus
    finally:
        watch.close()

    assert not nothing and waited >= 0.3
    assert taken
    assert focus.id == tk.id or tk.id in _ancestors(focus)


def _ancestors(window: Any) -> list[int]:
    found = []
    while True:
        parent = window.query_tree().parent
        if not parent or parent.id == 0:
            return found
        found.append(parent.id)
        window = parent


def test_the_x_focus_watch_leaves_other_x_connections_extension_tables_alone(
    sway_forms: Forms, bare_desktop: Desktop
) -> None:
    """python-xlib shares the extensions' opcode, event-class and error-class dicts between
    connections; Xvfb's (``bare_desktop`` has one open) and Xwayland's extensions are numbered
    differently."""
    display = protocol_display.Display

    def tables() -> tuple[object, ...]:
        events = {code: copy.copy(classes) for code, classes in display.event_classes.items()}
        return dict(display.extension_major_opcodes), events, dict(display.error_classes)

    before = tables()
    watch = XwaylandFocus(sway_forms.x_display)
    watch.close()

    assert tables() == before
    assert bare_desktop.xlib.get_input_focus()  # the Xvfb connection still works
    # ... and its RandR requests still carry Xvfb's RandR opcode (Xwayland's got BadLength).
    assert bare_desktop.xlib.screen().root.xrandr_get_screen_resources().crtcs
