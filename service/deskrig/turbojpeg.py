"""JPEG straight from a capture's BGRX rows, through libjpeg-turbo's TurboJPEG library.

TurboJPEG reads BGRX itself, so no RGB copy of the frame is made. It is reached through ctypes
rather than a wheel: the wheels that wrap it (simplejpeg, PyTurboJPEG) all require numpy, which
weighs 73 MB in the rig image against 0.7 MB for Debian's ``libturbojpeg0``. Where the library is
not installed, :func:`available` is false and :mod:`deskrig.imaging` encodes through Pillow (same
libjpeg-turbo, after a BGRX→RGB copy).

The library is loaded on first use; a compressor handle is kept per thread, because TurboJPEG
handles must not be shared between threads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
import threading

from deskrig.grabs import Grab

#: TurboJPEG's pixel format and chroma subsampling constants (turbojpeg.h, stable since 1.2).
_TJPF_BGRX = 3
_TJSAMP_420 = 2

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


def encode_bgrx(frame: Grab, bgrx: bytes | bytearray, quality: int) -> bytes:
    """``frame``'s BGRX rows as a baseline JPEG at ``quality``, with 4:2:0 chroma like Pillow's default.

    Raises :class:`TurboJpegError` when the library refuses; call only when :func:`available`.
    """
    library = _library()
    assert library is not None, "encode_bgrx called without libturbojpeg"
    handle = _compressor(library)
    # The rows are read in place: a bytes object through its own buffer, a bytearray as a view.
    rows = ctypes.c_char_p(bgrx) if isinstance(bgrx, bytes) else (ctypes.c_char * len(bgrx)).from_buffer(bgrx)
    output = ctypes.POINTER(ctypes.c_ubyte)()
    size = ctypes.c_ulong(0)
    status = library.tjCompress2(
        handle,
        ctypes.cast(rows, ctypes.c_void_p),
        frame.width,
        frame.width * 4,
        frame.height,
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
