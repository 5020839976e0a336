"""Waiting until an X client under Xwayland has the focus sway gave its window.

sway focuses an Xwayland window through its X window manager: it sends the client
``WM_TAKE_FOCUS`` and sets the X input focus on the window. A click that reaches the client
before that message is undone by it (Tk moves its focus back to the widget it had), so a click
on an X window that was not focused waits for the X server's ``FocusIn`` on it, which the X
window manager's requests cause, with a deadline. Nothing is slept for a fixed time.

Xwayland admits only its own user's clients. A server running as root (a rig run as root runs
sway as another user) connects to it as that user: its effective uid is the socket owner's for
the ``connect`` only, which is all the X server checks (the peer's credentials at connect time).
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from Xlib import X
from Xlib import error as xlib_error
from Xlib.display import Display
from Xlib.error import DisplayError, XError
from Xlib.protocol import display as protocol_display
from Xlib.protocol import event as xlib_event

#: How long a click waits for the X focus before it goes ahead anyway.
X_FOCUS_TIMEOUT_S = 1.0
#: Focus events that say the focus is now in a window or below it (not NotifyPointer*).
_INTO_WINDOW = {
    X.NotifyAncestor,
    X.NotifyVirtual,
    X.NotifyInferior,
    X.NotifyNonlinear,
    X.NotifyNonlinearVirtual,
}


def _socket_owner(display: str) -> int | None:
    number = display.rpartition(":")[2].partition(".")[0]
    try:
        return os.stat(f"/tmp/.X11-unix/X{number}").st_uid
    except (OSError, ValueError):
        return None


@contextmanager
def _effective_uid(uid: int | None) -> Iterator[None]:
    """Run as ``uid`` (effective only) when we are root and it is someone else."""
    if uid is None or uid == os.geteuid() or os.geteuid() != 0:
        yield
        return
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)


def _open_with_own_code_tables(name: str) -> Display:
    """A connection to X display ``name`` with extension tables of its own.

    python-xlib keeps the extensions' major opcodes, event classes and error classes in dicts
    shared by every connection of the process, and each connection adds its server's extensions at
    the codes that server gave them. Xwayland numbers its extensions differently from an Xvfb this
    process may also talk to, so the connections would overwrite each other's: opening could fail
    (RandR's sub-events landing on a code another server gave a plain event), and the Xvfb
    connection would then send its RandR requests with Xwayland's opcode (answered BadLength or
    BadRequest). Opened with fresh dicts, the connection keeps them and the shared ones are left as
    they were.
    """
    protocol = protocol_display.Display
    shared = (protocol.extension_major_opcodes, protocol.event_classes, protocol.error_classes)
    own: tuple[dict[str, int], dict[int, Any], dict[int, Any]] = (
        {},
        xlib_event.event_class.copy(),
        xlib_error.xerror_class.copy(),
    )
    protocol.extension_major_opcodes, protocol.event_classes, protocol.error_classes = own
    try:
        display = Display(name)
        connection = display.display
        connection.extension_major_opcodes, connection.event_classes, connection.error_classes = own
        return display
    finally:
        protocol.extension_major_opcodes, protocol.event_classes, protocol.error_classes = shared


class XwaylandFocus:
    """One X connection to sway's Xwayland, used only to see where the X focus goes."""

    def __init__(self, display: str) -> None:
        with _effective_uid(_socket_owner(display)):
            self._display = _open_with_own_code_tables(display)

    def focus(
        self, window_id: int, give_focus: Callable[[], None], timeout: float = X_FOCUS_TIMEOUT_S
    ) -> bool:
        """Call ``give_focus`` (sway's focus command) and wait until the X focus is in X window
        ``window_id``; False when ``timeout`` passed first (the window does not take the focus)."""
        window = self._display.create_resource_object("window", window_id)
        try:
            # Watch before asking, so the FocusIn cannot come before we listen for it.
            window.change_attributes(event_mask=X.FocusChangeMask)
            self._display.sync()
        except XError:
            give_focus()  # the window is gone: sway reports that
            return False
        try:
            give_focus()
            return self._wait_for_focus_in(window_id, time.monotonic() + timeout)
        finally:
            with suppress(XError):
                window.change_attributes(event_mask=X.NoEventMask)
                self._display.sync()

    def _wait_for_focus_in(self, window_id: int, deadline: float) -> bool:
        while True:
            while self._display.pending_events():
                event = self._display.next_event()
                if event.type == X.FocusIn and event.window.id == window_id and event.detail in _INTO_WINDOW:
                    return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            readable, _, _ = select.select([self._display.fileno()], [], [], remaining)
            if not readable:
                return False
            self._display.pending_events()  # reads what arrived into the event queue

    def close(self) -> None:
        with suppress(DisplayError, OSError):
            self._display.close()
