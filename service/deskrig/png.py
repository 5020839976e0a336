"""PNG written from a capture: lossless, every row unfiltered, deflated by ISA-L.

Why this writer rather than Pillow's is in :mod:`deskrig.imaging`'s docstring; the figures are in
the README's Benchmarks. ``isal`` is imported on first use.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator

from PIL import Image

from deskrig.grabs import Grab

#: ISA-L's levels run 0-3. On a 1280x800 GTK screen 0 made a file 22% larger, 3 took 20x longer;
#: 1 and 2 took the same time (about 3 ms under load) and 2 made the smaller file.
PNG_ISAL_LEVEL = 2
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_COLOUR_TYPES = {"L": 0, "RGB": 2, "RGBA": 6}
#: IDAT payload per chunk; the PNG spec caps a chunk at 2**31 - 1 bytes.
_PNG_IDAT_SIZE = 1 << 24


def has_alpha(image: Image.Image) -> bool:
    return "A" in image.getbands() or "transparency" in image.info


def _png_chunk(tag: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))


#: Rows packed and deflated at a time. A band is a few hundred kB, which the allocator hands out
#: again from memory it already has; a whole frame's scanlines (3 MB at 1280x800) came fresh from
#: the kernel on every capture, and its page faults cost more than the packing and deflating put
#: together (4.5 ms against 1.3 ms streamed, at 1280x800).
_PACKED_BAND_ROWS = 64


def _scanlines(rows: Iterable[memoryview]) -> bytes:
    """PNG's scanlines: every row prefixed with its filter type, 0."""
    return b"\0" + b"\0".join(rows)


def _rows_of(packed: bytes | memoryview, stride: int) -> Iterator[memoryview]:
    view = memoryview(packed)
    return (view[start : start + stride] for start in range(0, len(packed), stride))


def _bgrx_rgb_bands(frame: Grab, bgrx: bytes | bytearray) -> Iterator[bytes]:
    """RGB rows of a BGRX frame, packed in one pass a band of rows at a time: Pillow's raw packer
    reverses the first three bytes of each pixel of a zero-copy view (``Image.tobytes`` runs the
    same encoder but joins the bands into one more copy)."""
    view = Image.frombuffer("RGBX", frame.size, bgrx, "raw", "RGBX", 0, 1)
    encoder = Image._getencoder("RGBX", "raw", ("BGR", 0, 1))
    encoder.setimage(view.im, (0, 0, *view.size))
    done = 0
    while not done:
        _, done, band = encoder.encode(frame.width * 3 * _PACKED_BAND_ROWS)
        if done < 0:
            raise ValueError(f"packing RGB rows failed (Pillow encoder error {done})")
        yield band


def _packed_bands(packed: bytes, stride: int) -> Iterator[memoryview]:
    """Rows already packed, a band at a time, as zero-copy views."""
    band = stride * _PACKED_BAND_ROWS
    view = memoryview(packed)
    return (view[start : start + band] for start in range(0, len(packed), band))


def _deflated_scanlines(bands: Iterable[bytes | memoryview], stride: int) -> bytes:
    """PNG's scanlines (every row prefixed with its filter type, 0) deflated band by band, so no
    buffer the size of the frame is allocated on the way."""
    from isal import isal_zlib

    compressor = isal_zlib.compressobj(PNG_ISAL_LEVEL)
    parts = [compressor.compress(_scanlines(_rows_of(band, stride))) for band in bands]
    parts.append(compressor.flush())
    return b"".join(parts)


def encode_png(picture: Grab | Image.Image) -> bytes:
    """Lossless PNG with unfiltered rows (see the module docstring for why)."""
    if isinstance(picture, Grab) and picture.bgrx is not None:
        mode, stride = "RGB", picture.width * 3
        compressed = _deflated_scanlines(_bgrx_rgb_bands(picture, picture.bgrx), stride)
    else:
        image = picture.image() if isinstance(picture, Grab) else picture
        if image.mode not in _PNG_COLOUR_TYPES:
            image = image.convert("RGBA" if has_alpha(image) else "RGB")
        mode, stride = image.mode, image.width * len(image.getbands())
        compressed = _deflated_scanlines(_packed_bands(image.tobytes(), stride), stride)
    header = struct.pack(">IIBBBBB", picture.width, picture.height, 8, _PNG_COLOUR_TYPES[mode], 0, 0, 0)
    idat = b"".join(
        _png_chunk(b"IDAT", compressed[i : i + _PNG_IDAT_SIZE])
        for i in range(0, len(compressed), _PNG_IDAT_SIZE)
    )
    return _PNG_SIGNATURE + _png_chunk(b"IHDR", header) + idat + _png_chunk(b"IEND", b"")
