"""Pixels to bytes and bytes to files: encode, scale, fit inline, mask, mark, save.

Measured on this project's reference machine (Xvfb 1280x800, a gtk3-widget-factory screen,
Pillow 13): Pillow's own PNG writer spends most of its time in its per-row adaptive filter
heuristic, which it always runs for truecolour images and offers no switch for (level 1 about
24-33 ms, default level 6 about 38-48 ms). Screens are mostly flat colour and compress about as well
unfiltered, so :func:`encode` writes PNG itself: filter type 0 rows deflated by ``zlib`` at level 3
(zlib 1.2's levels 1-3 share the fast matcher, 3 finds more), about 11-19 ms and no larger than
Pillow's level 1. WebP uses ``method=0`` (about 20 ms against about 65 ms for Pillow's default
method 4, for a 25% larger file). Downscaling uses ``Image.reduce`` for exact integer factors
(about 3 ms for 1920x1200 to 960x600) and a BOX filter otherwise (area averaging, about 20% cheaper
than BILINEAR at the same legibility).
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

from PIL import Image, ImageColor, ImageDraw
from pydantic import BaseModel, ConfigDict

from deskrig.errors import DeskrigError, ErrorCode, file_system_error
from deskrig.files import write_atomic, write_temp
from deskrig.model import Bounds, ImageFormat

SUPPORTED_FORMATS: tuple[ImageFormat, ...] = get_args(ImageFormat)
DEFAULT_QUALITY: dict[ImageFormat, int] = {"jpeg": 80, "webp": 80}
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

PNG_ZLIB_LEVEL = 3
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_COLOUR_TYPES = {"L": 0, "RGB": 2, "RGBA": 6}
#: IDAT payload per chunk; the PNG spec caps a chunk at 2**31 - 1 bytes.
_PNG_IDAT_SIZE = 1 << 24

T = TypeVar("T")


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


def _guard_pillow(action: str, work: Callable[[], T]) -> T:
    """Run a Pillow operation, turning its failures into deskrig errors."""
    try:
        return work()
    except MemoryError as exc:
        raise DeskrigError(ErrorCode.OUT_OF_MEMORY, f"out of memory while {action}") from exc
    except (OSError, ValueError, struct.error, zlib.error) as exc:
        raise DeskrigError(
            ErrorCode.ENCODING_FAILED,
            f"{action} failed: {exc}",
            details={"operation": action, "reason": str(exc)},
        ) from exc


def _has_alpha(image: Image.Image) -> bool:
    return "A" in image.getbands() or "transparency" in image.info


def _png_chunk(tag: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))


def _encode_png(image: Image.Image) -> bytes:
    """Lossless PNG with unfiltered rows (see the module docstring for why)."""
    if image.mode not in _PNG_COLOUR_TYPES:
        image = image.convert("RGBA" if _has_alpha(image) else "RGB")
    width, height = image.size
    stride = width * len(image.getbands())
    # The raw scanlines as one byte per "pixel", pasted one column to the right of a zeroed
    # canvas: the result is every row prefixed with filter type 0, built by Pillow in C.
    rows = Image.new("L", (stride + 1, height))
    rows.paste(Image.frombytes("L", (stride, height), image.tobytes()), (1, 0))
    compressed = zlib.compress(rows.tobytes(), PNG_ZLIB_LEVEL)
    header = struct.pack(">IIBBBBB", width, height, 8, _PNG_COLOUR_TYPES[image.mode], 0, 0, 0)
    idat = b"".join(
        _png_chunk(b"IDAT", compressed[i : i + _PNG_IDAT_SIZE])
        for i in range(0, len(compressed), _PNG_IDAT_SIZE)
    )
    return _PNG_SIGNATURE + _png_chunk(b"IHDR", header) + idat + _png_chunk(b"IEND", b"")


def _encode_with_pillow(image: Image.Image, fmt: ImageFormat, quality: int | None) -> bytes:
    out = io.BytesIO()
    if fmt == "jpeg":
        if image.mode not in ("RGB", "L"):
            image = image.convert("RGB")
        image.save(out, format="JPEG", quality=quality or DEFAULT_QUALITY["jpeg"])
    elif fmt == "webp":
        if image.mode not in ("RGB", "RGBA"):
            image = image.convert("RGBA" if _has_alpha(image) else "RGB")
        image.save(out, format="WEBP", quality=quality or DEFAULT_QUALITY["webp"], method=0)
    else:
        if image.mode not in ("1", "L", "P", "RGB", "RGBA"):
            image = image.convert("RGBA" if _has_alpha(image) else "RGB")
        image.save(out, format="BMP")
    return out.getvalue()


def encode(image: Image.Image, fmt: str, quality: int | None = None) -> bytes:
    """Encode ``image`` as png, jpeg, webp or bmp.

    ``quality`` (1-100) applies to jpeg and webp (default 80). PNG and BMP are lossless and ignore
    it: there is no pixel quality to trade, and PNG always uses the fastest setting measured.
    """
    name = normalize_format(fmt)
    _check_quality(quality)
    if name == "png":
        return _guard_pillow("encoding png", lambda: _encode_png(image))
    return _guard_pillow(f"encoding {name}", lambda: _encode_with_pillow(image, name, quality))


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
    scaled = _guard_pillow("scaling", lambda: _resize_to_width(image, max_width))
    return scaled, scaled.width / image.width


def _human_bytes(size: int) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} B"


def _describe(fmt: ImageFormat, quality: int | None) -> str:
    return f"{fmt} q={quality}" if fmt in DEFAULT_QUALITY else fmt


def fit_inline(image: Image.Image, fmt: str, quality: int | None, max_bytes: int) -> InlineImage:
    """Encode ``image`` within ``max_bytes``, stepping down only when it would not fit.

    Order: the requested encoding; then JPEG at 85, 70, 50, 35 (only qualities below the one asked
    for when jpeg was asked for); then, at the last quality, the scale ladder 0.75, 0.5, 0.35,
    0.25 ... 1/16. ``steps`` says what was changed and what the rejected encodings weighed.
    """
    name = normalize_format(fmt)
    _check_quality(quality)
    quality = (quality or DEFAULT_QUALITY[name]) if name in DEFAULT_QUALITY else None
    limit = _human_bytes(max_bytes)

    def fitted(data: bytes, fmt: ImageFormat, quality: int | None, scaled: Image.Image) -> InlineImage:
        return InlineImage(
            data=data,
            format=fmt,
            quality=quality,
            width=scaled.width,
            height=scaled.height,
            scale=scaled.width / image.width,
            steps=steps,
        )

    steps: list[str] = []
    data = encode(image, name, quality)
    if len(data) <= max_bytes:
        return fitted(data, name, quality, image)

    rejected = [f"{_describe(name, quality)} was {_human_bytes(len(data))} > {limit} limit"]
    jpeg_quality = quality if name == "jpeg" and quality is not None else 100
    for candidate in (q for q in FALLBACK_QUALITIES if q < jpeg_quality):
        jpeg_quality = candidate
        data = encode(image, "jpeg", jpeg_quality)
        if len(data) <= max_bytes:
            steps.append(f"re-encoded as jpeg q={jpeg_quality} ({'; '.join(rejected)})")
            return fitted(data, "jpeg", jpeg_quality, image)
        rejected.append(f"jpeg q={jpeg_quality} was {_human_bytes(len(data))}")
    if jpeg_quality != quality:
        steps.append(f"re-encoded as jpeg q={jpeg_quality} ({'; '.join(rejected)})")

    full_size = smallest = len(data)
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


def black_out(image: Image.Image, rects: Sequence[Bounds], origin: tuple[int, int]) -> Image.Image:
    """Paint black every part of the screen-space ``rects`` that falls on ``image``.

    ``origin`` is the screen position of the image's top-left pixel. Do this before scaling. The
    input is never modified: a copy is made on the first overlap, and with no overlap the input
    itself is returned.
    """
    ox, oy = origin
    on_screen = Bounds(x=ox, y=oy, width=image.width, height=image.height)
    black = ImageColor.getcolor("black", image.mode)
    masked = image
    for rect in rects:
        overlap = on_screen.intersection(rect)
        if overlap is None:
            continue
        if masked is image:
            masked = image.copy()
        box = (overlap.x - ox, overlap.y - oy, overlap.right - ox, overlap.bottom - oy)
        masked.paste(black, box)
    return masked


MARKER_RED = (255, 0, 0)
MARKER_RADIUS = 10
MARKER_RING_WIDTH = 3
MARKER_ARM = 18


def draw_click_marker(image: Image.Image, x: int, y: int) -> Image.Image:
    """A copy of ``image`` with a pure red (255, 0, 0) ring and crosshair centred on pixel (x, y).

    Parts of the marker outside the image are clipped. Images without colour are converted to RGB.
    """
    marked = image.convert("RGBA" if _has_alpha(image) else "RGB")  # always a copy
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
