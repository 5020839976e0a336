"""Screen pixels and screen changes on X11: MIT-SHM grabs through mss, and a DAMAGE counter.

mss >= 10.2 talks XCB, whose connections may be used from any thread, and guards each MSS object
with its own lock, so one grabber serves every thread the Desktop facade is called from. (Older
mss used Xlib handles that only worked on the thread that opened them.)
"""

from __future__ import annotations

import logging
import select
import threading
from collections.abc import Callable

import mss
from PIL import _imaging as pillow_core  # block caching has no other Python API
from Xlib import X
from Xlib.display import Display
from Xlib.ext import damage

from deskrig.desktop.x11_conn import close_display
from deskrig.errors import BackendError, ErrorCode
from deskrig.grabs import Grab
from deskrig.model import Bounds

log = logging.getLogger(__name__)

#: Every plane of a ZPixmap image.
ALL_PLANES = 0xFFFFFFFF

#: Freed 16 MiB Pillow blocks kept for reuse. Pillow keeps none by default, so every capture
#: page-faults a fresh image in: 1280x800 took 23 ms that way, 7 ms with blocks reused.
PILLOW_CACHED_BLOCKS = 4

#: Records a visible fallback: (component, message).
Note = Callable[[str, str], None]


def xlib_get_image(drawable: object, x: int, y: int, width: int, height: int) -> Grab:
    """XGetImage of a window or pixmap; ~10 ms for a 1280x800 screen, so only a fallback for screens."""
    reply = drawable.get_image(x, y, width, height, X.ZPixmap, ALL_PLANES)  # type: ignore[attr-defined]
    expected = width * height * 4
    if len(reply.data) < expected:
        # Depth 15/16 screens pack 2 bytes a pixel; deskrig supports 24/32-bit visuals only.
        raise BackendError(
            ErrorCode.CAPTURE_FAILED,
            f"got {len(reply.data)} bytes for {width}x{height} pixels; only 24/32-bit screens are supported",
        )
    return Grab.from_bgrx(reply.data[:expected], width, height)


class ScreenGrabber:
    """Grabs root-window regions with mss (MIT-SHM), or XGetImage when mss cannot work."""

    def __init__(self, display_name: str, xlib_display: Display, note: Note) -> None:
        self._display_name = display_name
        self._root = xlib_display.screen().root
        self._note = note
        if pillow_core.get_blocks_max() < PILLOW_CACHED_BLOCKS:
            pillow_core.set_blocks_max(PILLOW_CACHED_BLOCKS)
        self._mss: mss.MSS | None = None
        self._capacity = 0
        self._shm_checked = False
        try:
            self._open_mss()
        except mss.ScreenShotError as exc:
            note("capture", f"mss unavailable ({exc}); using XGetImage, about 30x slower")

    def _open_mss(self) -> None:
        if self._mss is not None:
            self._mss.close()
        self._mss = mss.MSS(display=self._display_name, backend="xshmgetimage")
        # mss sizes its shared-memory buffer for the screen as it is now.
        geometry = self._root.get_geometry()
        self._capacity = geometry.width * geometry.height
        self._shm_checked = False

    def grab(self, region: Bounds) -> Grab:
        """``region``'s pixels as the X server keeps them (BGRX), in a buffer of their own."""
        if self._mss is None:
            return xlib_get_image(self._root, region.x, region.y, region.width, region.height)
        if region.width * region.height > self._capacity:
            log.info("screen grew (RandR); reopening mss for %s", self._display_name)
            self._open_mss()
        monitor = {"left": region.x, "top": region.y, "width": region.width, "height": region.height}
        shot = self._mss.grab(monitor)
        if not self._shm_checked:
            self._shm_checked = True
            self._report_shm_status()
        # mss copies the shared segment into a fresh bytearray: the frame's alone.
        return Grab.from_bgrx(shot.raw, shot.width, shot.height)

    def _report_shm_status(self) -> None:
        """mss falls back to XGetImage by itself when MIT-SHM fails; make that visible."""
        assert self._mss is not None
        status = self._mss.performance_status
        if not any("MIT-SHM is working" in line for line in status):
            self._note("capture", "MIT-SHM unusable, mss uses XGetImage: " + "; ".join(status))

    def close(self) -> None:
        if self._mss is not None:
            self._mss.close()
            self._mss = None


class DamageCounter:
    """A serial that changes whenever anything on the root window may have changed, and the root
    window's size, both kept from the events of a connection of its own (so draining them never
    takes events from the connection the rest of the backend uses).

    The damage object reports "non-empty": the server sends one event when the damage region goes
    from empty to non-empty, and we empty it again on every call. An event seen in a call may stand
    for damage that happened after that call's subtract; then the region is non-empty again and no
    event will come for further damage. So a call that saw events leaves the counter "dirty" and
    the next call advances it once more. After a change the serial therefore moves on twice, then
    stays put while the screen is idle.

    A call that finds events already received, or is dirty, moves the serial on without asking the
    server anything: whatever else is on its way can only move it on again. Only a call that would
    say "unchanged" makes a round trip first, so that every event the server queued before it has
    arrived (a changing screen costs no round trip, a still one the one it always did); it sends no
    subtract, as the region is empty already.

    The root's size comes from its ConfigureNotify events (a RandR resize sends one), read with the
    damage events: no round trip a call. The X server writes a client's events out before a reply
    it queued later (its list of clients with output pending is in that order), so by the time the
    client that resized has its answer, the event is in this connection's socket.
    """

    def __init__(self, display_name: str) -> None:
        self._display = Display(display_name)
        self._lock = threading.Lock()
        # The server refuses DAMAGE requests from a client that has not negotiated a version.
        self._display.damage_query_version()
        # python-xlib registers a copy of the DamageNotify class, so events are told apart by code.
        self._notify_code = self._display.query_extension("DAMAGE").first_event + damage.DamageNotifyCode
        root = self._display.screen().root
        root.change_attributes(event_mask=X.StructureNotifyMask)
        self._damage = root.damage_create(damage.DamageReportNonEmpty)
        geometry = root.get_geometry()  # after selecting ConfigureNotify: no resize falls between
        self._bounds = Bounds(x=0, y=0, width=geometry.width, height=geometry.height)
        self._serial = 0
        #: DamageNotify events received and not yet counted by serial().
        self._unseen = 0
        self._dirty = True  # the first caller has never seen the screen
        self._readable = select.poll()
        self._readable.register(self._display.fileno(), select.POLLIN)

    def _drain(self) -> None:
        """Take in the events received so far (no round trip). python-xlib's own check costs some
        0.1 ms of Python, so it is made only when the socket has something to read; its queue is
        empty between calls (every call that fills it drains it)."""
        if not self._readable.poll(0):
            return
        self._take_events()

    def _take_events(self) -> None:
        while self._display.pending_events():
            event = self._display.next_event()
            if event.type == self._notify_code:
                self._unseen += 1
            elif event.type == X.ConfigureNotify:
                self._bounds = Bounds(x=0, y=0, width=event.width, height=event.height)

    def serial(self) -> int:
        with self._lock:
            self._drain()
            if self._unseen or self._dirty:
                # Empty the damage region, so that the next damage sends an event. (Without an
                # event since the last call, and not dirty, it is empty already.) Damage between
                # the events read above and this is in the grab that follows.
                self._display.damage_subtract(self._damage, X.NONE, X.NONE)
                self._display.flush()
            else:
                # The round trip makes every event the server queued before it arrive first.
                self._display.sync()
                self._take_events()
            seen, self._unseen = self._unseen, 0
            if seen or self._dirty:
                self._serial += 1
            self._dirty = seen > 0
            return self._serial

    def bounds(self) -> Bounds:
        """The root window's size as its last ConfigureNotify (or the start) gave it."""
        with self._lock:
            self._drain()
            return self._bounds

    def fileno(self) -> int:
        """The DAMAGE connection's socket: readable once a DamageNotify (or any reply) is waiting."""
        fd: int = self._display.fileno()
        return fd

    def close(self) -> None:
        close_display(self._display, "DAMAGE")
