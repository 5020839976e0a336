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
"""

from __future__ import annotations

from collections.abc import Iterable

from PIL import Image, ImageColor

#: Bytes per pixel of a BGRX frame.
BGRX_PIXEL = 4


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
