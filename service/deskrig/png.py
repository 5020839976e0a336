"""PNG written from a capture: lossless, every row unfiltered, deflated by ISA-L.

Why this writer rather than Pillow's is in :mod:`deskrig.imaging`'s docstring; the figures are in
the README's Benchmarks. ``isal`` is imported on first use.

A BGRX frame is deflated in bands of :data:`PNG_BAND_ROWS` rows, each band on its own: a raw
deflate stream of the band's scanlines ended by a full flush (its blocks end on a byte boundary
and never refer back past it), so the zlib stream of the frame is a header, the bands' blocks one
after another, an empty final block and the Adler-32 of all the scanlines, combined from the
bands' own (:func:`_adler32_combine`). :class:`deskrig.grabs.BandCaches` keeps the deflated bands
of the last frame of each size, and only the bands whose rows changed are packed and deflated
again: on a 1280x800 screen with a spinner that is a few tenths of a millisecond against about
2.5 ms for the whole frame.

A frame's deflated bands are kept with it (:class:`DeflatedFrame`), so a picture that differs
from it in a few rows (a recorded click's click.png: the frame before the click with a marker on
it) is that frame's bands with only the bands under those rows deflated again: a few tenths of a
millisecond where the whole picture cost about 3.5 ms (converted to RGB, then deflated).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from PIL import Image

from deskrig.grabs import BandCaches, Grab

#: ISA-L's levels run 0-3. On a 1280x800 GTK screen 0 made a file 22% larger, 3 took 20x longer;
#: 1 and 2 took the same time (about 3 ms under load) and 2 made the smaller file.
PNG_ISAL_LEVEL = 2
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_COLOUR_TYPES = {"L": 0, "RGB": 2, "RGBA": 6}
#: IDAT payload per chunk; the PNG spec caps a chunk at 2**31 - 1 bytes.
_PNG_IDAT_SIZE = 1 << 24

#: Rows of a BGRX frame deflated on their own (a fresh deflate window each): a changed band costs
#: 16 rows to encode again; on a 1280x800 GTK screen the file is about 2.5% larger than one stream.
PNG_BAND_ROWS = 16
_ADLER_BASE = 65521
#: A zlib stream's header: deflate with a 32 KiB window, "fast" level (FLEVEL 1); a multiple of 31.
_ZLIB_HEADER = b"\x78\x5e"
#: A final, empty deflate block with fixed Huffman codes: what ends the stream after the bands.
_FINAL_EMPTY_BLOCK = b"\x03\x00"


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


def _bgrx_rgb_bands(size: tuple[int, int], bgrx: bytes | bytearray) -> Iterator[bytes]:
    """RGB rows of BGRX rows, packed in one pass a band of :data:`PNG_BAND_ROWS` rows at a time
    (the last may have fewer): Pillow's raw packer reverses the first three bytes of each pixel of
    a zero-copy view, and packs as many whole rows as the size asked for holds (``Image.tobytes``
    runs the same encoder but joins the bands into one more copy)."""
    view = Image.frombuffer("RGBX", size, bgrx, "raw", "RGBX", 0, 1)
    encoder = Image._getencoder("RGBX", "raw", ("BGR", 0, 1))
    encoder.setimage(view.im, (0, 0, *view.size))
    done = 0
    while not done:
        _, done, band = encoder.encode(size[0] * 3 * PNG_BAND_ROWS)
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


@dataclass(frozen=True)
class _DeflatedBand:
    """A band's scanlines as raw deflate blocks ending on a full flush, their Adler-32 and length."""

    blocks: bytes
    adler: int
    length: int


def _adler32_combine(first: int, second: int, second_length: int) -> int:
    """The Adler-32 of two byte strings one after the other, from theirs (zlib's adler32_combine,
    which Python does not expose): both sums start at 1, and each byte of the second string adds
    the first string's sum A - 1 once more to B."""
    low = ((first & 0xFFFF) + (second & 0xFFFF) - 1) % _ADLER_BASE
    high = ((first >> 16) + (second >> 16) + second_length * ((first & 0xFFFF) - 1)) % _ADLER_BASE
    return (high << 16) | low


def _deflated_bands(rows: memoryview, width: int, height: int) -> list[_DeflatedBand]:
    """A run of BGRX rows in bands of :data:`PNG_BAND_ROWS` rows, packed to RGB in one pass and
    deflated by one compressor, fully flushed at the end of each band (which starts the next one
    afresh, as a compressor of its own would): set up once a run, not once a band."""
    from isal import isal_zlib

    # A copy of the run's BGRX rows (microseconds) for Pillow, whose stubs take no memoryview.
    packed_bands = _bgrx_rgb_bands((width, height), rows.tobytes())
    compressor = isal_zlib.compressobj(PNG_ISAL_LEVEL, isal_zlib.DEFLATED, -15)
    bands = []
    for packed in packed_bands:
        scanlines = _scanlines(_rows_of(packed, width * 3))
        blocks = compressor.compress(scanlines) + compressor.flush(isal_zlib.Z_FULL_FLUSH)
        bands.append(_DeflatedBand(blocks, isal_zlib.adler32(scanlines), len(scanlines)))
    return bands


def _deflated_rgb_band(rows: memoryview, width: int) -> _DeflatedBand:
    """A band of RGB rows (packed already), deflated."""
    return _deflated_scanlines_band(_scanlines(_rows_of(rows, width * 3)))


def _deflated_scanlines_band(scanlines: bytes) -> _DeflatedBand:
    from isal import isal_zlib

    compressor = isal_zlib.compressobj(PNG_ISAL_LEVEL, isal_zlib.DEFLATED, -15)
    blocks = compressor.compress(scanlines) + compressor.flush(isal_zlib.Z_FULL_FLUSH)
    return _DeflatedBand(blocks, isal_zlib.adler32(scanlines), len(scanlines))


_band_caches: BandCaches[_DeflatedBand] = BandCaches(PNG_BAND_ROWS)


@dataclass(frozen=True)
class DeflatedFrame:
    """An RGB picture's scanlines deflated in bands of :data:`PNG_BAND_ROWS` rows (see the module
    docstring): its PNG, and the PNG of the same picture with a few rows changed."""

    width: int
    height: int
    bands: tuple[_DeflatedBand, ...]

    def png(self) -> bytes:
        adler = self.bands[0].adler
        for later in self.bands[1:]:
            adler = _adler32_combine(adler, later.adler, later.length)
        stream = [_ZLIB_HEADER, *(part.blocks for part in self.bands), _FINAL_EMPTY_BLOCK]
        return _png_file(self.width, self.height, "RGB", b"".join([*stream, adler.to_bytes(4, "big")]))

    def band_span(self, top: int, bottom: int) -> tuple[int, int]:
        """Rows ``top`` to ``bottom`` (exclusive) widened to whole bands, within the picture: the
        rows :meth:`with_rows` takes to change any of those."""
        top = max(0, min(top, self.height)) // PNG_BAND_ROWS * PNG_BAND_ROWS
        bottom = -(-max(0, min(bottom, self.height)) // PNG_BAND_ROWS) * PNG_BAND_ROWS
        return top, min(max(top, bottom), self.height)

    def with_rows(self, top: int, rows: Image.Image) -> DeflatedFrame:
        """This picture with its rows from ``top`` on replaced by ``rows`` (RGB, as wide as the
        picture, from one band edge to another or to the bottom: see :meth:`band_span`): only the
        bands those rows lie in are deflated."""
        bottom = top + rows.height
        if (
            rows.mode != "RGB"
            or rows.width != self.width
            or top % PNG_BAND_ROWS
            or bottom > self.height
            or (bottom % PNG_BAND_ROWS and bottom != self.height)
        ):
            raise ValueError(
                f"rows {top}..{bottom} of a {rows.mode} {rows.width}-pixel-wide picture do not replace "
                f"whole bands of a {self.width}x{self.height} RGB one"
            )
        stride = self.width * 3
        packed = memoryview(rows.tobytes())
        band = stride * PNG_BAND_ROWS
        first = top // PNG_BAND_ROWS
        changed = [
            _deflated_rgb_band(packed[at : at + band], self.width) for at in range(0, len(packed), band)
        ]
        return replace(self, bands=(*self.bands[:first], *changed, *self.bands[first + len(changed) :]))


def deflate_frame(frame: Grab) -> DeflatedFrame:
    """A BGRX frame's bands: those of the last frame of its size where its rows are the same, the
    others deflated (see the module docstring)."""
    bgrx = frame.bgrx
    if bgrx is None:
        raise ValueError("only a frame of BGRX rows is deflated in bands")
    view = memoryview(bgrx)
    stride = frame.width * 4

    def run(top: int, rows: int) -> list[_DeflatedBand]:
        return _deflated_bands(view[top * stride : (top + rows) * stride], frame.width, rows)

    bands = _band_caches.get(frame.width, frame.height, PNG_ISAL_LEVEL).update(frame, run)
    return DeflatedFrame(frame.width, frame.height, tuple(bands))


def _png_file(width: int, height: int, mode: str, compressed: bytes) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, _PNG_COLOUR_TYPES[mode], 0, 0, 0)
    idat = b"".join(
        _png_chunk(b"IDAT", compressed[i : i + _PNG_IDAT_SIZE])
        for i in range(0, len(compressed), _PNG_IDAT_SIZE)
    )
    return _PNG_SIGNATURE + _png_chunk(b"IHDR", header) + idat + _png_chunk(b"IEND", b"")


def encode_png(picture: Grab | Image.Image) -> bytes:
    """Lossless PNG with unfiltered rows (see the module docstring for why)."""
    return encode_png_with_bands(picture)[0]


def encode_png_with_bands(picture: Grab | Image.Image) -> tuple[bytes, DeflatedFrame | None]:
    """:func:`encode_png`, and for a frame of BGRX rows its deflated bands, which make the PNG of
    the same picture with a few rows changed (:meth:`DeflatedFrame.with_rows`); None for a
    Pillow image, deflated as one stream."""
    if isinstance(picture, Grab) and picture.bgrx is not None:
        deflated = deflate_frame(picture)
        return deflated.png(), deflated
    image = picture.image() if isinstance(picture, Grab) else picture
    if image.mode not in _PNG_COLOUR_TYPES:
        image = image.convert("RGBA" if has_alpha(image) else "RGB")
    stride = image.width * len(image.getbands())
    compressed = _deflated_scanlines(_packed_bands(image.tobytes(), stride), stride)
    return _png_file(image.width, image.height, image.mode, compressed), None
