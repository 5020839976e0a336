"""Damage on sway: when something on screen may have changed, known without grabbing the screen.

sway has no damage events for clients, but wlr-screencopy (version 2, wlroots >= 0.12) has
``copy_with_damage``: the copy completes only once the output has damage since this client's
previous copy of it. :class:`DamageWatch` keeps one such copy pending on every output, on a
Wayland connection and a thread of its own (libwayland proxies stay on the thread that made them),
asleep in ``select`` while the screen is still. Each completed (or failed) copy is one "may have
changed": a byte written to a pipe whose read end is the backend's ``damage_fd``, and the copy
is asked for again at once (damage in between is kept by the compositor, so none is lost).

The pixels copied are not used: the copy is the notification. It costs the compositor one copy
of the output per change it reports, and nothing while the screen is still.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from deskrig.desktop.sway_protocols import ZwlrScreencopyManagerV1
from deskrig.desktop.sway_wayland import ShmBuffer, WaylandConnection, nonblocking_pipe
from deskrig.errors import DeskrigError

log = logging.getLogger(__name__)

#: The screencopy version with ``copy_with_damage``.
DAMAGE_VERSION = 2
#: Seconds before a copy the compositor failed is asked for again (an output going away fails it).
RETRY_SECONDS = 0.25


@dataclass
class _Pending:
    """The copy pending on one output, and the buffer it copies into (kept while its shape holds)."""

    frame: Any = None
    done: bool = False
    #: Monotonic time before which a failed copy is not asked for again.
    retry_at: float = 0.0
    buffers: dict[tuple[int, int, int, int], ShmBuffer] = field(default_factory=dict)


class DamageWatch:
    """Watches every output of the compositor at ``socket`` (as in WAYLAND_DISPLAY) for damage."""

    def __init__(self, socket: str) -> None:
        self._connection = WaylandConnection(socket)
        try:
            self._screencopy = self._connection.bind(ZwlrScreencopyManagerV1, DAMAGE_VERSION)
        except DeskrigError:
            self._connection.close()
            raise
        self._damaged, self._notify = nonblocking_pipe()
        self._stop_read, self._stop_write = nonblocking_pipe()
        self._pending: dict[str, _Pending] = {}
        self._thread = threading.Thread(target=self._watch, name="deskrig-sway-damage", daemon=True)
        self._thread.start()

    def fileno(self) -> int:
        """Readable once the screen may have changed since the last :meth:`drain`."""
        return self._damaged

    def drain(self) -> bool:
        """Whether damage came since the last call; empties :meth:`fileno`."""
        seen = False
        with contextlib.suppress(BlockingIOError):
            while os.read(self._damaged, 4096):
                seen = True
        return seen

    def close(self) -> None:
        os.write(self._stop_write, b"x")
        self._thread.join()
        for fd in (self._damaged, self._notify, self._stop_read, self._stop_write):
            os.close(fd)

    # -- the watcher thread -------------------------------------------------------------------------

    def _watch(self) -> None:
        try:
            while True:
                wait = self._arm()
                self._connection.dispatch_pending()
                readable, _, _ = select.select([self._connection.fileno(), self._stop_read], [], [], wait)
                if self._stop_read in readable:
                    return
                if readable:
                    self._connection.read_events()
        except DeskrigError as exc:  # the compositor is gone: every capture will say so
            log.warning("sway damage watch ended: %s", exc.message)
            self._damage()  # wake the watchers, which find the capture failing
        finally:
            self._release()

    def _arm(self) -> float | None:
        """Ask for a copy with damage on each output that has none pending (a new output too);
        how long until a failed one may be asked for again (None: none is waiting)."""
        now = time.monotonic()
        waits: list[float] = []
        outputs = self._connection.outputs()
        for name in [name for name in self._pending if name not in outputs]:
            self._release_output(self._pending.pop(name))
        for name, output in outputs.items():
            pending = self._pending.setdefault(name, _Pending())
            if pending.frame is not None and not pending.done:
                continue
            if pending.retry_at > now:
                waits.append(pending.retry_at - now)
                continue
            if pending.frame is not None:
                pending.frame.destroy()
            pending.done = False
            pending.frame = self._screencopy.capture_output(0, output)
            pending.frame.dispatcher["buffer"] = lambda _f, *shape, p=pending: self._copy(p, tuple(shape))
            pending.frame.dispatcher["ready"] = lambda _f, *_time, p=pending: self._completed(p)
            pending.frame.dispatcher["failed"] = lambda _f, p=pending: self._completed(p, failed=True)
        return min(waits, default=None)

    def _copy(self, pending: _Pending, shape: tuple[int, int, int, int]) -> None:
        buffer = pending.buffers.get(shape)
        if buffer is None:
            for old in pending.buffers.values():  # the output changed size: the old ones are done
                old.release()
            pending.buffers = {shape: (buffer := self._connection.new_buffer(shape))}
        pending.frame.copy_with_damage(buffer.buffer)

    def _completed(self, pending: _Pending, failed: bool = False) -> None:
        pending.done = True
        if failed:
            pending.retry_at = time.monotonic() + RETRY_SECONDS
        self._damage()

    def _damage(self) -> None:
        with contextlib.suppress(BlockingIOError):  # the pipe is full: the news is already there
            os.write(self._notify, b"d")

    def _release_output(self, pending: _Pending) -> None:
        if pending.frame is not None:
            pending.frame.destroy()
        for buffer in pending.buffers.values():
            buffer.release()

    def _release(self) -> None:
        for pending in self._pending.values():
            self._release_output(pending)
        self._pending.clear()
        with contextlib.suppress(DeskrigError):
            self._connection.close()
