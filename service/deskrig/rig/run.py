"""Running a rig as a program: start it, serve, stop on a signal or when the app or display ends."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.rig.core import Rig
from deskrig.rig.options import RigStartupError
from deskrig.signals import handling_signals

log = logging.getLogger(__name__)

#: :func:`run_until_signal`'s status when the X server died under a running rig (sysexits'
#: EX_UNAVAILABLE): the app usually dies with it, but the display is the cause.
EXIT_DISPLAY_LOST = 69
#: How long ``serve`` may take to return once asked to stop before the rig is stopped under it.
SERVE_STOP_GRACE = 5.0


def _stop_rig_if_serving_hangs(rig: Rig, stop_event: threading.Event, served: threading.Event) -> None:
    """A wedged X server (alive, not answering) blocks tool calls in X reads, and with them the
    server's shutdown and the desktop's close, while the rig's stop, which would end it, only
    comes after them: then stop the rig first, so that the blocked calls fail and serving ends."""
    stop_event.wait()
    if not served.wait(SERVE_STOP_GRACE):
        log.warning(
            "serving has not ended %g s after the stop (X server wedged?): stopping the rig", SERVE_STOP_GRACE
        )
        rig.stop()


def run_until_signal(rig: Rig, serve: Callable[[Rig, threading.Event], None]) -> int:
    """Start ``rig``, run ``serve(rig, stop_event)``, then stop the rig. Main thread only.

    ``stop_event`` is set on SIGINT/SIGTERM, when the app exits or when the X server dies;
    ``serve`` must return once it is set. Returns 0 after a signal (also one that interrupted
    start-up), else :data:`EXIT_DISPLAY_LOST` if the X server died, else the app's exit status if
    it exited on its own, else 0. Raises :class:`RigStartupError` if start-up fails.
    """
    if threading.current_thread() is not threading.main_thread():
        raise DeskrigError(ErrorCode.INVALID_ARGUMENT, "run_until_signal must be called from the main thread")
    stop_event = threading.Event()
    signals: list[int] = []
    app_statuses: list[int] = []
    display_statuses: list[int] = []

    def on_signal(signum: int) -> None:
        signals.append(signum)
        stop_event.set()
        rig.abort_startup()

    def stop_on_exit(statuses: list[int]) -> Callable[[int], None]:
        def record(status: int) -> None:
            statuses.append(status)
            stop_event.set()

        return record

    with handling_signals(on_signal):
        try:
            rig.on_app_exit(stop_on_exit(app_statuses))
            rig.on_display_exit(stop_on_exit(display_statuses))
            try:
                rig.start()
            except RigStartupError:
                if signals:
                    return 0
                raise
            if not stop_event.is_set():
                served = threading.Event()
                watch = threading.Thread(
                    target=_stop_rig_if_serving_hangs,
                    args=(rig, stop_event, served),
                    name="deskrig-stop-watch",
                )
                watch.daemon = True
                watch.start()
                try:
                    serve(rig, stop_event)
                finally:
                    served.set()
        finally:
            rig.stop()
    if signals:
        return 0
    if display_statuses:
        return EXIT_DISPLAY_LOST
    return app_statuses[0] if app_statuses else 0
