"""One "is a window manager running?" for the rig, the window list and input, asked afresh.

A window manager that starts after the input backend must be seen, and one that dies must stop
being believed. Here the window manager is a real X client that publishes EWMH's check window and
does nothing else, so it never moves the keyboard focus: a click then shows whether the input
backend thinks a WM runs (it looks for the focus in the clicked window for up to
``FOCUS_SETTLE_TIMEOUT_S``, waiting for a click-to-focus WM to move it) or not (it never looks).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.polling import poll
from Xlib import X, Xatom
from Xlib.display import Display
from Xlib.error import BadDrawable, BadWindow
from Xlib.xobject.drawable import Window

from deskrig.desktop import x11_pointer
from deskrig.desktop.x11_input import X11Input
from deskrig.desktop.x11_probes import mapped_windows
from deskrig.desktop.x11_windows import wm_check_window

from .conftest import start_xvfb, stop_process

#: How long a click that waits for a window manager's focus waits, in tests where none comes.
SETTLE_S = 0.3
#: ... and where it comes once the click waits for it: longer than any test takes.
LATE_FOCUS_SETTLE_S = 60.0


class CheckWindowOnly:
    """A window manager as far as EWMH's _NET_SUPPORTING_WM_CHECK can tell, and nothing more."""

    def __init__(self, display: str) -> None:
        self.xlib = Display(display)
        root = self.xlib.screen().root
        self.check = root.create_window(-10, -10, 1, 1, 0, X.CopyFromParent)
        atom = self.xlib.intern_atom("_NET_SUPPORTING_WM_CHECK")
        self.check.change_property(atom, Xatom.WINDOW, 32, [self.check.id])
        root.change_property(atom, Xatom.WINDOW, 32, [self.check.id])
        self.xlib.sync()

    def die(self, observer: Display) -> None:
        """Disconnect as a crashed WM does: the server destroys the check window, the root keeps its id."""
        check = self.check.id
        self.xlib.close()

        def gone() -> bool:
            try:
                observer.create_resource_object("window", check).get_geometry()
            except (BadWindow, BadDrawable):
                return True
            return False

        poll("the dead WM's check window to be destroyed", gone)


@pytest.fixture
def display(tmp_path: Path) -> Iterator[str]:
    xvfb, name = start_xvfb(tmp_path)
    yield name
    stop_process(xvfb)


def _toplevel(xlib: Display, x: int, override_redirect: bool = False) -> Window:
    window = xlib.screen().root.create_window(
        x, 100, 200, 150, 0, X.CopyFromParent, override_redirect=override_redirect
    )
    window.set_wm_name(f"window at {x}")
    window.map()
    return window


class FocusLooks:
    """The looks clicks take for the keyboard focus in the window they clicked: only a click that
    waits for a window manager to focus it looks (until it is focused, or ``settle_s``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, settle_s: float) -> None:
        monkeypatch.setattr(x11_pointer, "FOCUS_SETTLE_TIMEOUT_S", settle_s)
        self.count = 0
        #: Set at a click's first look: it waits for the focus.
        self.waiting = threading.Event()
        look = x11_pointer.X11Pointer._focus_within

        def counted(pointer: x11_pointer.X11Pointer, toplevel: int) -> bool:
            self.count += 1
            self.waiting.set()
            return look(pointer, toplevel)

        monkeypatch.setattr(x11_pointer.X11Pointer, "_focus_within", counted)

    def click(self, device: X11Input, x: int, y: int) -> int:
        """Click at (x, y); the looks for the focus it took."""
        before = self.count
        device.button(x, y)
        return self.count - before


def test_the_check_follows_a_window_manager_that_starts_and_dies(display: str) -> None:
    xlib = Display(display)
    try:
        assert wm_check_window(xlib) is None
        wm = CheckWindowOnly(display)
        assert wm_check_window(xlib) == wm.check.id
        wm.die(xlib)
        root_names = xlib.screen().root.get_full_property(
            xlib.intern_atom("_NET_SUPPORTING_WM_CHECK"), Xatom.WINDOW
        )
        assert root_names is not None and list(root_names.value) == [wm.check.id], "the stale id stays"
        assert wm_check_window(xlib) is None
    finally:
        xlib.close()


def test_the_rig_finds_a_window_mapped_after_the_window_manager_died(display: str) -> None:
    """The rig waits for the app's window in the WM's client list only while the WM lives: a dead
    one's stale list on the root names none of the windows mapped after it."""
    xlib = Display(display)
    try:
        wm = CheckWindowOnly(display)
        managed = _toplevel(xlib, 10)
        xlib.screen().root.change_property(
            xlib.intern_atom("_NET_CLIENT_LIST"), Xatom.WINDOW, 32, [managed.id]
        )
        unlisted = _toplevel(xlib, 300)
        xlib.sync()
        assert [wid for wid, _, _ in mapped_windows(xlib)] == [managed.id], "a live WM's list counts"
        wm.die(xlib)
        later = _toplevel(xlib, 600)
        xlib.sync()
        assert {wid for wid, _, _ in mapped_windows(xlib)} == {managed.id, unlisted.id, later.id}
    finally:
        xlib.close()


def test_input_sees_a_window_manager_start_after_it_and_stops_believing_in_a_dead_one(
    display: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    looks = FocusLooks(monkeypatch, SETTLE_S)
    xlib = Display(display)
    device = X11Input(display)
    try:
        clicked, focused = _toplevel(xlib, 100), _toplevel(xlib, 500)
        xlib.sync()
        poll(
            "both windows to be viewable",
            lambda: all(w.get_attributes().map_state == X.IsViewable for w in (clicked, focused)),
        )

        def click() -> int:
            # The focus is elsewhere and nothing here moves it: only a believed WM makes the click wait.
            focused.set_input_focus(X.RevertToNone, X.CurrentTime)
            xlib.sync()
            return looks.click(device, 200, 175)

        assert click() == 0

        wm = CheckWindowOnly(display)  # started after the input backend
        assert click() > 0, "the click did not wait for a window manager that started late"

        wm.die(xlib)
        assert click() == 0, "the click still waited for the focus from a window manager that died"
    finally:
        device.close()
        xlib.close()


def _viewable(xlib: Display, *windows: Window) -> None:
    xlib.sync()
    poll(
        "the windows to be viewable",
        lambda: all(w.get_attributes().map_state == X.IsViewable for w in windows),
    )


def test_a_click_waits_for_a_window_manager_that_focuses_late(
    display: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GTK and Qt take the focus themselves on WM_TAKE_FOCUS; under load that comes late, and keys
    sent after the click must not go to the window focused before it. Here the focus moves once
    the click waits for it."""
    looks = FocusLooks(monkeypatch, LATE_FOCUS_SETTLE_S)
    xlib, wm_side = Display(display), Display(display)
    device = X11Input(display)
    wm = CheckWindowOnly(display)
    try:
        clicked, focused = _toplevel(xlib, 100), _toplevel(xlib, 500)
        _viewable(xlib, clicked, focused)
        focused.set_input_focus(X.RevertToNone, X.CurrentTime)
        xlib.sync()

        def focus_late() -> None:
            looks.waiting.wait(timeout=LATE_FOCUS_SETTLE_S)
            wm_side.set_input_focus(clicked.id, X.RevertToNone, X.CurrentTime)
            wm_side.sync()

        mover = threading.Thread(target=focus_late)
        mover.start()
        device.button(200, 175)
        focus = xlib.get_input_focus().focus
        mover.join()
        assert not isinstance(focus, int) and focus.id == clicked.id, (
            "the click returned before the focus moved"
        )
    finally:
        device.close()
        wm.xlib.close()
        wm_side.close()
        xlib.close()


def test_a_click_on_a_menu_does_not_wait_for_the_focus(display: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Override-redirect windows (menus, tooltips) never get the focus from a window manager."""
    looks = FocusLooks(monkeypatch, SETTLE_S)
    xlib = Display(display)
    device = X11Input(display)
    wm = CheckWindowOnly(display)
    try:
        menu, focused = _toplevel(xlib, 100, override_redirect=True), _toplevel(xlib, 500)
        _viewable(xlib, menu, focused)
        focused.set_input_focus(X.RevertToNone, X.CurrentTime)
        xlib.sync()
        assert looks.click(device, 200, 175) == 0, "the click waited for a menu to get the focus"
    finally:
        device.close()
        wm.xlib.close()
        xlib.close()
