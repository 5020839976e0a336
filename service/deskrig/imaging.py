"""Pixels to bytes and bytes to files: encode, scale, fit inline, mask, mark, save.

Encoders read a :class:`~deskrig.grabs.Grab` straight from the grab's BGRX rows where they can
(measured on this project's reference machine, Xvfb 1280x800 showing gtk3-widget-factory; see the
README's Benchmarks and ``scripts/bench capture``):

- JPEG: libjpeg-turbo's TurboJPEG (:mod:`deskrig.turbojpeg`) takes BGRX itself, so no RGB copy is
  made; 4:2:0 chroma like Pillow's default, so a quality gives the same size as before. The frame
  is encoded in bands of one MCU row joined by restart markers, and only the bands that changed
  since the last frame of its size are encoded again (a screen with a spinner: about 0.5 ms, a
  whole encode 2.3 ms); the file is byte for byte libjpeg's own with a restart interval of one MCU
  row. Without the library, Pillow encodes (same libjpeg-turbo) after an RGB copy.
- PNG: written here (:mod:`deskrig.png`), RGB rows packed from BGRX in one pass (Pillow's packer on
  a zero-copy view), every row with filter type 0, deflated by ISA-L (``isal``) at level
  :data:`deskrig.png.PNG_ISAL_LEVEL` in bands of 16 rows that are each deflated on their own, so
  that, as for JPEG, only changed bands are deflated again. Pillow's own PNG writer runs its
  per-row adaptive filter heuristic for every truecolour image (level 1 about 24-33 ms); ``zlib``
  at level 3 on unfiltered rows took 11-19 ms; ISA-L does the same deflate in a few ms for files
  about as small (screens are mostly flat colour).
- WebP uses ``method=0`` (about 20 ms against about 65 ms for Pillow's default method 4, for a 25%
  larger file); BMP and WebP go through Pillow.

The codecs are imported on first use, so importing this module (and starting a server) stays
cheap. Downscaling uses ``Image.reduce`` for exact integer factors (about 3 ms for 1920x1200 to
960x600) and a BOX filter otherwise (area averaging, about 20% cheaper than BILINEAR at the same
legibility).
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar, get_args

from PIL import Image, ImageDraw
from pydantic import BaseModel, ConfigDict

from deskrig import turbojpeg
from deskrig.errors import DeskrigError, ErrorCode, file_system_error
from deskrig.files import write_atomic, write_temp
from deskrig.grabs import Grab
from deskrig.model import Bounds, ImageFormat
from deskrig.png import encode_png, has_alpha

SUPPORTED_FORMATS: tuple[ImageFormat, ...] = get_args(ImageFormat)
DEFAULT_QUALITY: dict[ImageFormat, int] = {"jpeg": 80, "webp": 80}
#: Formats whose encoders take a frame band by band and encode only the bands that changed since
#: the last frame (:mod:`deskrig.png`, :mod:`deskrig.turbojpeg`): a few ms even when all changed.
BAND_ENCODED: frozenset[ImageFormat] = frozenset({"png", "jpeg"})
MIME_TYPES: dict[ImageFormat, str] = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "webp": "image/webp",
    "bmp": "image/bmp",
}
FILE_EXTENSIONS: dict[ImageFormat, str] = {"png": "png", "jpeg": "jpg", "webp": "webp", "bmp": "bmp"}

#: fit_inline's ladders: JPEG qualities first, then scale factors relative to the input image.
#: The scale ladder stops at 1/16: smaller than that is no use to an agent.
FALLBACK_QUALITIES = (85, 70, 50, 35)
FALLBACK_SCALES = (0.75, 0.5, 0.35, 0.25, 0.18, 0.125, 0.09, 0.0625)

T = TypeVar("T")

#: What the encoders take: a capture as grabbed, or any Pillow image.
Picture = Grab | Image.Image


class InlineImage(BaseModel):
    """An encoded image that fits the inline size limit, and how it was made to fit."""

    model_config = ConfigDict(frozen=True)

    data: bytes
    format: ImageFormat
    quality: int | None
    width: int
    height: int
    scale: float
    """Output width / input width; 1.0 when not scaled."""
    steps: list[str]
    """What was done to fit, in order; empty when the first encoding fitted."""

    @property
    def mime_type(self) -> str:
        return MIME_TYPES[self.format]


def normalize_format(fmt: str) -> ImageFormat:
    """``fmt`` as one of :data:`SUPPORTED_FORMATS` (case-insensitive, ``jpg`` means jpeg)."""
    name = fmt.lower() if isinstance(fmt, str) else fmt
    name = "jpeg" if name == "jpg" else name
    for supported in SUPPORTED_FORMATS:
        if name == supported:
            return supported
    raise DeskrigError(
        ErrorCode.UNSUPPORTED_FORMAT,
        f"unsupported image format {fmt!r}",
        details={"format": fmt, "supported": list(SUPPORTED_FORMATS)},
    )


def mime_type(fmt: str) -> str:
    return MIME_TYPES[normalize_format(fmt)]


def file_extension(fmt: str) -> str:
    return FILE_EXTENSIONS[normalize_format(fmt)]


def _check_quality(quality: int | None) -> None:
    if quality is None:
        return
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"quality must be an integer from 1 to 100, got {quality!r}",
            details={"argument": "quality", "value": quality, "allowed": "1-100"},
        )


def _codec_errors() -> tuple[type[Exception], ...]:
    from isal import isal_zlib

    # isal's stub declares its error class as an instance.
    isal_error: type[Exception] = isal_zlib.error  # type: ignore[assignment]
    return (OSError, ValueError, struct.error, zlib.error, isal_error, turbojpeg.TurboJpegError)


def _guard_codec(action: str, work: Callable[[], T]) -> T:
    """Run a Pillow or codec operation, turning its failures into deskrig errors."""
    try:
        return work()
    except MemoryError as exc:
        raise DeskrigError(ErrorCode.OUT_OF_MEMORY, f"out of memory while {action}") from exc
    except _codec_errors() as exc:
        raise DeskrigError(
            ErrorCode.ENCODING_FAILED,
            f"{action} failed: {exc}",
            details={"operation": action, "reason": str(exc)},
        ) from exc


def _as_image(picture: Picture) -> Image.Image:
    return picture.image() if isinstance(picture, Grab) else picture


def _encode_with_pillow(image: Image.Image, fmt: ImageFormat, quality: int | None) -> bytes:
    out = io.BytesIO()
    if fmt == "jpeg":
        if image.mode not in ("RGB", "L"):
            image = image.convert("RGB")
        image.save(out, format="JPEG", quality=quality or DEFAULT_QUALITY["jpeg"])
    elif fmt == "webp":
        if image.mode not in ("RGB", "RGBA"):
            image = image.convert("RGBA" if has_alpha(image) else "RGB")
        image.save(out, format="WEBP", quality=quality or DEFAULT_QUALITY["webp"], method=0)
    else:
        if image.mode not in ("1", "L", "P", "RGB", "RGBA"):
            image = image.convert("RGBA" if has_alpha(image) else "RGB")
        image.save(out, format="BMP")
    return out.getvalue()


def encode(picture: Picture, fmt: str, quality: int | None = None) -> bytes:
    """Encode ``picture`` as png, jpeg, webp or bmp.

    ``quality`` (1-100) applies to jpeg and webp (default 80). PNG and BMP are lossless and ignore
    it: there is no pixel quality to trade, and PNG always uses the fastest setting measured.
    """
    name = normalize_format(fmt)
    _check_quality(quality)
    if name == "png":
        return _guard_codec("encoding png", lambda: encode_png(picture))
    if name == "jpeg" and isinstance(picture, Grab) and picture.bgrx is not None and turbojpeg.available():
        bgrx = picture.bgrx
        jpeg_quality = quality or DEFAULT_QUALITY["jpeg"]
        return _guard_codec("encoding jpeg", lambda: turbojpeg.encode_bgrx(picture, bgrx, jpeg_quality))
    return _guard_codec(f"encoding {name}", lambda: _encode_with_pillow(_as_image(picture), name, quality))


def _resize_to_width(image: Image.Image, width: int) -> Image.Image:
    height = max(1, round(image.height * width / image.width))
    factor, remainder = divmod(image.width, width)
    if remainder == 0 and image.height % factor == 0:
        return image.reduce(factor)
    return image.resize((width, height), Image.Resampling.BOX)


def scale_to_width(image: Image.Image, max_width: int) -> tuple[Image.Image, float]:
    """Shrink ``image`` to at most ``max_width`` pixels wide, keeping its aspect ratio.

    Never upscales. Returns the image and ``scale`` = new width / original width (1.0 if unchanged).
    """
    if isinstance(max_width, bool) or not isinstance(max_width, int) or max_width < 1:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"max_width must be a positive integer, got {max_width!r}",
            details={"argument": "max_width", "value": max_width},
        )
    if max_width >= image.width:
        return image, 1.0
    scaled = _guard_codec("scaling", lambda: _resize_to_width(image, max_width))
    return scaled, scaled.width / image.width


def _human_bytes(size: int) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} B"


def _describe(fmt: ImageFormat, quality: int | None) -> str:
    return f"{fmt} q={quality}" if fmt in DEFAULT_QUALITY else fmt


def fit_inline(picture: Picture, fmt: str, quality: int | None, max_bytes: int) -> InlineImage:
    """Encode ``picture`` within ``max_bytes``, stepping down only when it would not fit.

    Order: the requested encoding; then JPEG at 85, 70, 50, 35 (only qualities below the one asked
    for when jpeg was asked for); then, at the last quality, the scale ladder 0.75, 0.5, 0.35,
    0.25 ... 1/16. ``steps`` says what was changed and what the rejected encodings weighed.
    """
    name = normalize_format(fmt)
    _check_quality(quality)
    quality = (quality or DEFAULT_QUALITY[name]) if name in DEFAULT_QUALITY else None
    limit = _human_bytes(max_bytes)

    def fitted(data: bytes, fmt: ImageFormat, quality: int | None, scaled: Picture) -> InlineImage:
        return InlineImage(
            data=data,
            format=fmt,
            quality=quality,
            width=scaled.width,
            height=scaled.height,
            scale=scaled.width / picture.width,
            steps=steps,
        )

    steps: list[str] = []
    data = encode(picture, name, quality)
    if len(data) <= max_bytes:
        return fitted(data, name, quality, picture)

    rejected = [f"{_describe(name, quality)} was {_human_bytes(len(data))} > {limit} limit"]
    jpeg_quality = quality if name == "jpeg" and quality is not None else 100
    for candidate in (q for q in FALLBACK_QUALITIES if q < jpeg_quality):
        jpeg_quality = candidate
        data = encode(picture, "jpeg", jpeg_quality)
        if len(data) <= max_bytes:
            steps.append(f"re-encoded as jpeg q={jpeg_quality} ({'; '.join(rejected)})")
            return fitted(data, "jpeg", jpeg_quality, picture)
        rejected.append(f"jpeg q={jpeg_quality} was {_human_bytes(len(data))}")
    if jpeg_quality != quality:
        steps.append(f"re-encoded as jpeg q={jpeg_quality} ({'; '.join(rejected)})")

    full_size = smallest = len(data)
    image = _as_image(picture)
    for factor in FALLBACK_SCALES:
        scaled, scale = scale_to_width(image, max(1, round(image.width * factor)))
        data = encode(scaled, "jpeg", jpeg_quality)
        if len(data) <= max_bytes:
            steps.append(
                f"scaled to {scale:.4g} ({scaled.width}x{scaled.height}; at full size jpeg "
                f"q={jpeg_quality} was {_human_bytes(full_size)} > {limit} limit)"
            )
            return fitted(data, "jpeg", jpeg_quality, scaled)
        smallest = min(smallest, len(data))
    raise DeskrigError(
        ErrorCode.OUT_OF_MEMORY,
        f"the image does not fit the {limit} inline limit even as jpeg q={jpeg_quality} "
        f"scaled to {FALLBACK_SCALES[-1]:g} ({_human_bytes(smallest)})",
        details={
            "max_bytes": max_bytes,
            "smallest_bytes": smallest,
            "smallest_format": "jpeg",
            "smallest_quality": jpeg_quality,
            "smallest_scale": FALLBACK_SCALES[-1],
            "width": image.width,
            "height": image.height,
        },
        remediation="Capture a smaller region, pass max_width, or pass save_dir to get the "
        "full image as a file.",
    )


def black_out(frame: Grab, rects: Sequence[Bounds], origin: tuple[int, int]) -> Grab:
    """Paint black every part of the screen-space ``rects`` that falls on ``frame``.

    ``origin`` is the screen position of the frame's top-left pixel. Do this before scaling. The
    input is never modified: with an overlap a blacked-out copy is returned, without one the input
    itself.
    """
    ox, oy = origin
    on_screen = Bounds(x=ox, y=oy, width=frame.width, height=frame.height)
    overlaps = [overlap for rect in rects if (overlap := on_screen.intersection(rect)) is not None]
    if not overlaps:
        return frame
    return frame.blacked_out((o.x - ox, o.y - oy, o.right - ox, o.bottom - oy) for o in overlaps)


MARKER_RED = (255, 0, 0)
MARKER_RADIUS = 10
MARKER_RING_WIDTH = 3
MARKER_ARM = 18


def draw_click_marker(image: Image.Image, x: int, y: int) -> Image.Image:
    """A copy of ``image`` with a pure red (255, 0, 0) ring and crosshair centred on pixel (x, y).

    Parts of the marker outside the image are clipped. Images without colour are converted to RGB.
    """
    marked = image.convert("RGBA" if has_alpha(image) else "RGB")  # always a copy
    colour = MARKER_RED + ((255,) if marked.mode == "RGBA" else ())
    draw = ImageDraw.Draw(marked)
    r = MARKER_RADIUS
    draw.ellipse((x - r, y - r, x + r, y + r), outline=colour, width=MARKER_RING_WIDTH)
    draw.line((x - MARKER_ARM, y, x + MARKER_ARM, y), fill=colour, width=1)
    draw.line((x, y - MARKER_ARM, x, y + MARKER_ARM), fill=colour, width=1)
    return marked


def save_file(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (:func:`deskrig.files.write_atomic`); a failure is
    FILE_SYSTEM_ERROR."""
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise file_system_error("write", path, exc) from exc


def save_screenshot(data: bytes, save_dir: Path, fmt: str, now: datetime) -> Path:
    """Save ``data`` as ``{save_dir}/YYYY-MM-DD/YYYYMMDD_HHMMSS_mmm.<ext>`` and return its path.

    Never overwrites: a taken name gets ``_1``, ``_2`` ... The file is written to a temp file and
    hard-linked into place, which fails if the name exists (O_EXCL semantics, safe against
    concurrent writers) and never shows a partly written file. Needs a file system with hard
    links. ``save_dir`` must already be checked by the path guard.
    """
    ext = file_extension(fmt)
    folder = Path(save_dir).absolute() / f"{now:%Y-%m-%d}"
    stem = f"{now:%Y%m%d_%H%M%S}_{now.microsecond // 1000:03d}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temp = write_temp(folder, data)
    except OSError as exc:
        raise file_system_error("write to", folder, exc) from exc
    try:
        attempt = 0
        while True:
            target = folder / (f"{stem}.{ext}" if attempt == 0 else f"{stem}_{attempt}.{ext}")
            try:
                os.link(temp, target)
                return target
            except FileExistsError:
                attempt += 1
            except OSError as exc:
                raise file_system_error("create", target, exc) from exc
    finally:
        temp.unlink(missing_ok=True)
