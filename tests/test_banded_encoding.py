"""Encoding in bands (deskrig.grabs.BandCaches): only the bands of a frame that changed are
encoded anew. A JPEG stitched from bands is exactly the JPEG libjpeg writes for the whole frame
with a restart interval of one MCU row, and decodes (Pillow, Chromium) to the pixels of a plain
encode; a PNG deflated in bands decodes to every pixel of the grab."""

from __future__ import annotations

import base64
import gc
import io
import random
import sys
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw
from playwright.sync_api import Page
from tests.frames import bgrx_frame, desktop_like, environment, forget_frames, libjpeg_restart_encode
from tests.polling import poll

from deskrig import imaging, png, turbojpeg
from deskrig.grabs import IDLE_RELEASE_S, MAX_CACHED_FRAMES, BandCache, BandCaches, Grab


@pytest.fixture(autouse=True)
def fresh_caches(monkeypatch: pytest.MonkeyPatch) -> BandCaches[Any]:
    """Every test starts with no frame remembered; the JPEG encoder's caches are returned."""
    monkeypatch.setattr(png, "_band_caches", png._band_caches)
    monkeypatch.setattr(turbojpeg, "_band_caches", turbojpeg._band_caches)
    forget_frames()
    return turbojpeg._band_caches


def plain_encode(frame: Grab, quality: int) -> bytes:
    assert frame.bgrx is not None
    return turbojpeg.encode_bgrx_whole(frame, frame.bgrx, quality)


def pixels(jpeg: bytes) -> bytes:
    image = Image.open(io.BytesIO(jpeg))
    assert image.format == "JPEG"
    return image.convert("RGB").tobytes()


def assert_exact(stitched: bytes, frame: Grab, quality: int) -> None:
    assert stitched == libjpeg_restart_encode(frame, quality)
    assert pixels(stitched) == pixels(plain_encode(frame, quality))


def painted(image: Image.Image, box: tuple[int, int, int, int], colour: tuple[int, int, int]) -> Image.Image:
    changed = image.copy()
    ImageDraw.Draw(changed).rectangle(box, fill=colour)
    return changed


@pytest.mark.parametrize("size", [(1, 1), (17, 5), (33, 16), (16, 17), (640, 400), (641, 403)])
def test_a_banded_jpeg_is_libjpegs_own_restart_interval_jpeg(size: tuple[int, int]) -> None:
    image = (
        desktop_like(*size)
        if size[0] >= 64
        else Image.frombytes("RGB", size, random.randbytes(size[0] * size[1] * 3))
    )
    frame = bgrx_frame(image)
    first = imaging.encode(frame, "jpeg", 80)
    assert_exact(first, frame, 80)
    assert imaging.encode(bgrx_frame(image, seed=9), "jpeg", 80) == first  # from the cache


def test_only_the_bands_that_changed_are_encoded_again(compressed_rows: list[int]) -> None:
    image = desktop_like(640, 403)  # 25 full bands and one of 3 rows
    imaging.encode(bgrx_frame(image), "jpeg", 80)
    assert sorted(compressed_rows) == [3] + [16] * 25  # in shares, by more than one thread
    compressed_rows.clear()
    imaging.encode(bgrx_frame(image), "jpeg", 80)
    assert compressed_rows == []
    spinner = painted(image, (300, 30, 330, 40), (200, 30, 30))  # rows 30-40: bands 1 and 2
    frame = bgrx_frame(spinner)
    stitched = imaging.encode(frame, "jpeg", 80)
    assert compressed_rows == [16, 16]
    assert_exact(stitched, frame, 80)
    compressed_rows.clear()
    bottom = bgrx_frame(painted(spinner, (0, 401, 5, 402), (0, 0, 0)))
    stitched = imaging.encode(bottom, "jpeg", 80)
    assert compressed_rows == [3]
    assert_exact(stitched, bottom, 80)


@pytest.mark.parametrize("helpers", [1, 2])
def test_a_whole_frame_change_is_shared_between_threads_and_stitched_exactly(
    helpers: int, monkeypatch: pytest.MonkeyPatch, compressing_threads: list[tuple[int, int]]
) -> None:
    monkeypatch.setattr(turbojpeg, "shared_helpers", turbojpeg.Helpers(helpers))
    image = desktop_like(1280, 800)
    for frame in (bgrx_frame(image), bgrx_frame(painted(image, (0, 0, 1279, 799), (10, 20, 30)))):
        compressing_threads.clear()
        stitched = imaging.encode(frame, "jpeg", 80)
        assert len(compressing_threads) == 50
        # Dealt in turn: the calling thread took every (helpers + 1)th band from the top one, the
        # helpers the others (a helper done with its share early may take the next one too).
        top_down = [thread for _, thread in sorted(compressing_threads)]
        mine = top_down[:: helpers + 1]
        assert mine == [threading.get_ident()] * len(mine)
        assert threading.get_ident() not in [
            thread for band, thread in enumerate(top_down) if band % (helpers + 1)
        ]
        assert_exact(stitched, frame, 80)


def test_a_short_run_of_changed_bands_is_encoded_by_the_calling_thread_alone(
    monkeypatch: pytest.MonkeyPatch, compressing_threads: list[tuple[int, int]]
) -> None:
    monkeypatch.setattr(turbojpeg, "shared_helpers", turbojpeg.Helpers(2))
    image = desktop_like(1280, 800)
    imaging.encode(bgrx_frame(image), "jpeg", 80)
    compressing_threads.clear()
    spinner = bgrx_frame(painted(image, (300, 30, 330, 60), (200, 30, 30)))  # bands 1 to 3
    stitched = imaging.encode(spinner, "jpeg", 80)
    assert [thread for _, thread in compressing_threads] == [threading.get_ident()] * 3
    assert_exact(stitched, spinner, 80)


def test_a_band_a_helper_fails_on_fails_the_encode_once_every_helper_is_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(turbojpeg, "shared_helpers", turbojpeg.Helpers(2))
    compress = turbojpeg._compress
    caller = threading.get_ident()
    running: list[int] = []

    def failing_in_a_helper(address: int, width: int, height: int, quality: int) -> bytes:
        if threading.get_ident() == caller:
            return compress(address, width, height, quality)
        running.append(1)
        try:
            time.sleep(0.01)  # the other helper is still at work when the first one fails
            raise turbojpeg.TurboJpegError("refused")
        finally:
            running.pop()

    monkeypatch.setattr(turbojpeg, "_compress", failing_in_a_helper)
    frame = bgrx_frame(desktop_like(1280, 800))
    assert frame.bgrx is not None
    with pytest.raises(turbojpeg.TurboJpegError, match="refused"):
        turbojpeg.encode_bgrx(frame, frame.bgrx, 80)
    assert running == []  # no helper still reads the frame's rows
    monkeypatch.setattr(turbojpeg, "_compress", compress)
    assert_exact(turbojpeg.encode_bgrx(frame, frame.bgrx, 80), frame, 80)  # nothing half made was kept


def test_when_no_helper_takes_work_any_more_the_calling_thread_encodes_every_band(
    monkeypatch: pytest.MonkeyPatch, compressing_threads: list[tuple[int, int]]
) -> None:
    helpers = turbojpeg.Helpers(1)
    helpers.executor().shutdown()  # as at the interpreter's exit, with a daemon thread still capturing
    monkeypatch.setattr(turbojpeg, "shared_helpers", helpers)
    frame = bgrx_frame(desktop_like(1280, 800))
    stitched = imaging.encode(frame, "jpeg", 80)
    assert [thread for _, thread in compressing_threads] == [threading.get_ident()] * 50
    assert_exact(stitched, frame, 80)


def test_a_frame_differing_only_in_padding_bytes_gives_the_same_jpeg() -> None:
    image = desktop_like(64, 48)
    imaging.encode(bgrx_frame(image, seed=1), "jpeg", 80)
    # The rows are compared as grabbed, so the bands are encoded again, and must come out the same.
    again = imaging.encode(bgrx_frame(image, seed=2), "jpeg", 80)
    assert again == libjpeg_restart_encode(bgrx_frame(image, seed=1), 80)


frame_sizes = st.tuples(st.integers(1, 70), st.integers(1, 70))
damage = st.tuples(
    st.integers(0, 69), st.integers(0, 69), st.integers(1, 40), st.integers(1, 40), st.integers(0, 255)
)
steps = st.lists(
    st.tuples(
        st.sampled_from([80, 80, 80, 35, 95]),
        st.sampled_from(["jpeg", "jpeg", "png"]),
        st.lists(damage, max_size=3),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(frame_sizes, min_size=1, max_size=2), frames=steps, seed=st.integers(0, 1000))
def test_any_sequence_of_damage_sizes_qualities_and_formats_gives_the_exact_jpeg_and_png(
    sizes: list[tuple[int, int]],
    frames: list[tuple[int, str, list[tuple[int, int, int, int, int]]]],
    seed: int,
) -> None:
    forget_frames()  # every example from nothing
    rng = random.Random(seed)
    images = {size: Image.frombytes("RGB", size, rng.randbytes(size[0] * size[1] * 3)) for size in sizes}
    for number, (quality, fmt, rects) in enumerate(frames):
        size = sizes[number % len(sizes)]
        for x, y, w, h, shade in rects:
            images[size] = painted(images[size], (x, y, x + w, y + h), (shade, 255 - shade, shade // 2))
        frame = bgrx_frame(images[size], seed=number)
        encoded = imaging.encode(frame, fmt, quality)
        if fmt == "png":
            assert Image.open(io.BytesIO(encoded)).tobytes() == images[size].tobytes()
        else:
            assert_exact(encoded, frame, quality)


def test_only_the_png_bands_that_changed_are_deflated_again_a_run_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each run of consecutive changed bands is packed in one pass (the first frame is one run)."""
    deflated: list[tuple[int, int]] = []
    deflate = png._deflated_bands

    def counting(rows: memoryview, width: int, height: int) -> list[png._DeflatedBand]:
        bands = deflate(rows, width, height)
        deflated.append((height, len(bands)))
        return bands

    monkeypatch.setattr(png, "_deflated_bands", counting)
    image = desktop_like(640, 403)  # 25 full bands and one of 3 rows
    imaging.encode(bgrx_frame(image), "png")
    assert deflated == [(403, 26)]
    deflated.clear()
    spinner = painted(image, (300, 30, 330, 40), (200, 30, 30))  # rows 30-40: bands 1 and 2
    back = Image.open(io.BytesIO(imaging.encode(bgrx_frame(spinner), "png")))
    assert deflated == [(32, 2)]
    assert back.tobytes() == spinner.tobytes()
    deflated.clear()
    # Bands 3, 4 and 5, then 20, then 25 (the last, of 3 rows): three runs.
    apart = painted(
        painted(painted(spinner, (0, 60, 9, 90), (9, 9, 9)), (5, 330, 6, 331), (1, 2, 3)),
        (0, 401, 1, 402),
        (0, 0, 0),
    )
    back = Image.open(io.BytesIO(imaging.encode(bgrx_frame(apart), "png")))
    assert deflated == [(48, 3), (16, 1), (3, 1)]
    assert back.tobytes() == apart.tobytes()


def test_a_png_band_deflated_in_a_run_refers_to_no_other_band() -> None:
    """Every band repeats the first one's rows, so deflating the run could point back into the
    band before; then only the first band changes, and the second is kept as it was."""
    band = desktop_like(96, 64).crop((0, 20, 96, 20 + png.PNG_BAND_ROWS))
    image = Image.new("RGB", (96, png.PNG_BAND_ROWS * 3))
    for top in range(0, image.height, png.PNG_BAND_ROWS):
        image.paste(band, (0, top))
    imaging.encode(bgrx_frame(image), "png")
    changed = painted(image, (0, 0, 95, 3), (250, 0, 0))
    assert Image.open(io.BytesIO(imaging.encode(bgrx_frame(changed), "png"))).tobytes() == changed.tobytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    size=st.tuples(st.integers(1, 70), st.integers(1, 70)),
    rows=st.tuples(st.integers(-20, 90), st.integers(0, 40)),
    seed=st.integers(0, 1000),
)
def test_a_deflated_frame_with_rows_replaced_is_that_frame_with_those_rows(
    size: tuple[int, int], rows: tuple[int, int], seed: int
) -> None:
    """DeflatedFrame.with_rows: the frame's bands with the bands of the rows given deflated
    anew, which decodes to the frame with those rows (every size, a partial last band, rows
    reaching outside the frame); the frame's own PNG and the band cache are left as they were."""
    forget_frames()
    rng = random.Random(seed)
    image = Image.frombytes("RGB", size, rng.randbytes(size[0] * size[1] * 3))
    frame = bgrx_frame(image)
    deflated = png.deflate_frame(frame)
    top, bottom = deflated.band_span(rows[0], rows[0] + rows[1])
    assert top % png.PNG_BAND_ROWS == 0 and top <= max(0, rows[0]) and 0 <= top <= bottom <= size[1]
    assert bottom == size[1] or (bottom % png.PNG_BAND_ROWS == 0 and bottom >= rows[0] + rows[1])
    if top == bottom:
        return
    replacement = Image.frombytes("RGB", (size[0], bottom - top), rng.randbytes(size[0] * (bottom - top) * 3))
    expected = image.copy()
    expected.paste(replacement, (0, top))
    assert Image.open(io.BytesIO(deflated.with_rows(top, replacement).png())).tobytes() == expected.tobytes()
    assert Image.open(io.BytesIO(deflated.png())).tobytes() == image.tobytes()
    assert imaging.encode(frame, "png") == deflated.png()  # the cache still holds the frame's bands


@pytest.mark.parametrize(
    ("top", "height", "mode"), [(1, 16, "RGB"), (0, 15, "RGB"), (32, 16, "RGB"), (0, 16, "L")]
)
def test_rows_that_are_not_whole_bands_of_the_frame_are_refused(top: int, height: int, mode: str) -> None:
    deflated = png.deflate_frame(bgrx_frame(desktop_like(64, 40)))
    with pytest.raises(ValueError, match="whole bands"):
        deflated.with_rows(top, Image.new(mode, (64, height)))


def test_only_a_frame_of_bgrx_rows_is_deflated_in_bands() -> None:
    with pytest.raises(ValueError, match="BGRX"):
        png.deflate_frame(Grab.of(desktop_like(64, 40)))


@given(first=st.binary(max_size=3000), second=st.binary(max_size=3000))
def test_adler32_of_two_strings_combines_from_theirs(first: bytes, second: bytes) -> None:
    combined = png._adler32_combine(zlib.adler32(first), zlib.adler32(second), len(second))
    assert combined == zlib.adler32(first + second)


def test_a_quality_change_encodes_every_band_again(compressed_rows: list[int]) -> None:
    frame = bgrx_frame(desktop_like(64, 48))
    imaging.encode(frame, "jpeg", 80)
    compressed_rows.clear()
    stitched = imaging.encode(frame, "jpeg", 50)
    assert compressed_rows == [16, 16, 16]
    assert_exact(stitched, frame, 50)


def test_one_cache_per_frame_size_and_quality_and_only_the_latest_few(
    fresh_caches: BandCaches[Any], compressed_rows: list[int]
) -> None:
    frame = bgrx_frame(desktop_like(64, 48))
    for quality in (80, 50, 80, 50):  # a screenshot and a live view at once: no band encoded twice
        imaging.encode(frame, "jpeg", quality)
    assert compressed_rows == [16] * 6
    assert len(fresh_caches) == 2
    for width in range(64, 64 + 3 * MAX_CACHED_FRAMES):
        frame = bgrx_frame(desktop_like(width, 40))
        assert_exact(imaging.encode(frame, "jpeg", 80), frame, 80)
    assert len(fresh_caches) == MAX_CACHED_FRAMES


class FakeTimers:
    """A clock moved by hand and the release checks ``BandCaches`` asked to have run later."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pending: list[tuple[float, Callable[[], None]]] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.pending.append((self.now + delay, callback))

    def run_due(self) -> None:
        due = [entry for entry in self.pending if entry[0] <= self.now]
        self.pending = [entry for entry in self.pending if entry[0] > self.now]
        for _, callback in due:
            callback()


def test_the_frames_are_let_go_after_an_idle_period_and_the_next_capture_starts_afresh(
    monkeypatch: pytest.MonkeyPatch, compressed_rows: list[int]
) -> None:
    timers = FakeTimers()
    caches: BandCaches[Any] = BandCaches(
        turbojpeg.BAND_ROWS, clock=lambda: timers.now, call_later=timers.call_later
    )
    monkeypatch.setattr(turbojpeg, "_band_caches", caches)
    frame = bgrx_frame(desktop_like(64, 48))

    imaging.encode(frame, "jpeg", 80)
    timers.now = 20.0
    imaging.encode(frame, "jpeg", 80)  # in use: no band encoded again, no second check asked for
    assert (len(caches), compressed_rows, [at for at, _ in timers.pending]) == (1, [16] * 3, [IDLE_RELEASE_S])
    timers.now = IDLE_RELEASE_S
    timers.run_due()  # used 10 s ago: kept, checked again 30 s after that use
    assert (len(caches), [at for at, _ in timers.pending]) == (1, [20.0 + IDLE_RELEASE_S])
    timers.now = 20.0 + IDLE_RELEASE_S
    timers.run_due()
    assert (len(caches), timers.pending) == (0, [])  # idle: nothing held, nothing waiting

    encoded = imaging.encode(frame, "jpeg", 80)
    assert (len(caches), compressed_rows, len(timers.pending)) == (1, [16] * 6, 1)
    assert_exact(encoded, frame, 80)


def test_an_idle_encoder_lets_its_frames_go_on_its_own() -> None:
    caches: BandCaches[bytes] = BandCaches(16, idle_release_s=0.05)
    caches.get(64, 48, 80).update(
        bgrx_frame(desktop_like(64, 48)), lambda top, rows: [b"part"] * -(-rows // 16)
    )
    assert len(caches) == 1
    poll("the idle frames to be let go", lambda: len(caches) == 0)


def test_parts_made_for_other_rows_than_asked_are_refused_and_nothing_is_kept() -> None:
    cache: BandCache[bytes] = BandCaches[bytes](16).get(64, 48, 80)
    frame = bgrx_frame(desktop_like(64, 48))
    with pytest.raises(ValueError, match="2 parts made for the 48 rows from row 0"):
        cache.update(frame, lambda top, rows: [b"a", b"b"])
    asked: list[tuple[int, int]] = []

    def make(top: int, rows: int) -> list[bytes]:
        asked.append((top, rows))
        return [b"part"] * 3

    assert cache.update(frame, make) == [b"part"] * 3
    assert asked == [(0, 48)]  # every band anew: the refused parts were not kept


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
def test_two_captures_at_once_each_get_their_own_frame(fmt: str) -> None:
    base = desktop_like(320, 200)
    images = [painted(base, (10 * n, 20 * n, 10 * n + 40, 20 * n + 30), (n * 25, 0, 0)) for n in range(8)]
    frames = [bgrx_frame(image) for image in images]
    expected = [libjpeg_restart_encode(frame, 80) for frame in frames] if fmt == "jpeg" else []
    failures: list[str] = []
    barrier = threading.Barrier(2)

    def right(n: int, encoded: bytes) -> bool:
        if fmt == "jpeg":
            return encoded == expected[n]
        return Image.open(io.BytesIO(encoded)).tobytes() == images[n].tobytes()

    def capture(order: list[int]) -> None:
        barrier.wait()
        for _ in range(15):
            for n in order:
                if not right(n, imaging.encode(frames[n], fmt, 80 if fmt == "jpeg" else None)):
                    failures.append(f"frame {n}")

    workers = [
        threading.Thread(target=capture, args=(order,)) for order in (list(range(8)), list(range(7, -1, -1)))
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []


@pytest.mark.parametrize("rows_type", [bytes, bytearray])
def test_the_encoder_lets_go_of_the_frame(rows_type: Callable[[bytes], bytes | bytearray]) -> None:
    """A frame held past its encode (a reference cycle through ctypes.cast did this) makes every
    next grab's buffer come fresh from the kernel: a thousand page faults a 1280x800 capture."""
    image = desktop_like(64, 48)
    rows = rows_type(bgrx_frame(image).bgrx or b"")
    frame = Grab.from_bgrx(rows, 64, 48)
    gc.disable()
    try:
        before = sys.getrefcount(rows)
        imaging.encode(frame, "jpeg", 80)
        turbojpeg.encode_bgrx_whole(frame, rows, 80)
        assert sys.getrefcount(rows) == before
    finally:
        gc.enable()


band_jpegs = st.lists(
    st.tuples(st.integers(1, 40), st.integers(1, 16), st.sampled_from([35, 80, 95]), st.integers(0, 1000)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None)
@given(bands=band_jpegs)
def test_a_band_taken_apart_by_its_known_header_is_what_walking_its_markers_gives(
    bands: list[tuple[int, int, int, int]],
) -> None:
    """Bands of a few sizes and qualities in any order, each under TurboJPEG's defaults or told to
    write optimised Huffman tables (other bytes before the scan under the same size and quality),
    with a restart marker before the scan data or none."""
    known, handles = turbojpeg._known_bands.copy(), turbojpeg._handles
    turbojpeg._known_bands.clear()
    # A handle of its own: TurboJPEG 2.1 keeps optimised tables on the handle afterwards.
    turbojpeg._handles = turbojpeg._Handles()
    try:
        for width, rows, quality, seed in bands:
            frame = bgrx_frame(
                Image.frombytes("RGB", (width, rows), random.Random(seed).randbytes(width * rows * 3))
            )
            with environment("TJ_OPTIMIZE", "1" if seed % 3 == 0 else "0"):
                jpeg = plain_encode(frame, quality)
            restart = b"" if seed % 2 else bytes((0xFF, 0xD0 + seed % 8))
            walked = turbojpeg._take_apart(jpeg)
            band = turbojpeg._band_of(jpeg, (width, rows, quality), restart)
            assert (band.tables, band.height_at, band.sos) == (walked.tables, walked.height_at, walked.sos)
            assert band.segment == restart + walked.segment
    finally:
        turbojpeg._handles = handles
        turbojpeg._known_bands.clear()
        turbojpeg._known_bands.update(known)


@pytest.mark.parametrize("variable", ["TJ_OPTIMIZE", "TJ_RESTART", "TJ_PROGRESSIVE", "TJ_ARITHMETIC"])
def test_bands_turbojpeg_was_told_to_write_otherwise_give_a_whole_encode(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TurboJPEG's environment variables make per-band tables, markers or frame types that cannot
    be joined: the frame is then encoded whole, as the environment asks."""
    # A handle of its own: TurboJPEG 2.1 keeps some of these settings on the handle afterwards.
    monkeypatch.setattr(turbojpeg, "_handles", turbojpeg._Handles())
    frame = bgrx_frame(desktop_like(200, 100))
    with environment(variable, "1"):
        encoded = imaging.encode(frame, "jpeg", 80)
        assert encoded == plain_encode(frame, 80)
    Image.open(io.BytesIO(encoded)).load()


CANVAS_PIXELS = """async ([type, first, second]) => {
    const read = async (data) => {
        const image = new Image();
        image.src = `data:${type};base64,${data}`;
        await image.decode();
        const canvas = document.createElement("canvas");
        canvas.width = image.naturalWidth;
        canvas.height = image.naturalHeight;
        const context = canvas.getContext("2d");
        context.drawImage(image, 0, 0);
        return context.getImageData(0, 0, canvas.width, canvas.height).data;
    };
    const [a, b] = [await read(first), await read(second)];
    let differing = a.length === b.length ? 0 : -1;
    for (let i = 0; differing >= 0 && i < a.length; i++) if (a[i] !== b[i]) differing++;
    return {length: a.length, differing};
}"""


def pillow_png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
def test_chromium_decodes_a_banded_image_to_the_pixels_of_a_plain_one(fmt: str, browser_page: Page) -> None:
    """JPEG: the pixels of a plain encode of the frame; PNG: those of Pillow's PNG of it."""
    image = desktop_like(641, 403)
    imaging.encode(bgrx_frame(image), fmt)
    changed = painted(image, (100, 200, 180, 230), (30, 200, 90))
    frame = bgrx_frame(changed)
    banded = imaging.encode(frame, fmt)  # mostly bands kept from the first frame
    plain = plain_encode(frame, imaging.DEFAULT_QUALITY["jpeg"]) if fmt == "jpeg" else pillow_png(changed)
    result = browser_page.evaluate(
        CANVAS_PIXELS,
        [imaging.mime_type(fmt), base64.b64encode(banded).decode(), base64.b64encode(plain).decode()],
    )
    assert result == {"length": 641 * 403 * 4, "differing": 0}
