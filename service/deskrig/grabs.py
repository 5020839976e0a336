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
0.3 ms (``bytearray == memoryview`` is a ``memcmp``).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from PIL import Image, ImageColor

#: Bytes per pixel of a BGRX frame.
BGRX_PIXEL = 4
#: Frames an encoder keeps, one per size and settings, the most recently used: the screen at the
#: screenshot quality and at the live view's, and a window. Each holds one frame's rows (4 MB at
#: 1280x800) and what was made of its bands.
MAX_CACHED_FRAMES = 3
#: Seconds without a capture after which an encoder's frames are let go (up to ~8 MB a process): a
#: rig left idle holds none, and the first capture after that encodes every band, as the first did.
IDLE_RELEASE_S = 30.0

Part = TypeVar("Part")


class Grab:
    """Pixels of one capture: BGRX rows as grabbed, or a Pillow image. Never modified in place."""

    __slots__ = ("_bgrx", "_image", "height", "width")

    def __init__(self, width: int, height: int, bgrx: bytes | bytearray | None, image: Image.Image | None):
        if (bgrx is None) == (image is None):
            raise ValueError("a frame holds either BGRX rows or a Pillow image")
        if bgrx is not None and len(bgrx) != width * height * BGRX_PIXEL:
            raise ValueError(f"{len(bgrx)} bytes are not {width}x{height} BGRX pixels")
        self.width = width
        self.height = height
        self._bgrx = bgrx
        self._image = image

    @classmethod
    def from_bgrx(cls, data: bytes | bytearray, width: int, height: int) -> Grab:
        """A frame of 32-bit little-endian X pixels (B, G, R, padding), rows without gaps."""
        return cls(width, height, data, None)

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


class BandCache(Generic[Part]):
    """The last frame of one size, in bands of ``band_rows`` rows: its BGRX rows, and the part an
    encoder made of each band. One thread at a time updates it."""

    def __init__(self, width: int, height: int, band_rows: int, settings: Hashable) -> None:
        self.width = width
        self.height = height
        self.band_rows = band_rows
        #: What the parts depend on besides the pixels (a quality, a compression level).
        self.settings = settings
        self._lock = threading.Lock()
        self._rows: list[bytearray] = []
        self._parts: list[Part] = []

    def update(self, bgrx: bytes | bytearray, make: Callable[[int, int], Part]) -> list[Part]:
        """Every band's part for the frame ``bgrx``, top to bottom: the remembered one where the
        band's rows are as in the last frame, ``make(top, rows)`` for the others. Should ``make``
        fail, everything is forgotten: no part is ever kept for rows other than its own."""
        stride = self.width * BGRX_PIXEL
        view = memoryview(bgrx)
        with self._lock:
            try:
                for index, top in enumerate(range(0, self.height, self.band_rows)):
                    rows = min(self.band_rows, self.height - top)
                    band = view[top * stride : (top + rows) * stride]
                    if index < len(self._rows):
                        if self._rows[index] != band:
                            self._parts[index] = make(top, rows)
                            self._rows[index][:] = band
                    else:  # the first frame: the bands come in order
                        self._parts.append(make(top, rows))
                        self._rows.append(bytearray(band))
            except BaseException:
                self._rows.clear()
                self._parts.clear()
                raise
            return list(self._parts)


class BandCaches(Generic[Part]):
    """One :class:`BandCache` per frame size and settings, for the :data:`MAX_CACHED_FRAMES` used
    last: a quality or level asked for anew starts from nothing, never from parts made otherwise."""

    def __init__(
        self,
        band_rows: int,
        *,
        idle_release_s: float = IDLE_RELEASE_S,
        clock: Callable[[], float] = time.monotonic,
        call_later: Callable[[float, Callable[[], None]], None] | None = None,
    ) -> None:
        """``clock`` and ``call_later(delay, callback)`` (default: a daemon timer thread) time
        the release of the frames after ``idle_release_s`` without a :meth:`get`."""
        self.band_rows = band_rows
        self.idle_release_s = idle_release_s
        self._clock = clock
        self._call_later = call_later or _call_later
        self._lock = threading.Lock()
        self._caches: OrderedDict[tuple[int, int, Hashable], BandCache[Part]] = OrderedDict()
        self._used_at = 0.0
        #: A release check is due: at most one waits at a time, none once the frames are gone.
        self._release_due = False

    def get(self, width: int, height: int, settings: Hashable) -> BandCache[Part]:
        key = (width, height, settings)
        with self._lock:
            self._used_at = self._clock()
            if not self._release_due:
                self._release_due = True
                self._call_later(self.idle_release_s, self._release_if_idle)
            cache = self._caches.get(key)
            if cache is None:
                cache = self._caches[key] = BandCache(width, height, self.band_rows, settings)
            self._caches.move_to_end(key)
            while len(self._caches) > MAX_CACHED_FRAMES:
                self._caches.popitem(last=False)
            return cache

    def drop(self, cache: BandCache[Part]) -> None:
        """Forget ``cache`` (its parts cannot be used)."""
        key = (cache.width, cache.height, cache.settings)
        with self._lock:
            if self._caches.get(key) is cache:
                del self._caches[key]

    def _release_if_idle(self) -> None:
        """Let every frame go once none was asked for in ``idle_release_s``; else check again
        when that much time has passed since the last."""
        with self._lock:
            idle = self._clock() - self._used_at
            if idle >= self.idle_release_s:
                self._caches.clear()
                self._release_due = False
            else:
                self._call_later(self.idle_release_s - idle, self._release_if_idle)

    def __len__(self) -> int:
        return len(self._caches)


def _call_later(delay: float, callback: Callable[[], None]) -> None:
    timer = threading.Timer(delay, callback)
    timer.daemon = True  # a pending release never keeps the process alive
    timer.start()
