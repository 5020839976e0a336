"""Screen pixels and screen changes on X11: MIT-SHM grabs of the rows drawn on, DAMAGE regions and
a DAMAGE counter.

The grabs go into a shared-memory segment of the grabber's own, attached through mss's XCB
bindings (XCB connections may be used from any thread): mss's own ``grab`` copies the whole
segment into a fresh buffer (4 MB at 1280x800, page faults and all). Here the grabber keeps the
last frames of each region (:class:`deskrig.grabs.KeptFrames`) and makes each new one from the
rows it grabbed and the kept frame's others; the frame tells the encoders which bands to encode
again. The segment is read only inside :meth:`ScreenGrabber.grab`, under the grabber's lock; a
frame handed out is a buffer of its own that is never written while a caller holds it. Where the
segment cannot be set up (no MIT-SHM, a remote server, mss's bindings changed) mss grabs as
before, and a diagnostic says so.

Damage first, then only the rows drawn on (:meth:`DamageRegions.grab_drawn`). Each grab grabs the
server, reads where the root window was drawn on since the last read (DamageSubtract into an
XFixes region, then FetchRegion), marks every kept region's bands it touches as suspect, asks
ShmGetImage for the full-width rows of the requested region's suspect bands (one request per run
of adjacent bands, each landing at its own offset, so the segment is laid out as a grab of the
whole region) and ungrabs. A still screen costs one round trip and no image at all: the frame is
the kept one, under a number of its own.

Why never stale: the X server runs one request at a time and records a drawing request's damage
while it runs it, so a read names every pixel drawn on between the read before and itself. A
region's newest kept frame was grabbed right after a read, with nothing drawn in between; a pixel
drawn on since then was named by one of the reads since, each of which marked the band suspect in
every kept region. So every band that may differ from the kept frame is grabbed again.

Why never torn: while the server is grabbed it runs no other client's requests, so nothing draws
between the read and the ShmGetImages. The rows grabbed are the screen at the moment of the read,
and the rows not grabbed were not drawn on since the kept frame, so they are too: the frame is the
screen at one moment, as a whole-region grab would be. The read and the grabs must be on one
connection, the one holding the server: a request on any other would wait for the ungrab (mss's
XCB connection's ShmGetImage: a deadlock). So the grabs go on the DAMAGE connection, written as
the protocol says, naming the segment the XCB connection attached: a segment is a server resource
any client may name by its XID (Xvfb and Xorg look it up without asking whose it is; a server that
refuses answers with an error, and the grabber falls back to whole-region grabs and says so). That
is preferred to attaching the memfd a second time on the DAMAGE connection (ShmAttachFd, the fd
passed with ``sendmsg``): one segment, one set-up with its checks, and the grabs without DAMAGE
(whole regions through XCB, every band compared) stay as they were. Nothing waits on another X
connection while the server is grabbed, and the ungrab is sent whatever fails (a connection that
breaks releases the grab in the server).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import mmap
import os
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable

import mss
from mss.linux import xcb, xcbgen, xcbhelpers
from PIL import _imaging as pillow_core  # block caching has no other Python API
from Xlib import X
from Xlib.display import Display
from Xlib.error import ConnectionClosedError, XError
from Xlib.ext import damage

from deskrig.desktop.x11_conn import close_display
from deskrig.errors import BackendError, ErrorCode
from deskrig.grabs import BGRX_PIXEL, Grab, KeptFrames, RecentlyUsed, Rectangle
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


def check_image_size(size: int, width: int, height: int) -> None:
    """Raises unless a grab of ``width`` x ``height`` pixels came as ``size`` bytes of 4-byte pixels."""
    if size != width * height * BGRX_PIXEL:
        # Depth 15/16 screens pack 2 bytes a pixel; deskrig supports 24/32-bit visuals only.
        raise BackendError(
            ErrorCode.CAPTURE_FAILED,
            f"got {size} bytes for {width}x{height} pixels; only 24/32-bit screens are supported",
        )


def _memory_file(name: str) -> int:
    """An anonymous file in memory, to share with the X server."""
    if sys.platform != "linux":  # memfd_create is Linux's; an X server elsewhere is grabbed by mss
        raise mss.ScreenShotError("no memfd_create off Linux")
    return os.memfd_create(name, os.MFD_CLOEXEC)


class SharedSegment:
    """A memfd shared with the X server (MIT-SHM 1.2's AttachFd) on a connection of its own, which
    ShmGetImage fills with root-window pixels: mss's XCB bindings, not its copying ``grab``. Whole
    regions are grabbed on that connection (:meth:`grab`); the rows drawn on, on the DAMAGE
    connection, which names the segment by :attr:`id`.
    Raises :class:`mss.ScreenShotError` (or OSError) when it cannot be set up."""

    def __init__(self, display_name: str, capacity: int) -> None:
        connection, screen_number = xcb.connect(display_name)
        self._connection: xcbhelpers.Connection | None = connection
        self._segment: mmap.mmap | None = None
        try:
            setup = xcb.get_setup(self._connection)
            if setup.image_byte_order != xcbgen.ImageOrder.LSBFirst:
                raise mss.ScreenShotError("the X server's images are not LSB first")
            self._root = xcbgen.setup_roots(setup)[screen_number].root
            if not xcb.get_extension_data(self._connection, xcbhelpers.LIB.shm_id).present:
                raise mss.ScreenShotError("no MIT-SHM extension")
            version = xcbgen.shm_query_version(self._connection)
            if (version.major_version, version.minor_version) < (1, 2):
                raise mss.ScreenShotError("MIT-SHM older than 1.2 (no AttachFd)")
            memfd = _memory_file("deskrig-grab")
            try:
                os.ftruncate(memfd, capacity)
                # Writable only so ctypes can take the address; nothing here writes to it.
                self._segment = mmap.mmap(memfd, capacity)
                #: The segment's XID: a server resource, which the DAMAGE connection names too.
                self.id = xcb.generate_id(self._connection).value
                descriptor = os.dup(memfd)  # XCB closes the one it sends, on success or not
                xcbgen.shm_attach_fd(self._connection, xcbgen.ShmSeg(self.id), descriptor, 0)
            finally:
                os.close(memfd)
        except BaseException:
            self.close()
            raise

    def grab(self, region: Bounds) -> int:
        """ShmGetImage of ``region`` into the segment; the address of its rows, which stay as they
        are until the next grab."""
        assert self._segment is not None and self._connection is not None
        reply = xcbgen.shm_get_image(
            self._connection,
            self._root,
            region.x,
            region.y,
            region.width,
            region.height,
            ALL_PLANES,
            xcbgen.ImageFormat.ZPixmap,
            xcbgen.ShmSeg(self.id),
            0,
        )
        check_image_size(reply.size, region.width, region.height)
        return self.address

    @property
    def address(self) -> int:
        """Where the segment's bytes are (a grab of W x H pixels fills its first W * H * 4)."""
        assert self._segment is not None
        return ctypes.addressof(ctypes.c_char.from_buffer(self._segment))

    def close(self) -> None:
        if self._segment is not None:
            self._segment.close()
            self._segment = None
        if self._connection is not None:
            with contextlib.suppress(xcbhelpers.XError):  # a server gone already: nothing to release
                xcb.disconnect(self._connection)
            self._connection = None


class ScreenGrabber:
    """Grabs root-window regions into a shared-memory segment of its own (MIT-SHM): only the rows
    drawn on since a region's last frame where DAMAGE says where (see the module docstring), whole
    regions else; failing MIT-SHM with mss (which falls back to XGetImage itself), else with
    python-xlib's XGetImage."""

    def __init__(self, display_name: str, xlib_display: Display, note: Note) -> None:
        self._display_name = display_name
        self._root = xlib_display.screen().root
        self._note = note
        if pillow_core.get_blocks_max() < PILLOW_CACHED_BLOCKS:
            pillow_core.set_blocks_max(PILLOW_CACHED_BLOCKS)
        self._lock = threading.Lock()
        self._segment: SharedSegment | None = None
        #: Per region (position and size), the frames grabbed of it: the regions grabbed last.
        self._kept: RecentlyUsed[Bounds, KeptFrames] = RecentlyUsed(
            lambda region: KeptFrames(region.width, region.height, (region.x, region.y))
        )
        #: Where the screen was drawn on, read at each grab with the server grabbed until the rows
        #: drawn on are grabbed; made before any frame is kept, so its first read names everything
        #: drawn since.
        self._damage: DamageRegions | None = None
        try:
            self._damage = DamageRegions(display_name)
        except (BackendError, XError) as exc:
            note("capture", f"no DAMAGE regions ({exc}); every band of a grab is compared")
        self._mss: mss.MSS | None = None
        self._capacity = 0
        self._shm_checked = False
        try:
            self._open()
        except mss.ScreenShotError as exc:
            note("capture", f"mss unavailable ({exc}); using XGetImage, about 30x slower")
        if self._segment is None and self._damage is not None:  # no kept frames to spare compares
            self._damage.close()
            self._damage = None

    def _open(self) -> None:
        """(Re)open the segment, or mss where it cannot be had, sized for the screen as it is now."""
        self._close_grabbers()
        geometry = self._root.get_geometry()
        self._capacity = geometry.width * geometry.height
        try:
            self._segment = SharedSegment(self._display_name, self._capacity * BGRX_PIXEL)
            return
        except (mss.ScreenShotError, OSError, AttributeError) as exc:
            self._note("capture", f"no shared-memory segment of deskrig's own ({exc}); mss copies each grab")
        self._mss = mss.MSS(display=self._display_name, backend="xshmgetimage")
        self._shm_checked = False

    def grab(self, region: Bounds) -> Grab:
        """``region``'s pixels as the X server keeps them (BGRX), in a buffer of their own that is
        never written while the frame is held."""
        with self._lock:
            if self._segment is None and self._mss is None:
                return xlib_get_image(self._root, region.x, region.y, region.width, region.height)
            if region.width * region.height > self._capacity:
                log.info("screen grew (RandR); reopening the grabber for %s", self._display_name)
                self._open()
            if self._segment is None:
                return self._grab_with_mss(region)
            kept = self._kept.get(region)
            if self._damage is not None:
                try:
                    return self._grab_drawn(self._damage, self._segment, region, kept)
                except (BackendError, ConnectionClosedError) as exc:
                    # Whole regions are grabbed and compared from now on: correct, only slower.
                    # (A grab the server refuses fails again so, and its error is the caller's.)
                    self._note("capture", f"DAMAGE regions lost ({exc}); every band of a grab is compared")
                    self._damage.close()
                    self._damage = None
            return kept.take(self._segment.grab(region))

    def _grab_drawn(
        self, damage: DamageRegions, segment: SharedSegment, region: Bounds, kept: KeptFrames
    ) -> Grab:
        """Damage first, then the rows of ``region`` that may have changed since ``kept``'s newest
        frame, with the server grabbed in between (:meth:`DamageRegions.grab_drawn`)."""

        def suspect_rows(drawn: list[Rectangle]) -> list[tuple[int, int]]:
            for frames in self._kept.values():
                frames.drawn(drawn)
            return kept.suspect_rows()

        damage.grab_drawn(region, segment.id, suspect_rows)
        return kept.take(segment.address, suspect_only=True)

    def _grab_with_mss(self, region: Bounds) -> Grab:
        assert self._mss is not None
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
        """Release the segment and the connections once no grab is reading them: a grab in
        another thread copies from the segment by address, and unmapping it under the copy
        crashed the process. A grab that holds on past :data:`CLOSE_WAIT_S` (a stuck X server)
        leaves them to the process's end instead."""
        if not self._lock.acquire(timeout=CLOSE_WAIT_S):
            log.warning(
                "a grab of %s still runs: its segment is left to the process's end", self._display_name
            )
            return
        try:
            self._close_grabbers()
            if self._damage is not None:
                self._damage.close()
                self._damage = None
        finally:
            self._lock.release()

    def _close_grabbers(self) -> None:
        self._kept.clear()
        if self._segment is not None:
            self._segment.close()
            self._segment = None
        if self._mss is not None:
            self._mss.close()
            self._mss = None


#: Every X event, error and reply starts with 32 bytes; a reply's (and a generic event's) CARD32 at
#: byte 4 counts the 4-byte units that follow.
X_UNIT = 32
X_ERROR, X_REPLY, X_GENERIC_EVENT = 0, 1, 35
#: GetInputFocus: the smallest request with a reply, sent for a round trip (as XSync does).
GET_INPUT_FOCUS = struct.pack("=BxH", 43, 1)
#: GetGeometry's opcode: the root's size, with the reply's width and height at bytes 16 and 18.
GET_GEOMETRY = 14
#: DAMAGE's minor opcode for DamageSubtract (damage, repair, parts: 16 bytes with its header).
DAMAGE_SUBTRACT = 3
#: XFixes' minor opcodes for CreateRegion (with no rectangles) and FetchRegion.
XFIXES_CREATE_REGION, XFIXES_FETCH_REGION = 5, 19
#: GrabServer and UngrabServer: no replies. While a client holds the server, the server runs no
#: other client's requests (they wait, as does a GrabServer of theirs).
GRAB_SERVER, UNGRAB_SERVER = struct.pack("=BxH", 36, 1), struct.pack("=BxH", 37, 1)
#: MIT-SHM's minor opcode for ShmGetImage (32 bytes with its header); its reply's CARD32 at byte
#: 12 is the size of the image.
SHM_GET_IMAGE = 4
#: How long a round trip may take before the X server is taken for stuck (a python-xlib sync
#: would wait forever).
ROUND_TRIP_TIMEOUT_S = 10.0
#: How long closing the grabber waits for a grab in progress (one stuck past a round trip's
#: timeout is stuck).
CLOSE_WAIT_S = ROUND_TRIP_TIMEOUT_S


class XUnits:
    """What an X server sends on one connection, whole: events, errors and replies (with their
    extra data), in the order they came, read off its socket. ``unparsed``: bytes already read
    from the socket by whoever used it before (python-xlib's unparsed tail)."""

    def __init__(self, connection: socket.socket, unparsed: bytes = b"") -> None:
        self._socket = connection
        self._received = bytearray(unparsed)
        self._readable = select.poll()
        self._readable.register(connection.fileno(), select.POLLIN)

    def send(self, request: bytes) -> None:
        try:
            self._socket.sendall(request)
        except OSError as exc:  # the server went away between a read and this write
            raise ConnectionClosedError(f"the X server ({exc})") from exc

    def readable(self, timeout_ms: int = 0) -> bool:
        """Whether the socket has something to read within ``timeout_ms``."""
        return bool(self._readable.poll(timeout_ms))

    def receive(self) -> list[bytes]:
        """Read what the socket holds (it must be readable): every unit now whole, in order. A
        unit's first byte says what it is (the top bit: an event sent by SendEvent)."""
        # A lost connection is python-xlib's ConnectionClosedError, as on every other connection
        # of the backend: the desktop reports it as DISPLAY_NOT_FOUND (the display is gone).
        try:
            data = self._socket.recv(1 << 16)
        except OSError as exc:
            raise ConnectionClosedError(f"the X server ({exc})") from exc
        if not data:
            raise ConnectionClosedError("the X server")
        received = self._received
        received += data
        units = []
        start = 0
        while len(received) - start >= X_UNIT:
            size = X_UNIT
            if received[start] & 0x7F in (X_REPLY, X_GENERIC_EVENT):
                size += 4 * struct.unpack_from("=I", received, start + 4)[0]
            if len(received) - start < size:
                break
            units.append(bytes(received[start : start + size]))
            start += size
        del received[:start]
        return units

    def fileno(self) -> int:
        return self._socket.fileno()

    def close(self) -> None:
        self._socket.close()


def round_trip(wire: XUnits, request: bytes, receive: Callable[[], bytes | None]) -> bytes:
    """Send ``request`` (the last one with a reply) and read up to its reply, which it returns:
    every event the server queued before it has arrived then. ``receive()`` takes in what the
    socket holds and returns the reply among it, if any."""
    wire.send(request)
    deadline = time.monotonic() + ROUND_TRIP_TIMEOUT_S
    while True:
        wait_ms = max(0, round((deadline - time.monotonic()) * 1000))
        if not wire.readable(wait_ms):
            raise BackendError(
                ErrorCode.CAPTURE_FAILED, f"the X server did not answer in {ROUND_TRIP_TIMEOUT_S:g} s"
            )
        reply = receive()
        if reply is not None:
            return reply


class DamageRegions:
    """Where the root window was drawn on since the last read, as rectangles: a DAMAGE object of
    its own, on a connection of its own, whose region each read moves into an XFixes region
    (DamageSubtract with ``parts``) and fetches (XFixesFetchRegion), in one round trip; and
    :meth:`grab_drawn`, which reads it and grabs rows where they may have changed, with the server
    grabbed between the two.

    The X server adds a drawing request's damage while it runs that request, and runs one request
    at a time, so the rectangles a read returns cover every pixel changed between the read before
    and the moment the server ran this one. (Its DamageNotify events are read and dropped.)
    Raises :class:`BackendError` when DAMAGE, XFixes 2 or MIT-SHM is missing."""

    def __init__(self, display_name: str) -> None:
        self._display = Display(display_name)
        try:
            self._display.damage_query_version()
            if self._display.xfixes_query_version().major_version < 2:
                raise BackendError(ErrorCode.CAPTURE_FAILED, "XFixes older than 2 (no regions)")
        except AttributeError as exc:  # python-xlib adds the methods of the extensions present
            close_display(self._display, "DAMAGE regions")
            raise BackendError(ErrorCode.CAPTURE_FAILED, f"no DAMAGE or XFixes ({exc})") from exc
        damage_major = self._display.query_extension("DAMAGE").major_opcode
        xfixes_major = self._display.query_extension("XFIXES").major_opcode
        shm = self._display.query_extension("MIT-SHM")
        if shm is None:
            close_display(self._display, "DAMAGE regions")
            raise BackendError(ErrorCode.CAPTURE_FAILED, "no MIT-SHM to grab the damaged rows with")
        self._shm_major = shm.major_opcode
        self._root = self._display.screen().root.id
        damage_id = self._display.screen().root.damage_create(damage.DamageReportNonEmpty)
        self._region = self._display.display.allocate_resource_id()
        self._display.sync()
        connection = socket.socket(fileno=os.dup(self._display.fileno()))
        self._wire = XUnits(connection, self._display.display.data_recv or b"")
        self._failed = False
        self._wire.send(struct.pack("=BBHI", xfixes_major, XFIXES_CREATE_REGION, 2, self._region))
        self._take = struct.pack(
            "=BBHIIIBBHI",
            damage_major,
            DAMAGE_SUBTRACT,
            4,
            damage_id,
            X.NONE,
            self._region,
            xfixes_major,
            XFIXES_FETCH_REGION,
            2,
            self._region,
        )
        try:
            self.take()  # the damage so far: the whole root, which the first grab of a region reads
        except BaseException:
            self.close()
            raise

    def _receive(self) -> bytes | None:
        reply = None
        for unit in self._wire.receive():
            kind = unit[0] & 0x7F
            if kind == X_REPLY:
                reply = unit
            elif kind == X_ERROR:
                self._failed = True
        return reply

    def take(self, prefix: bytes = b"") -> list[Rectangle]:
        """The rectangles drawn on since the last read, in root-window pixels. ``prefix``: requests
        without replies to send before the read, in the same write."""
        reply = round_trip(self._wire, prefix + self._take, self._receive)
        if self._failed:  # the region or the damage object gone: nothing can be said
            raise BackendError(ErrorCode.CAPTURE_FAILED, "the X server refused a DAMAGE request")
        return list(struct.iter_unpack("=hhHH", reply[X_UNIT:]))

    def grab_drawn(
        self, region: Bounds, segment: int, rows_for: Callable[[list[Rectangle]], list[tuple[int, int]]]
    ) -> None:
        """With the server grabbed: read the damage since the last read, pass it to ``rows_for``,
        which names the runs of rows of ``region`` to grab (``(first row, rows)`` each), and
        ShmGetImage each run, full width, into the MIT-SHM segment whose XID is ``segment`` (which
        another connection attached), at the run's own offset, as a grab of the whole region
        would put it. Then ungrab. Returns once the segment holds the rows.

        No other client's request runs between the read and the grabs, so the rows grabbed and
        those not (unchanged since the damage read before) are the screen at one moment. Nothing
        here waits on another connection while the server is grabbed (that one would wait for
        the ungrab: a deadlock), and the ungrab is sent whatever fails; a connection that breaks
        releases the grab in the server."""
        answers: list[bytes] = []

        def receive() -> bytes | None:
            """Each ShmGetImage's reply or error, in order (events are dropped)."""
            answers.extend(unit for unit in self._wire.receive() if unit[0] & 0x7F in (X_REPLY, X_ERROR))
            return answers[-1] if len(answers) >= len(runs) else None

        runs: list[tuple[int, int]] = []
        ungrab_sent = False
        try:
            runs = rows_for(self.take(GRAB_SERVER))
            grabs = b"".join(self._shm_get_image(region, segment, *run) for run in runs)
            # With the grabs, in one write: the server ungrabs right after them.
            ungrab_sent = True
            if runs:
                round_trip(self._wire, grabs + UNGRAB_SERVER, receive)
            else:  # nothing to grab: the kept frame is the screen as it is
                self._wire.send(UNGRAB_SERVER)
        finally:
            if not ungrab_sent:
                with contextlib.suppress(ConnectionClosedError):
                    self._wire.send(UNGRAB_SERVER)
        for answer, (_, rows) in zip(answers, runs, strict=True):
            if answer[0] == X_ERROR:
                raise BackendError(
                    ErrorCode.CAPTURE_FAILED, f"the X server refused a grab (X error {answer[1]})"
                )
            check_image_size(struct.unpack_from("=I", answer, 12)[0], region.width, rows)

    def _shm_get_image(self, region: Bounds, segment: int, first: int, rows: int) -> bytes:
        """ShmGetImage of ``rows`` full-width rows of ``region`` from its row ``first`` on, into
        ``segment`` at the offset they have in a grab of the whole region."""
        return struct.pack(
            "=BBHIhhHHIB3xII",
            self._shm_major,
            SHM_GET_IMAGE,
            8,
            self._root,
            region.x,
            region.y + first,
            region.width,
            rows,
            ALL_PLANES,
            X.ZPixmap,
            segment,
            first * region.width * BGRX_PIXEL,
        )

    def close(self) -> None:
        self._wire.close()
        close_display(self._display, "DAMAGE regions")


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

    python-xlib sets the connection up; after that the counter speaks the protocol itself: it
    sends one fixed DamageSubtract or GetInputFocus and reads 32-byte events off the socket.
    python-xlib's request and event objects cost some 0.15 ms of Python a call on a changing
    screen, and every screenshot, video frame and live-view frame reads the serial.
    """

    def __init__(self, display_name: str) -> None:
        self._display = Display(display_name)
        self._lock = threading.Lock()
        # The server refuses DAMAGE requests from a client that has not negotiated a version.
        self._display.damage_query_version()
        extension = self._display.query_extension("DAMAGE")
        self._notify_code = extension.first_event + damage.DamageNotifyCode
        root = self._display.screen().root
        root.change_attributes(event_mask=X.StructureNotifyMask)
        damage_id = root.damage_create(damage.DamageReportNonEmpty)
        self._display.sync()
        self._subtract = struct.pack(
            "=BBHIII", extension.major_opcode, DAMAGE_SUBTRACT, 4, damage_id, X.NONE, X.NONE
        )
        self._serial = 0
        #: DamageNotify events received and not yet counted by serial().
        self._unseen = 0
        self._dirty = True  # the first caller has never seen the screen
        self._bounds = Bounds(x=0, y=0, width=0, height=0)
        # From here on the socket is ours: what python-xlib queued or holds unparsed is taken over
        # (its ConfigureNotify events are older than the geometry asked for below).
        while self._display.pending_events():
            if self._display.next_event().type == self._notify_code:
                self._unseen += 1
        connection = socket.socket(fileno=os.dup(self._display.fileno()))
        self._wire = XUnits(connection, self._display.display.data_recv or b"")
        # After selecting ConfigureNotify: no resize falls between; one that comes before the
        # answer is older than it, one after it is read after it.
        geometry = self._round_trip(struct.pack("=BxHI", GET_GEOMETRY, 2, root.id))
        width, height = struct.unpack_from("=HH", geometry, 16)
        self._bounds = Bounds(x=0, y=0, width=width, height=height)

    def _receive(self) -> bytes | None:
        """Take in every event the socket holds (it must be readable); the reply among them (to
        the one request in flight that has one), if any."""
        reply = None
        for unit in self._wire.receive():
            kind = unit[0] & 0x7F
            if kind == X_REPLY:
                reply = unit
            elif kind == X_ERROR:
                # Only a DamageSubtract can fail here (its damage gone): never claim "unchanged".
                log.warning("X error %d on the DAMAGE connection", unit[1])
                self._dirty = True
            elif kind == self._notify_code:
                self._unseen += 1
            elif kind == X.ConfigureNotify:
                width, height = struct.unpack_from("=HH", unit, 20)
                self._bounds = Bounds(x=0, y=0, width=width, height=height)
        return reply

    def _drain(self) -> None:
        """Take in the events received so far (no round trip)."""
        while self._wire.readable():
            self._receive()

    def _round_trip(self, request: bytes = GET_INPUT_FOCUS) -> bytes:
        return round_trip(self._wire, request, self._receive)

    def serial(self) -> int:
        with self._lock:
            self._drain()
            if self._unseen or self._dirty:
                # Empty the damage region, so that the next damage sends an event. (Without an
                # event since the last call, and not dirty, it is empty already.) Damage between
                # the events read above and this is in the grab that follows.
                self._wire.send(self._subtract)
            else:
                self._round_trip()
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
        return self._wire.fileno()

    def close(self) -> None:
        self._wire.close()
        close_display(self._display, "DAMAGE")
