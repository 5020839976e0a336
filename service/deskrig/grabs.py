"""A frame: the pixels of one capture, in the layout the backend handed them over.

X11 grabs arrive as BGRX rows (4 bytes a pixel: blue, green, red, padding). Converting them to a
Pillow RGB image costs about 3 ms for 1280x800 and the encoders do not need it: libjpeg-turbo
reads BGRX itself, and the PNG writer packs RGB rows straight from it. So a :class:`Grab` keeps
the grab as it came and makes a Pillow image only when one is asked for (scaling, drawing, the
formats Pillow encodes). Backends whose pixels are already a Pillow image (sway's screencopy, the
scripted backend, a window's composited pixmap) hand that over with :meth:`Grab.of`.

Code that draws on a capture (the redaction seam, ``Observation.redact``) works on the frame:
:meth:`Grab.blacked_out` for rectangles of black, or ``Grab.of(draw(frame.image()))`` for
anything Pillow can draw.

A screen mostly stays as it was between two captures (a spinner, a caret, a clock changes a few
dozen pixels), so the encoders work in horizontal bands of rows and remember, per frame size, the
last frame's rows and what they made of each band (:class:`BandCaches`): only the bands whose rows
changed are encoded again. Comparing a 1280x800 frame band by band with the last one takes about
0.3 ms (``bytearray == memoryview`` is a ``memcmp``), up to 0.7 ms with the frames out of the CPU's
caches, as they are between two screenshots.

A grabber that compares its grabs itself (:class:`KeptFrames`, X11's shared-memory grabs) spares
the encoders that pass: its frames carry a :class:`FrameHistory`, which says which bands changed
from any recent frame of the region to any other, and a cache whose last frame is in the same
history encodes just those bands, without keeping or comparing rows of its own. Told where the
screen was drawn on, such a grabber grabs and compares only the bands drawn on, and takes the
others from the frame it kept.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from PIL import Image, ImageColor

#: Bytes per pixel of a BGRX frame.
BGRX_PIXEL = 4
#: Pixel rows per band, for the encoders (one JPEG MCU row at 4:2:0) and the grabbers' histories.
BAND_ROWS = 16
#: Grabs a :class:`FrameHistory` remembers the changed bands of: a cache whose last frame is older
#: compares rows again.
HISTORY_LENGTH = 64
#: Buffers :class:`KeptFrames` keeps per region: the newest frame, and one more to write the next
#: grab into while a caller still holds the newest (the unchanged-screen cache does, until the next
#: capture replaces it).
KEPT_BUFFERS = 2
#: Frames an encoder keeps, one per size and settings, the most recently used: the screen at the
#: screenshot quality and at the live view's, and a window. Each holds what was made of its bands,
#: and one frame's rows (4 MB at 1280x800) unless its frames come with a history. A grabber keeps
#: as many regions' :class:`KeptFrames` (up to :data:`KEPT_BUFFERS` frames' rows each).
MAX_CACHED_FRAMES = 3
#: Seconds without a capture after which an encoder's or a grabber's frames are let go: a rig left
#: idle holds none, and the first capture after that encodes every band, as the first did.
IDLE_RELEASE_S = 30.0

Part = TypeVar("Part")
Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


class Grab:
    """Pixels of one capture: BGRX rows as grabbed, or a Pillow image. Never modified in place."""

    __slots__ = ("_bgrx", "_image", "height", "lineage", "width")

    def __init__(
        self,
        width: int,
        height: int,
        bgrx: bytes | bytearray | None,
        image: Image.Image | None,
        lineage: Lineage | None = None,
    ):
        if (bgrx is None) == (image is None):
            raise ValueError("a frame holds either BGRX rows or a Pillow image")
        if bgrx is not None and len(bgrx) != width * height * BGRX_PIXEL:
            raise ValueError(f"{len(bgrx)} bytes are not {width}x{height} BGRX pixels")
        self.width = width
        self.height = height
        self._bgrx = bgrx
        self._image = image
        #: Where the frame stands in its grabber's :class:`FrameHistory`, if it has one.
        self.lineage = lineage

    @classmethod
    def from_bgrx(
        cls, data: bytes | bytearray, width: int, height: int, lineage: Lineage | None = None
    ) -> Grab:
        """A frame of 32-bit little-endian X pixels (B, G, R, padding), rows without gaps;
        ``lineage``: its place in the history of the grabber that kept it."""
        return cls(width, height, data, None, lineage)

    @classmethod
    def of(cls, image: Image.Image) -> Grab:
        """A frame of a Pillow image (any mode), kept as it is."""
        return cls(image.width, image.height, None, image)

    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height

    @property
    def bgrx(self) -> bytes | bytearray | None:
        """The BGRX rows when the frame came as a grab; None for a frame of a Pillow image."""
        return self._bgrx

    def image(self) -> Image.Image:
        """The pixels as a Pillow image: RGB for a BGRX frame (converted on first use, then kept)."""
        if self._image is None:
            assert self._bgrx is not None
            self._image = Image.frombuffer("RGB", self.size, self._bgrx, "raw", "BGRX", 0, 1)
        return self._image

    def blacked_out(self, boxes: Iterable[tuple[int, int, int, int]]) -> Grab:
        """A copy with every ``(left, top, right, bottom)`` box, in frame pixels and already
        clipped to the frame, painted black."""
        if self._bgrx is None:
            image = self.image().copy()
            black = ImageColor.getcolor("black", image.mode)
            for box in boxes:
                image.paste(black, box)
            return Grab.of(image)
        pixels = bytearray(self._bgrx)
        stride = self.width * BGRX_PIXEL
        for left, top, right, bottom in boxes:
            run = bytes((right - left) * BGRX_PIXEL)
            for row in range(top, bottom):
                start = row * stride + left * BGRX_PIXEL
                pixels[start : start + len(run)] = run
        return Grab.from_bgrx(pixels, self.width, self.height)


class FrameHistory:
    """Which bands of :data:`BAND_ROWS` rows changed from each grab of one region to the next, for
    the last :data:`HISTORY_LENGTH` grabs, numbered from 1. Exact or more: a band that changed is
    always recorded (a band recorded may have changed back)."""

    def __init__(self, band_rows: int = BAND_ROWS, length: int = HISTORY_LENGTH) -> None:
        self.band_rows = band_rows
        self._length = length
        self._lock = threading.Lock()
        self._changed: OrderedDict[int, frozenset[int]] = OrderedDict()

    def record(self, number: int, changed: frozenset[int]) -> None:
        """Grab ``number`` differs from grab ``number - 1`` in the bands ``changed``."""
        with self._lock:
            self._changed[number] = changed
            while len(self._changed) > self._length:
                self._changed.popitem(last=False)

    def changed_between(self, first: int, second: int) -> frozenset[int] | None:
        """The bands in which grabs ``first`` and ``second`` may differ (in either order); None when
        a grab between them is no longer remembered."""
        low, high = sorted((first, second))
        with self._lock:
            try:
                return frozenset().union(*(self._changed[number] for number in range(low + 1, high + 1)))
            except KeyError:
                return None


#: A frame's place in its grabber's history: the history and the grab's number in it.
Lineage = tuple[FrameHistory, int]
#: ``(x, y, width, height)`` in screen pixels.
Rectangle = tuple[int, int, int, int]


def _address(buffer: bytearray) -> int:
    """Where ``buffer``'s bytes are now (the temporary export is released at once)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


@functools.cache
def _memcmp() -> Callable[[int, int, int], int]:
    """The C library's ``memcmp``, loaded on first use (only the X11 grabber compares addresses)."""
    function = ctypes.CDLL(ctypes.util.find_library("c")).memcmp
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return function


class _Kept:
    """A buffer of :class:`KeptFrames` and the grab whose rows it holds."""

    __slots__ = ("buffer", "number")

    def __init__(self, buffer: bytearray, number: int) -> None:
        self.buffer = buffer
        self.number = number

    def is_free(self) -> bool:
        """Whether nothing but this record refers to the buffer, so no caller can be reading it.
        Whatever reads a buffer holds a reference to it: a :class:`Grab`, a memoryview, a Pillow
        image over it, ctypes' export. (The two counted: this record's and the call's argument.)"""
        return sys.getrefcount(self.buffer) == 2


class KeptFrames:
    """The grabs of one region of ``width`` x ``height`` BGRX pixels, each a frame of its own, made
    from rows that a grabber lends only for the call (a shared-memory segment the next grab
    overwrites), compared band by band with the grab before as they are copied.

    With a grabber's damage reports (:meth:`drawn`), the grabber fetches only the rows of the
    bands that may have changed since the newest kept frame (:meth:`suspect_rows`), right after
    reading the damage and before anything else can draw; the frame is those rows and the newest
    kept frame's others (:meth:`take` with ``suspect_only``), and only the fetched bands are
    compared. Without damage reports every band is grabbed and compared. Only the bands that
    changed are copied into a kept buffer, and the frame's :class:`FrameHistory` tells the
    encoders which bands they must encode again. A buffer is written only while no caller holds it
    (:meth:`_Kept.is_free`); one still held stays as it is and another is filled, so a frame never
    changes under its holder. One thread at a time (the grabber's lock)."""

    def __init__(
        self, width: int, height: int, origin: tuple[int, int] = (0, 0), band_rows: int = BAND_ROWS
    ) -> None:
        """``origin``: the screen position of the region's top-left pixel."""
        self.width = width
        self.height = height
        self.origin = origin
        self.band_rows = band_rows
        self.history = FrameHistory(band_rows)
        #: The bands that may differ between the newest kept frame and the screen as drawn up to
        #: the last :meth:`drawn`; None while unknown (no frame yet, or no damage reported).
        self._suspect: set[int] | None = None
        stride = width * BGRX_PIXEL
        #: Each band's (offset, length) in the rows.
        self._bands = [
            (top * stride, min(band_rows, height - top) * stride) for top in range(0, height, band_rows)
        ]
        self._size = height * stride
        self._number = 0
        #: Newest first.
        self._kept: list[_Kept] = []

    def drawn(self, rectangles: list[Rectangle] | None) -> None:
        """The screen was drawn on in ``rectangles`` (None: anywhere, unknown) since the last call."""
        if self._suspect is not None and rectangles is not None:
            self._suspect |= self._bands_of(rectangles)
        else:
            self._suspect = None

    def _bands_of(self, rectangles: list[Rectangle]) -> set[int]:
        left, top = self.origin
        bands: set[int] = set()
        for x, y, width, height in rectangles:
            first, last = max(y - top, 0), min(y + height - top, self.height) - 1
            if first <= last and x < left + self.width and x + width > left:
                bands.update(range(first // self.band_rows, last // self.band_rows + 1))
        return bands

    def suspect(self) -> list[int]:
        """The bands that may differ between the newest kept frame and the screen as drawn up to
        the last :meth:`drawn`, in order: every band while that is not known."""
        if self._suspect is None or not self._kept:
            return list(range(len(self._bands)))
        return sorted(self._suspect)

    def suspect_rows(self) -> list[tuple[int, int]]:
        """The rows of the :meth:`suspect` bands as ``(first row, rows)`` runs, one for each run
        of adjacent bands: what a grabber fetches before :meth:`take` with ``suspect_only``."""
        runs: list[tuple[int, int]] = []
        for index in self.suspect():
            top = index * self.band_rows
            rows = min(self.band_rows, self.height - top)
            if runs and sum(runs[-1]) == top:
                runs[-1] = (runs[-1][0], runs[-1][1] + rows)
            else:
                runs.append((top, rows))
        return runs

    def take(self, rows: int, suspect_only: bool = False) -> Grab:
        """A frame of the ``width * height * 4`` bytes at address ``rows`` (laid out as the
        region), readable during the call.

        ``suspect_only``: only the rows of the :meth:`suspect` bands were grabbed into ``rows``,
        after the damage up to the moment of the grab was passed to :meth:`drawn`; the other bands
        there are not read: they are as in the newest kept frame. Only the grabbed bands are
        compared, and nothing is suspect afterwards. Otherwise every band was grabbed and is
        compared, and what was drawn since is not known."""
        self._number += 1
        grabbed = self.suspect() if suspect_only else range(len(self._bands))
        self._suspect = set() if suspect_only else None
        if self._kept:
            newest, memcmp = _address(self._kept[0].buffer), _memcmp()
            changed = frozenset(
                index
                for index in grabbed
                for offset, length in (self._bands[index],)
                if memcmp(rows + offset, newest + offset, length)
            )
        else:
            changed = frozenset(range(len(self._bands)))
        self.history.record(self._number, changed)
        kept = self._refreshed(rows, frozenset(grabbed))
        return Grab.from_bgrx(kept.buffer, self.width, self.height, (self.history, self._number))

    def _refreshed(self, rows: int, grabbed: frozenset[int]) -> _Kept:
        """A kept buffer holding grab number ``self._number``, newest first: the ``grabbed`` bands
        from ``rows``, the others from the newest kept buffer, which holds them as they are (they
        did not change in this grab). Addresses only: a reference held here would make the newest
        buffer look held."""
        # With nothing kept every band was grabbed.
        newest = _address(self._kept[0].buffer) if self._kept else rows
        for kept in self._kept:
            if not kept.is_free():
                continue
            stale = self.history.changed_between(kept.number, self._number)
            if stale is None:
                continue
            self._copy(stale, grabbed, rows, newest, _address(kept.buffer))
            kept.number = self._number
            break
        else:
            whole = len(grabbed) == len(self._bands)
            # One copy (a zeroed bytearray filled afterwards writes it twice), then the grabbed bands.
            buffer = bytearray((ctypes.c_char * self._size).from_address(rows if whole else newest))
            if not whole:
                self._copy(grabbed, grabbed, rows, newest, _address(buffer))
            kept = _Kept(buffer, self._number)
            # The oldest goes (its holder keeps it as long as it needs).
            del self._kept[KEPT_BUFFERS - 1 :]
        self._kept = [kept, *(other for other in self._kept if other is not kept)]
        return kept

    def _copy(
        self, bands: Iterable[int], grabbed: frozenset[int], rows: int, newest: int, target: int
    ) -> None:
        """Copy ``bands`` to the buffer at ``target``: from ``rows`` if grabbed, else from ``newest``."""
        for index in bands:
            offset, length = self._bands[index]
            ctypes.memmove(target + offset, (rows if index in grabbed else newest) + offset, length)


class BandCache(Generic[Part]):
    """The last frame of one size, in bands of ``band_rows`` rows: the part an encoder made of each
    band, and what tells which bands the next frame changes: the frame's place in its grabber's
    :class:`FrameHistory` when it has one, else its BGRX rows, to compare. One thread at a time
    updates it."""

    def __init__(self, width: int, height: int, band_rows: int, settings: Hashable) -> None:
        self.width = width
        self.height = height
        self.band_rows = band_rows
        #: What the parts depend on besides the pixels (a quality, a compression level).
        self.settings = settings
        self._lock = threading.Lock()
        self._rows: list[bytearray] = []
        self._lineage: Lineage | None = None
        self._parts: list[Part] = []

    def update(self, frame: Grab, make: Callable[[int, int], Sequence[Part]]) -> list[Part]:
        """Every band's part for ``frame`` (BGRX rows), top to bottom: the remembered one where the
        band's rows are as in the last frame, else made anew. ``make(top, rows)`` makes the parts of
        the bands in ``rows`` rows from ``top``, one after another: each run of consecutive changed
        bands at once, so an encoder pays its setup once a run (the whole frame is one run when
        everything changed). Should ``make`` fail, everything is forgotten: no part is ever kept
        for rows other than its own."""
        assert frame.bgrx is not None, "a band cache takes BGRX frames"
        with self._lock:
            try:
                changed = self._changed_by_history(frame)
                if changed is None and frame.lineage is None:
                    changed = self._compare(frame.bgrx)
                if changed is None:  # nothing to compare with: every band anew, in one run
                    self._parts = self._made(make, 0, self.height)
                    self._rows = [] if frame.lineage is not None else self._bands_of(frame.bgrx)
                else:
                    for first, count in _runs(changed):
                        top = first * self.band_rows
                        rows = min(count * self.band_rows, self.height - top)
                        self._parts[first : first + count] = self._made(make, top, rows)
                self._lineage = frame.lineage
            except BaseException:
                self._rows.clear()
                self._parts.clear()
                self._lineage = None
                raise
            return list(self._parts)

    def _made(self, make: Callable[[int, int], Sequence[Part]], top: int, rows: int) -> list[Part]:
        parts = list(make(top, rows))
        if len(parts) != -(-rows // self.band_rows):
            raise ValueError(f"{len(parts)} parts made for the {rows} rows from row {top}")
        return parts

    def _changed_by_history(self, frame: Grab) -> frozenset[int] | None:
        """The bands ``frame`` changes since the last frame, as its history says; None when it
        cannot say (no history, another one, or the last frame is forgotten)."""
        if frame.lineage is None or self._lineage is None or not self._parts:
            return None
        history, number = frame.lineage
        last_history, last_number = self._lineage
        if history is not last_history or history.band_rows != self.band_rows:
            return None
        return history.changed_between(last_number, number)

    def _band_views(self, bgrx: bytes | bytearray) -> list[memoryview]:
        stride = self.width * BGRX_PIXEL
        view = memoryview(bgrx)
        return [
            view[top * stride : (top + self.band_rows) * stride]
            for top in range(0, self.height, self.band_rows)
        ]

    def _bands_of(self, bgrx: bytes | bytearray) -> list[bytearray]:
        return [bytearray(band) for band in self._band_views(bgrx)]

    def _compare(self, bgrx: bytes | bytearray) -> frozenset[int] | None:
        """The bands whose rows differ from the last frame's, which are kept as ``bgrx``'s from now
        on; None when the last frame's rows are not kept (none yet, or it had a history)."""
        if not self._rows or len(self._rows) != len(self._parts):
            return None
        bands = self._band_views(bgrx)
        changed = frozenset(index for index, band in enumerate(bands) if self._rows[index] != band)
        for index in changed:
            self._rows[index][:] = bands[index]
        return changed


def _runs(indexes: Iterable[int]) -> list[tuple[int, int]]:
    """Runs of consecutive numbers among ``indexes``, lowest first: (first, count) each."""
    runs: list[tuple[int, int]] = []
    for index in sorted(indexes):
        if runs and index == sum(runs[-1]):
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((index, 1))
    return runs


class RecentlyUsed(Generic[Key, Value]):
    """The values of the :data:`MAX_CACHED_FRAMES` keys asked for last, each made on first use by
    ``make(key)``; all let go after ``idle_release_s`` without a :meth:`get`, so a rig left idle
    holds none of the frames they keep."""

    def __init__(
        self,
        make: Callable[[Key], Value],
        *,
        idle_release_s: float = IDLE_RELEASE_S,
        clock: Callable[[], float] = time.monotonic,
        call_later: Callable[[float, Callable[[], None]], None] | None = None,
    ) -> None:
        """``clock`` and ``call_later(delay, callback)`` (default: a daemon timer thread) time
        the release."""
        self._make = make
        self.idle_release_s = idle_release_s
        self._clock = clock
        self._call_later = call_later or _call_later
        self._lock = threading.Lock()
        self._values: OrderedDict[Key, Value] = OrderedDict()
        self._used_at = 0.0
        #: A release check is due: at most one waits at a time, none once the values are gone.
        self._release_due = False

    def get(self, key: Key) -> Value:
        with self._lock:
            self._used_at = self._clock()
            if not self._release_due:
                self._release_due = True
                self._call_later(self.idle_release_s, self._release_if_idle)
            value = self._values.get(key)
            if value is None:
                value = self._values[key] = self._make(key)
            self._values.move_to_end(key)
            while len(self._values) > MAX_CACHED_FRAMES:
                self._values.popitem(last=False)
            return value

    def drop(self, key: Key, value: Value) -> None:
        """Forget ``value`` if ``key`` still has it."""
        with self._lock:
            if self._values.get(key) is value:
                del self._values[key]

    def values(self) -> list[Value]:
        with self._lock:
            return list(self._values.values())

    def clear(self) -> None:
        with self._lock:
            self._values.clear()

    def _release_if_idle(self) -> None:
        """Let every value go once none was asked for in ``idle_release_s``; else check again
        when that much time has passed since the last."""
        with self._lock:
            idle = self._clock() - self._used_at
            if idle >= self.idle_release_s:
                self._values.clear()
                self._release_due = False
            else:
                self._call_later(self.idle_release_s - idle, self._release_if_idle)

    def __len__(self) -> int:
        return len(self._values)


class BandCaches(Generic[Part]):
    """One :class:`BandCache` per frame size and settings, for the :data:`MAX_CACHED_FRAMES` used
    last (:class:`RecentlyUsed`, whose keyword arguments it takes): a quality or level asked for
    anew starts from nothing, never from parts made otherwise."""

    def __init__(self, band_rows: int, **release: Any) -> None:
        self.band_rows = band_rows
        self._caches: RecentlyUsed[tuple[int, int, Hashable], BandCache[Part]] = RecentlyUsed(
            lambda key: BandCache(key[0], key[1], band_rows, key[2]), **release
        )

    def get(self, width: int, height: int, settings: Hashable) -> BandCache[Part]:
        return self._caches.get((width, height, settings))

    def drop(self, cache: BandCache[Part]) -> None:
        """Forget ``cache`` (its parts cannot be used)."""
        self._caches.drop((cache.width, cache.height, cache.settings), cache)

    def __len__(self) -> int:
        return len(self._caches)


def _call_later(delay: float, callback: Callable[[], None]) -> None:
    timer = threading.Timer(delay, callback)
    timer.daemon = True  # a pending release never keeps the process alive
    timer.start()
