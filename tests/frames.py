"""Frames the encoding tests make and encode: screen-like images, as X11 grabs, and libjpeg's
own encoding of a whole frame to compare banded JPEGs with; the encoders' band caches forgotten,
and ``compressed_rows`` and ``compressing_threads``, fixtures (this module is a pytest plugin, see
tests/conftest.py)."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from PIL import Image, ImageDraw

from deskrig import png, turbojpeg
from deskrig.grabs import BandCaches, Grab

BLUE = (53, 132, 228)
PANEL = (246, 245, 244)


def desktop_like(width: int = 640, height: int = 400) -> Image.Image:
    """Flat panels, a coloured button, text and a noisy photo patch, like a GTK screen."""
    image = Image.new("RGB", (width, height), (46, 52, 64))
    draw = ImageDraw.Draw(image)
    draw.rectangle((20, 20, width - 20, height - 20), fill=PANEL)
    draw.rectangle((40, 40, 200, 100), fill=BLUE)
    for row, y in enumerate(range(120, height - 120, 16)):
        draw.text((40, y), f"line {row}: the quick brown fox jumps over the lazy dog", fill=(20, 20, 20))
    noise = Image.frombytes("RGB", (120, 80), random.Random(7).randbytes(120 * 80 * 3))
    image.paste(noise, (width - 160, height - 120))
    return image


def bgrx_frame(image: Image.Image, seed: int = 3) -> Grab:
    """``image`` (RGB) as an X11 grab: B, G, R and a padding byte of noise, which must not show."""
    red, green, blue = image.split()
    padding = Image.frombytes("L", image.size, random.Random(seed).randbytes(image.width * image.height))
    return Grab.from_bgrx(bytearray(Image.merge("RGBA", (blue, green, red, padding)).tobytes()), *image.size)


#: Held while a test changes the process's environment: two threads that overlapped there could
#: leave a variable set for good (one takes the other's value for the one to restore). A
#: TJ_RESTART left set made every later banded JPEG unstitchable.
ENVIRONMENT_LOCK = threading.RLock()


@contextmanager
def environment(name: str, value: str) -> Iterator[None]:
    """``name`` set while the block runs (TurboJPEG reads its TJ_* variables at every compress),
    for the whole process: a thread encoding meanwhile must hold :data:`ENVIRONMENT_LOCK`."""
    with ENVIRONMENT_LOCK:
        before = os.environ.get(name)
        os.environ[name] = value
        try:
            yield
        finally:
            if before is None:
                del os.environ[name]
            else:
                os.environ[name] = before


def libjpeg_restart_encode(frame: Grab, quality: int) -> bytes:
    """The whole frame in one libjpeg run with a restart marker after every MCU row."""
    assert frame.bgrx is not None
    with environment("TJ_RESTART", "1"):
        return turbojpeg.encode_bgrx_whole(frame, frame.bgrx, quality)


def forget_frames() -> None:
    """The encoders start from no frame remembered."""
    turbojpeg._band_caches = BandCaches(turbojpeg.BAND_ROWS)
    png._band_caches = BandCaches(png.PNG_BAND_ROWS)


def _noting_compressions(monkeypatch: pytest.MonkeyPatch, note: Callable[[int, int], None]) -> None:
    """``note(address, height)`` of every band TurboJPEG is asked to compress, on the thread that asks."""
    compress = turbojpeg._compress

    def noting(address: int, width: int, height: int, quality: int) -> bytes:
        note(address, height)
        return compress(address, width, height, quality)

    monkeypatch.setattr(turbojpeg, "_compress", noting)


@pytest.fixture
def compressed_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The height of every band TurboJPEG is asked to compress, in order."""
    heights: list[int] = []
    _noting_compressions(monkeypatch, lambda _address, height: heights.append(height))
    return heights


@pytest.fixture
def compressing_threads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The address of every band TurboJPEG is asked to compress and the thread that asked, in order."""
    calls: list[tuple[int, int]] = []
    _noting_compressions(monkeypatch, lambda address, _height: calls.append((address, threading.get_ident())))
    return calls
