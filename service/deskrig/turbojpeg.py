"""JPEG straight from a capture's BGRX rows, through libjpeg-turbo's TurboJPEG library, re-encoding
only the bands of the frame that changed since the last one of its size and quality.

TurboJPEG reads BGRX itself, so no RGB copy of the frame is made. It is reached through ctypes
rather than a wheel: the wheels that wrap it (simplejpeg, PyTurboJPEG) all require numpy, which
weighs 73 MB in the rig image against 0.7 MB for Debian's ``libturbojpeg0``. Where the library is
not installed, :func:`available` is false and :mod:`deskrig.imaging` encodes through Pillow (same
libjpeg-turbo, after a BGRX→RGB copy).

The library is loaded on first use; a compressor handle is kept per thread, because TurboJPEG
handles must not be shared between threads.

Bands. A screen mostly stays as it was between two captures (a spinner, a caret, a clock changes a
few dozen pixels), so a frame is encoded as bands of one MCU row (16 pixel rows at 4:2:0) joined by
restart markers: the JPEG header declares a restart interval of one MCU row (DRI), so at each
RST0..RST7 marker the decoder resets its DC predictions and each band's entropy-coded segment
stands on its own. A band encoded as a JPEG of its own, with the same quality, subsampling, and
TurboJPEG's fixed standard Huffman tables, has exactly that segment as its scan data (the DC
predictions start at zero and the last byte is padded with one-bits, as at a restart marker), so
the stitched file is byte for byte what libjpeg writes for the whole frame with
``restart_in_rows = 1`` (``TJ_RESTART=1``), and decodes to the same pixels as a plain encode.
:class:`deskrig.grabs.BandCaches` keeps the segments of the last frame of each size and quality,
and only the bands whose rows changed are encoded again: on a 1280x800 screen with a spinner
0.3-0.5 ms of CPU against 2.3 ms for a whole encode, and about 4 ms when every band changed.

Helpers. A long run of changed bands (a whole-screen change: a page switched, a list scrolled, the
first capture) is dealt out between the calling thread and helper threads, one per other usable
CPU (:class:`Helpers`): TurboJPEG runs without the GIL (ctypes lets go of it around every foreign
call), so with an idle second core every band of gtk3-widget-factory's 1280x800 screen takes about
2.9 ms instead of 4.0, for a tenth more CPU. A short run is encoded by the calling thread alone:
handing work to a thread and back costs about what TurboJPEG takes for a few bands.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import ctypes.util
import functools
import itertools
import operator
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from deskrig.cpus import usable_cpus
from deskrig.grabs import BGRX_PIXEL as _BGRX_PIXEL
from deskrig.grabs import BandCaches, Grab

#: TurboJPEG's pixel format and chroma subsampling constants (turbojpeg.h, stable since 1.2).
_TJPF_BGRX = 3
_TJSAMP_420 = 2
#: Pixel rows per band: one MCU row at 4:2:0.
BAND_ROWS = 16
_SOI, _EOI = b"\xff\xd8", b"\xff\xd9"
_RESTART_MARKERS = tuple(bytes((0xFF, 0xD0 + n)) for n in range(8))
_SOF_BASELINE, _DRI, _SOS = 0xC0, 0xDD, 0xDA

#: Where each platform keeps the library, tried in order after the linker's own search.
_LIBRARY_NAMES = {
    "linux": ("libturbojpeg.so.0",),
    "darwin": ("libturbojpeg.dylib", "/opt/homebrew/opt/jpeg-turbo/lib/libturbojpeg.dylib"),
    "win32": ("turbojpeg.dll",),
}


class TurboJpegError(RuntimeError):
    """TurboJPEG refused to compress; the message is the library's own."""


@functools.cache
def _library() -> ctypes.CDLL | None:
    found = ctypes.util.find_library("turbojpeg")
    candidates = ([found] if found else []) + list(_LIBRARY_NAMES.get(sys.platform, ()))
    for name in candidates:
        try:
            library = ctypes.CDLL(name)
        except OSError:
            continue
        library.tjInitCompress.restype = ctypes.c_void_p
        library.tjInitCompress.argtypes = []
        library.tjCompress2.restype = ctypes.c_int
        library.tjCompress2.argtypes = [
            ctypes.c_void_p,  # handle
            ctypes.c_void_p,  # source rows
            ctypes.c_int,  # width
            ctypes.c_int,  # pitch
            ctypes.c_int,  # height
            ctypes.c_int,  # pixel format
            ctypes.POINTER(ctypes.POINTER(ctypes.c_ubyte)),  # JPEG buffer (allocated by the library)
            ctypes.POINTER(ctypes.c_ulong),  # JPEG size
            ctypes.c_int,  # chroma subsampling
            ctypes.c_int,  # quality
            ctypes.c_int,  # flags
        ]
        library.tjFree.restype = None
        library.tjFree.argtypes = [ctypes.POINTER(ctypes.c_ubyte)]
        library.tjGetErrorStr2.restype = ctypes.c_char_p
        library.tjGetErrorStr2.argtypes = [ctypes.c_void_p]
        return library
    return None


def available() -> bool:
    """Whether libturbojpeg could be loaded (the first call loads it)."""
    return _library() is not None


class _Handles(threading.local):
    compressor: int | None = None


_handles = _Handles()


def _compressor(library: ctypes.CDLL) -> int:
    # One handle per thread for the thread's life: the encoders run on a few long-lived workers.
    if _handles.compressor is None:
        handle = library.tjInitCompress()
        if not handle:
            raise TurboJpegError("tjInitCompress failed")
        _handles.compressor = handle
    return _handles.compressor


def _rows_address(bgrx: bytes | bytearray) -> int:
    """Where ``bgrx``'s bytes are, read in place: a bytes object through its own buffer, a
    bytearray as a view. The caller keeps ``bgrx`` alive while the address is used.

    Not ``ctypes.cast``: the object it casts keeps itself in its own ``_objects``, a reference
    cycle that held every frame (4 MB at 1280x800) until the cyclic collector ran, so each grab's
    buffer came fresh from the kernel: about 1,000 page faults, 1.7-2 ms of CPU a capture.
    """
    if isinstance(bgrx, bytes):
        pointer = ctypes.c_char_p(bgrx)
        address = ctypes.c_void_p.from_buffer(pointer).value
    else:
        address = ctypes.addressof((ctypes.c_char * len(bgrx)).from_buffer(bgrx))
    assert address is not None
    return address


def _compress(address: int, width: int, height: int, quality: int) -> bytes:
    """One baseline JPEG of ``height`` BGRX rows of ``width`` pixels starting at ``address``."""
    library = _library()
    assert library is not None, "TurboJPEG called without libturbojpeg"
    handle = _compressor(library)
    output = ctypes.POINTER(ctypes.c_ubyte)()
    size = ctypes.c_ulong(0)
    status = library.tjCompress2(
        handle,
        address,
        width,
        width * _BGRX_PIXEL,
        height,
        _TJPF_BGRX,
        ctypes.byref(output),
        ctypes.byref(size),
        _TJSAMP_420,
        quality,
        0,
    )
    try:
        if status != 0:
            message = library.tjGetErrorStr2(handle) or b"unknown error"
            raise TurboJpegError(message.decode(errors="replace"))
        return ctypes.string_at(output, size.value)
    finally:
        if output:
            library.tjFree(output)


def encode_bgrx_whole(frame: Grab, bgrx: bytes | bytearray, quality: int) -> bytes:
    """``frame``'s BGRX rows as one plain baseline JPEG at ``quality``, 4:2:0 chroma, no bands."""
    return _compress(_rows_address(bgrx), frame.width, frame.height, quality)


class _Unstitchable(Exception):
    """A band's JPEG cannot be joined to the others: TurboJPEG was told by the environment
    (``TJ_OPTIMIZE``, ``TJ_ARITHMETIC``, ``TJ_PROGRESSIVE``, ``TJ_RESTART``) to write something
    other than a baseline JPEG with fixed tables and no restart markers of its own."""


@dataclass(frozen=True)
class _BandJpeg:
    """A band's JPEG taken apart: its markers before the scan, with the frame height zeroed (equal
    for every band of a frame), where SOF0's height field is, the SOS segment, and its scan data
    after the restart marker that comes before the band in its frame (none for the first band)."""

    tables: bytes
    height_at: int
    sos: bytes
    segment: bytes


def _take_apart(jpeg: bytes) -> _BandJpeg:
    position, height_at = len(_SOI), -1
    while position + 4 <= len(jpeg) and jpeg[position] == 0xFF:
        marker = jpeg[position + 1]
        end = position + 2 + int.from_bytes(jpeg[position + 2 : position + 4], "big")
        if marker == _SOF_BASELINE:
            height_at = position + 5  # marker, length, sample precision, then the height
        elif (0xC1 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC)) or marker == _DRI:
            # Another frame type (progressive, arithmetic) or restart markers of its own.
            raise _Unstitchable(f"TurboJPEG wrote marker {marker:#04x}")
        elif marker == _SOS:
            if height_at < 0 or jpeg[-2:] != _EOI:
                break
            tables = jpeg[:height_at] + b"\0\0" + jpeg[height_at + 2 : position]
            return _BandJpeg(tables, height_at, jpeg[position:end], jpeg[end:-2])
        position = end
    raise _Unstitchable("TurboJPEG wrote no baseline frame header and scan")


#: Band sizes and qualities remembered by :func:`_band_of`, at most (a window's bands of a few sizes).
_MAX_KNOWN_BANDS = 32
#: For each band size and quality (width, rows, quality), the bytes a band's JPEG had before its
#: scan data and what they were taken apart into: TurboJPEG writes the same bytes there for every
#: band of that size and quality.
_known_bands: dict[tuple[int, int, int], tuple[bytes, _BandJpeg]] = {}


def _band_of(jpeg: bytes, size_and_quality: tuple[int, int, int], restart: bytes = b"") -> _BandJpeg:
    """:func:`_take_apart` of a band's JPEG of ``size_and_quality``, its scan data after the
    ``restart`` marker. Where the JPEG starts with the bytes the last band of that size and quality
    had before its scan, it is taken apart as that one was, by one comparison instead of a walk
    over its markers in Python (and its parts share that one's tables, which :func:`_stitched`
    then compares by identity)."""
    known = _known_bands.get(size_and_quality)
    if known is not None:
        header, band = known
        if len(jpeg) >= len(header) + len(_EOI) and jpeg.startswith(header) and jpeg.endswith(_EOI):
            return _BandJpeg(band.tables, band.height_at, band.sos, restart + jpeg[len(header) : -len(_EOI)])
    band = _take_apart(jpeg)
    if len(_known_bands) >= _MAX_KNOWN_BANDS:
        _known_bands.clear()
    _known_bands[size_and_quality] = (jpeg[: len(jpeg) - len(band.segment) - len(_EOI)], band)
    return _BandJpeg(band.tables, band.height_at, band.sos, restart + band.segment) if restart else band


_TABLES = operator.attrgetter("tables")
_SEGMENT = operator.attrgetter("segment")


def _stitched(parts: list[_BandJpeg], width: int, height: int) -> bytes:
    """The bands' segments, each after its restart marker, as one JPEG of ``width`` x ``height``:
    the first band's markers with the frame's height and a restart interval (DRI) of one MCU row,
    put before its SOS as libjpeg puts it."""
    first = parts[0]
    # In C, with equal tables mostly one object (:func:`_band_of`): compared by identity first.
    if list(map(_TABLES, parts)).count(first.tables) != len(parts):
        raise _Unstitchable("the bands were written with different tables")
    mcus_per_row = -(-width // BAND_ROWS)
    if mcus_per_row > 0xFFFF:
        raise _Unstitchable(f"{mcus_per_row} MCUs a row do not fit a restart interval")
    pieces = [
        first.tables[: first.height_at],
        height.to_bytes(2, "big"),
        first.tables[first.height_at + 2 :],
        bytes((0xFF, _DRI, 0, 4)) + mcus_per_row.to_bytes(2, "big"),
        first.sos,
        *map(_SEGMENT, parts),
        _EOI,
    ]
    return b"".join(pieces)


_band_caches: BandCaches[_BandJpeg] = BandCaches(BAND_ROWS)

#: Pixels of a run that each thread encoding it is given at least: TurboJPEG takes about 0.3 ms
#: for them on a desktop's pixels, several times what a hand-over to a helper thread and back costs.
PIXELS_PER_THREAD_MIN = 100_000
#: Helper threads at most, whatever the CPUs: the runs are a screen's bands.
HELPERS_MAX = 3


class Helpers:
    """``count`` threads that encode shares of a long run of bands beside the calling thread,
    started on first use."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    self.count, thread_name_prefix="deskrig-jpeg"
                )
            return self._executor


#: What every encode shares unless given others: one helper per usable CPU but the caller's, up to
#: :data:`HELPERS_MAX`; none on one CPU.
shared_helpers = Helpers(min(usable_cpus() - 1, HELPERS_MAX))


def _shares(helpers: Helpers, tops: Sequence[int], pixels_per_band: int) -> list[Sequence[int]]:
    """``tops`` dealt out in turn, one share per thread that encodes some: as many as hold
    :data:`PIXELS_PER_THREAD_MIN` pixels each, and at most one more than there are helpers. Dealt,
    not cut: a screen's busy rows (text) and quiet ones (a panel) then fall to every thread alike."""
    threads = min(helpers.count + 1, len(tops) * pixels_per_band // PIXELS_PER_THREAD_MIN)
    if threads < 2:
        return [tops]
    return [tops[share::threads] for share in range(threads)]


def _submitted(
    helpers: Helpers, work: Callable[[], list[_BandJpeg]]
) -> concurrent.futures.Future[list[_BandJpeg]] | None:
    """``work`` handed to a helper; None when none takes work any more (the interpreter is
    shutting down, and a daemon thread still encodes)."""
    try:
        return helpers.executor().submit(work)
    except RuntimeError:
        return None


def _bands_at(band: Callable[[int], _BandJpeg], tops: Sequence[int]) -> list[_BandJpeg]:
    return [band(top) for top in tops]


def _encoded(
    helpers: Helpers, band: Callable[[int], _BandJpeg], tops: Sequence[int], pixels_per_band: int
) -> list[_BandJpeg]:
    """``band(top)`` of every top in ``tops``, in order: the first share (:func:`_shares`) in this
    thread, the others in helper threads at the same time."""
    first, *others = _shares(helpers, tops, pixels_per_band)
    if not others:  # the common case, a few changed bands: no hand-over to wait for
        return _bands_at(band, first)
    futures: list[concurrent.futures.Future[list[_BandJpeg]] | None] = []
    try:
        for share in others:
            futures.append(_submitted(helpers, functools.partial(_bands_at, band, share)))
        shares = [_bands_at(band, first)]
        for share, future in zip(others, futures, strict=True):
            shares.append(_bands_at(band, share) if future is None else future.result())
    finally:
        # On the way out by an error too: the helpers read the caller's rows, which live only as
        # long as this call.
        concurrent.futures.wait([future for future in futures if future is not None])
    # Dealt back in order: the first share is the longest, by one band at most.
    return [part for turn in itertools.zip_longest(*shares) for part in turn if part is not None]


def encode_bgrx(frame: Grab, bgrx: bytes | bytearray, quality: int, helpers: Helpers | None = None) -> bytes:
    """``frame``'s BGRX rows as a baseline JPEG at ``quality``, with 4:2:0 chroma like Pillow's
    default, restart markers between bands of 16 rows, and only the bands that changed since the
    last frame of this size encoded anew, a long run of them shared with ``helpers`` (default:
    :data:`shared_helpers`; see the module docstring).

    Raises :class:`TurboJpegError` when the library refuses; call only when :func:`available`.
    """
    cache = _band_caches.get(frame.width, frame.height, quality)
    address = _rows_address(bgrx)
    stride = frame.width * _BGRX_PIXEL

    def band(top: int, rows: int) -> _BandJpeg:
        # The marker is joined to the band's scan data once, when it is encoded, not at every frame.
        index = top // BAND_ROWS
        return _band_of(
            _compress(address + top * stride, frame.width, rows, quality),
            (frame.width, rows, quality),
            _RESTART_MARKERS[(index - 1) % len(_RESTART_MARKERS)] if index else b"",
        )

    def run(top: int, rows: int) -> list[_BandJpeg]:
        # Band by band: TurboJPEG 2.1 writes restart markers only when the environment says so
        # (TJ_RESTART), for the whole process, so a run is not one encode split at its markers.
        end = top + rows
        return _encoded(
            shared_helpers if helpers is None else helpers,
            lambda at: band(at, min(BAND_ROWS, end - at)),
            range(top, end, BAND_ROWS),
            frame.width * BAND_ROWS,
        )

    try:
        return _stitched(cache.update(frame, run), frame.width, frame.height)
    except _Unstitchable:
        _band_caches.drop(cache)
        return encode_bgrx_whole(frame, bgrx, quality)
