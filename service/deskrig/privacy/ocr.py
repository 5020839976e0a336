"""Reading text off pixels: Debian's tesseract (``tesseract-ocr`` + ``tesseract-ocr-eng``), kept loaded.

The engine is libtesseract's C API through ctypes: its English model loads once (about 0.2 s)
and every read after that is the recognition alone. Reads are serialised (one engine, not
thread-safe) and cached by the content hash of the pixels read, so an unchanged screen is not
read again. Nothing is downloaded: the model is the Debian package's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from PIL import Image, ImageChops

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

#: Page segmentation 11, "sparse text": a screen is scattered labels, not a page of prose.
SPARSE_TEXT = 11
#: Screens are ~96 dpi; saying so stops tesseract guessing (and logging its guess) per read.
SCREEN_DPI = b"96"
#: Reads kept (a few screens and windows).
CACHE_SIZE = 16
#: A horizontal rule: a dark run at least this long, thinner than RULE_THICKNESS (a field's border,
#: a focus ring, an underline); no glyph stroke of screen text is that long and that thin.
RULE_LENGTH = 48
RULE_THICKNESS = 4
#: Darker than this is ink on a light background.
INK_BELOW = 128
_REMEDIATION = "install Debian's tesseract-ocr and tesseract-ocr-eng, or turn the policy's ocr off"


@dataclass(frozen=True)
class Word:
    """One recognised word, its box in the image read, and the line it belongs to."""

    text: str
    box: Bounds
    line: tuple[int, int, int]


def _unavailable(message: str) -> DeskrigError:
    return DeskrigError(
        ErrorCode.CAPTURE_FAILED, f"PII masking needs OCR: {message}", remediation=_REMEDIATION
    )


class _Library:
    """The few libtesseract C functions used, with their signatures."""

    def __init__(self) -> None:
        name = ctypes.util.find_library("tesseract") or "libtesseract.so.5"
        try:
            lib = ctypes.CDLL(name)
        except OSError as exc:
            raise _unavailable(f"libtesseract is not installed ({exc})") from exc
        handle, text = ctypes.c_void_p, ctypes.c_char_p
        lib.TessBaseAPICreate.restype = handle
        lib.TessBaseAPIInit3.argtypes = [handle, text, text]
        lib.TessBaseAPISetVariable.argtypes = [handle, text, text]
        lib.TessBaseAPISetPageSegMode.argtypes = [handle, ctypes.c_int]
        lib.TessBaseAPISetImage.argtypes = [handle, text, *[ctypes.c_int] * 4]
        lib.TessBaseAPIGetTsvText.argtypes = [handle, ctypes.c_int]
        lib.TessBaseAPIGetTsvText.restype = handle
        lib.TessDeleteText.argtypes = [handle]
        lib.TessBaseAPIEnd.argtypes = [handle]
        lib.TessBaseAPIDelete.argtypes = [handle]
        self.lib = lib


class OcrEngine:
    """One loaded tesseract engine with a cache of its reads; loads on first use."""

    name = "tesseract"

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        self._lock = threading.Lock()
        self._lib: _Library | None = None
        self._handle: int | None = None
        self._cache: OrderedDict[bytes, list[Word]] = OrderedDict()
        self._cache_size = cache_size
        #: Reads actually done (cache misses), for tests and the benchmark.
        self.reads = 0

    def _engine(self) -> tuple[ctypes.CDLL, int]:
        if self._lib is None or self._handle is None:
            # One recognition thread: the rig shares a few cores with the app under test.
            os.environ.setdefault("OMP_THREAD_LIMIT", "1")
            library = _Library()
            handle = library.lib.TessBaseAPICreate()
            if library.lib.TessBaseAPIInit3(handle, None, b"eng") != 0:
                library.lib.TessBaseAPIDelete(handle)
                raise _unavailable("tesseract's English model (tesseract-ocr-eng) did not load")
            library.lib.TessBaseAPISetVariable(handle, b"user_defined_dpi", SCREEN_DPI)
            # Light-on-dark lines are read as they are; re-reading every doubtful line inverted
            # costs a second recognition of it.
            library.lib.TessBaseAPISetVariable(handle, b"tessedit_do_invert", b"0")
            library.lib.TessBaseAPISetPageSegMode(handle, SPARSE_TEXT)
            self._lib, self._handle = library, handle
        return self._lib.lib, self._handle

    def words(self, image: Image.Image) -> list[Word]:
        """The words in ``image`` (boxes in its pixels); blocking, cached by content."""
        gray = image.convert("L")
        pixels = gray.tobytes()
        key = hashlib.blake2b(pixels, digest_size=16, person=str(gray.size).encode()[:16]).digest()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
            lib, handle = self._engine()
            pixels = without_rules(gray).tobytes()
            lib.TessBaseAPISetImage(handle, pixels, gray.width, gray.height, 1, gray.width)
            tsv = lib.TessBaseAPIGetTsvText(handle, 0)
            try:
                text = ctypes.string_at(tsv).decode("utf-8", "replace")
            finally:
                lib.TessDeleteText(tsv)
            self.reads += 1
            words = _parse_tsv(text)
            self._cache[key] = words
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return words

    def forget(self) -> None:
        """Empty the cache of reads (the benchmark's "changed screen")."""
        with self._lock:
            self._cache.clear()

    def close(self) -> None:
        with self._lock:
            if self._lib is not None and self._handle is not None:
                self._lib.lib.TessBaseAPIEnd(self._handle)
                self._lib.lib.TessBaseAPIDelete(self._handle)
            self._lib = self._handle = None
            self._cache.clear()


def _shifted(image: Image.Image, dx: int, dy: int) -> Image.Image:
    moved = Image.new("L", image.size, 0)
    moved.paste(image, (dx, dy))
    return moved


def _opened(ink: Image.Image, length: int, horizontal: bool) -> Image.Image:
    """The runs of ``ink`` (255 on 0) at least ``length`` long across (or down): a morphological
    opening by a 1 x ``length`` line, in doubling shifts."""
    eroded, covered, steps = ink, 1, []
    while covered < length:
        step = min(covered, length - covered)
        eroded = ImageChops.darker(
            eroded, _shifted(eroded, -step, 0) if horizontal else _shifted(eroded, 0, -step)
        )
        steps.append(step)
        covered += step
    dilated = eroded
    for step in steps:
        dilated = ImageChops.lighter(
            dilated, _shifted(dilated, step, 0) if horizontal else _shifted(dilated, 0, step)
        )
    return dilated


def without_rules(gray: Image.Image) -> Image.Image:
    """``gray`` with thin horizontal dark rules painted white. Tesseract's sparse-text layout
    takes a line of text joined to a field's border or focus ring for a picture and reads none of
    it (a Tk entry whose text reaches its edge); without the rules the text stands alone."""
    ink = gray.point(lambda value: 255 if value < INK_BELOW else 0)
    long_runs = _opened(ink, RULE_LENGTH, horizontal=True)
    rules = ImageChops.subtract(long_runs, _opened(long_runs, RULE_THICKNESS, horizontal=False))
    return Image.composite(Image.new("L", gray.size, 255), gray, rules)


def _parse_tsv(text: str) -> list[Word]:
    """Word rows (level 5) of tesseract's TSV: level page block par line word left top width height conf text."""
    words = []
    for row in text.splitlines():
        fields = row.split("\t")
        if len(fields) < 12 or fields[0] != "5" or not fields[11].strip():
            continue
        block, paragraph, line = (int(v) for v in fields[2:5])
        left, top, width, height = (int(v) for v in fields[6:10])
        words.append(
            Word(
                fields[11],
                Bounds(x=left, y=top, width=max(width, 1), height=max(height, 1)),
                (block, paragraph, line),
            )
        )
    return words
