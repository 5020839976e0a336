"""Closing python-xlib connections whose X server may already be gone.

``Display.close()`` flushes first, and on a connection the server has closed (Xvfb killed, the rig
stopping) the flush raises ``ConnectionClosedError``. python-xlib has already closed the socket
by then, so there is nothing left to release: teardown logs it and carries on, so that one dead
connection neither stops the others from closing nor ends the process with a traceback.
"""

from __future__ import annotations

import logging

from Xlib.display import Display
from Xlib.error import ConnectionClosedError, DisplayError, XError

from deskrig.errors import DeskrigError, ErrorCode

log = logging.getLogger(__name__)


def close_display(display: Display, what: str) -> None:
    """Close ``display``; a server that is gone (or an error it reported late) is only logged."""
    try:
        display.close()
    except (ConnectionClosedError, XError, OSError) as exc:
        log.debug("closing the %s connection: the X server is gone or refused (%s)", what, exc)


def open_display(display: str | None, purpose: str = "") -> Display:
    """A new connection to ``display`` (None: ``$DISPLAY``); DISPLAY_NOT_FOUND when there is none."""
    try:
        return Display(display)
    except (DisplayError, OSError) as exc:
        raise DeskrigError(
            ErrorCode.DISPLAY_NOT_FOUND,
            f"cannot open X display {display or '$DISPLAY'}{purpose}: {exc}",
            details={"display": display},
        ) from exc
