"""The screen as it changes: one redacted frame per change, paced by the backend's damage.

What the live screen (:mod:`deskrig.live`) shows and the recorder's video (:mod:`deskrig.recording.video`)
encodes. Every frame is an :class:`~deskrig.observation.Observation` of the whole screen, so
blocked windows are black exactly as in a screenshot.

An idle screen is neither grabbed nor compared. On X11 the loop sleeps in ``select`` on the DAMAGE
connection (:meth:`~deskrig.desktop.Desktop.damage_fd`) once the damage serial has settled, and
wakes when something is drawn. Grabs are also compared byte for byte with the last frame: where
the damage serial moves without a change to the pixels (sway's, whose damage fd is wlr-screencopy's
``copy_with_damage``, :mod:`deskrig.desktop.sway_damage`, moves when it cannot prove a still
screen), :data:`PATIENCE` unchanged grabs in a row put the loop to sleep on that fd the same way.
A backend with no damage fd backs off to :data:`SLOW_TICK` while nothing changes.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass

from deskrig.errors import DeskrigError
from deskrig.model import Bounds
from deskrig.observation import Observer, Pixels, blocked_areas

#: Seconds between grabs while the screen changes: at most 30 frames a second.
FAST_TICK = 1 / 30
#: The slowest tick, reached by doubling while grabs come back unchanged (backends without damage).
SLOW_TICK = 0.25
#: Unchanged grabs in a row before the tick starts to slow down.
PATIENCE = 8


@dataclass(frozen=True)
class ScreenFrame:
    """One frame of the changing screen: the redacted pixels, and their BGRX rows."""

    pixels: Pixels
    bgrx: bytes | bytearray
    #: Unix time of the grab.
    grabbed_at: float
    #: The blocked windows' areas (screen bounds) blacked out in it: what is drawn on the frame
    #: later (the video's pointer) stays out of them.
    blocked: tuple[Bounds, ...] = ()

    @property
    def size(self) -> tuple[int, int]:
        return self.pixels.frame.size


def bgrx_rows(pixels: Pixels) -> bytes | bytearray:
    """The frame's pixels as BGRX rows: as grabbed, or packed from its Pillow image."""
    rows = pixels.frame.bgrx
    if rows is not None:
        return rows
    image = pixels.image
    return (image if image.mode == "RGB" else image.convert("RGB")).tobytes("raw", "BGRX")


class ScreenChanges:
    """The whole screen of ``observer``'s desktop, each time it differs from the frame before.

    Blocking, for one thread at a time. A capture failure (a resize mid-grab, a display going away)
    is raised from :meth:`next` as the ``DeskrigError`` it is; the next call starts afresh, slowly.
    """

    def __init__(self, observer: Observer, fast_tick: float = FAST_TICK) -> None:
        self.observer = observer
        self.fast_tick = fast_tick
        self._tick = fast_tick
        self._serial: int | None = None
        self._previous: bytes | bytearray | None = None
        self._unchanged = 0
        #: The damage serial (or the pixels) stopped moving: only new damage can change the screen.
        self._settled = False
        #: Monotonic time of the next grab, one tick after the last.
        self._due = 0.0

    def _serial_moved(self) -> bool:
        """Whether a settled serial moved on although no damage woke the loop: another caller of
        ``damage_serial`` (a screenshot, the other loop) read the notification first. One round
        trip; where the serial cannot tell (sway's, for a moment), one grab more."""
        try:
            return self.observer.desktop.damage_serial() != self._serial
        except DeskrigError:
            return True  # the grab that follows says what is wrong

    def next(self, timeout: float) -> ScreenFrame | None:
        """The screen as soon as it differs from the frame returned last (on the first call: as it
        is), at most one frame per tick; None once ``timeout`` seconds passed without a change."""
        desktop = self.observer.desktop
        deadline = time.monotonic() + timeout
        #: The serial was checked after a quiet wait: once per call, or a serial that moves with
        #: nothing drawn (sway's, while it cannot tell) would grab on past the deadline.
        checked = False
        while True:
            now = time.monotonic()
            fd = desktop.damage_fd()
            if self._settled and fd is not None:
                drawn = select.select([fd], [], [], max(0.0, deadline - now))[0]
                if not drawn and (checked or not self._serial_moved()):
                    return None  # nothing drawn
                checked = checked or not drawn
            else:
                wake = max(self._due, now)
                if wake > deadline:
                    time.sleep(max(0.0, deadline - now))
                    return None
                time.sleep(wake - now)
            self._due = time.monotonic() + self._tick
            try:
                serial = desktop.damage_serial()
                # Unchanged twice running: the damage serial is settled (see DamageCounter) and
                # only new damage, which wakes the select above, can move it on.
                self._settled = serial == self._serial
                if self._settled:
                    continue
                observation = self.observer.observe()
                pixels = observation.screen()
            except DeskrigError:
                self._serial, self._tick, self._settled = None, SLOW_TICK, False
                self._due = time.monotonic() + SLOW_TICK
                raise
            grabbed_at = time.time()
            self._serial = serial
            rows = bgrx_rows(pixels)
            if rows == self._previous:
                self._unchanged += 1
                if self._unchanged > PATIENCE:
                    self._tick = min(self._tick * 2, SLOW_TICK)
                    # A serial that moves with no change drawn (sway's, unable to prove a still screen)
                    # does not settle: the same pixels over and over do, where damage can wake the loop.
                    self._settled = fd is not None
                continue
            self._previous, self._unchanged, self._tick = rows, 0, self.fast_tick
            return ScreenFrame(pixels, rows, grabbed_at, blocked_areas(observation))
