"""Keeping typed keys in step with the app that reads them, through EWMH's ``_NET_WM_PING``.

The X server queues synthetic keystrokes for an app however slowly the app reads them: typing
100,000 characters ends on our side long before the app has handled them, and stopping the typing
then would leave that backlog to be typed for minutes. A window that lists ``_NET_WM_PING`` in
``WM_PROTOCOLS`` (GTK, Qt and Tk windows do) answers a ping by sending it back to the root window
when its toolkit reads it, which is after every key queued before it. Pinging after each chunk of
keys keeps the app at most about a chunk behind, so a cancelled ``type_text`` also stops in the
app, and progress counts what the app has read.

The pinger has its own connection: it selects SubstructureNotify on the root window to see the
answers, and that traffic must not mix with the input connection's events.
"""

from __future__ import annotations

import select
import time

from Xlib import X
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.protocol import event

from deskrig.desktop.x11_conn import close_display

#: How long an app may take to answer one ping before typing goes on without pacing.
PING_TIMEOUT_S = 2.0


class AppPacer:
    """Pings the window that has the keyboard focus and waits for its answer."""

    def __init__(self, display: str | None) -> None:
        self._display = Display(display)
        self._root = self._display.screen().root
        self._root.change_attributes(event_mask=X.SubstructureNotifyMask)
        self._protocols = self._display.intern_atom("WM_PROTOCOLS")
        self._ping = self._display.intern_atom("_NET_WM_PING")
        self._serial = 0
        self._display.sync()

    def target(self, focus: int) -> int | None:
        """The focus window, or its nearest ancestor, that answers pings; None if none does."""
        window = self._display.create_resource_object("window", focus)
        try:
            while window.id != self._root.id:
                protocols = window.get_full_property(self._protocols, X.AnyPropertyType)
                if protocols is not None and self._ping in protocols.value:
                    return int(window.id)
                parent = window.query_tree().parent
                if isinstance(parent, int) or parent.id == X.NONE:
                    return None
                window = parent
        except xerror.XError:  # the window went away
            return None
        return None

    def wait(self, window: int, timeout: float = PING_TIMEOUT_S) -> bool:
        """Ping ``window`` and wait until it answers (True) or ``timeout`` passes (False)."""
        self._serial = (self._serial + 1) & 0xFFFFFFFF
        target = self._display.create_resource_object("window", window)
        ping = event.ClientMessage(
            window=target, client_type=self._protocols, data=(32, [self._ping, self._serial, window, 0, 0])
        )
        target.send_event(ping, event_mask=X.NoEventMask)
        self._display.flush()
        deadline = time.monotonic() + timeout
        while True:
            while self._display.pending_events():
                answer = self._display.next_event()
                if self._is_answer(answer):
                    return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            select.select([self._display.fileno()], [], [], remaining)

    def _is_answer(self, answer: object) -> bool:
        if not isinstance(answer, event.ClientMessage) or answer.client_type != self._protocols:
            return False
        _, values = answer.data
        return bool(values[0] == self._ping and values[1] == self._serial)

    def close(self) -> None:
        close_display(self._display, "input pacing")
