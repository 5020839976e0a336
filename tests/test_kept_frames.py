"""Frames kept by a grabber (deskrig.grabs.KeptFrames): rows lent for one call (X11's shared-memory
segment) are compared band by band with the last grab as the changed bands are copied, and the
frame's history tells the encoders which bands to encode again, so they neither keep nor compare
rows. With damage reports only the suspect bands' rows are grabbed (and compared); the rest come
from the newest kept frame. What must hold: every frame is the screen as it was when it was taken,
whatever a caller still holds; every JPEG is libjpeg's own of the frame, every PNG decodes to its
pixels."""

from __future__ import annotations

import ctypes
import io
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw
from tests.frames import bgrx_frame, desktop_like, forget_frames, libjpeg_restart_encode

from deskrig import grabs, imaging, png, turbojpeg
from deskrig.grabs import BAND_ROWS, KEPT_BUFFERS, FrameHistory, Grab, KeptFrames


@pytest.fixture(autouse=True)
def fresh_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(png, "_band_caches", png._band_caches)
    monkeypatch.setattr(turbojpeg, "_band_caches", turbojpeg._band_caches)
    forget_frames()


class Screen:
    """Rows at a fixed address that change in place, as a shared-memory segment does."""

    def __init__(self, image: Image.Image) -> None:
        self.image = image
        self.rows = bytearray(bgrx_frame(image).bgrx or b"")
        self.address = ctypes.addressof((ctypes.c_char * len(self.rows)).from_buffer(self.rows))

    def paint(self, box: tuple[int, int, int, int], colour: tuple[int, int, int]) -> None:
        self.image = self.image.copy()
        ImageDraw.Draw(self.image).rectangle(box, fill=colour)
        self.rows[:] = bgrx_frame(self.image).bgrx or b""


def assert_encodes_exactly(frame: Grab, image: Image.Image, jpeg: bytes | None = None) -> None:
    """``jpeg``: the frame's JPEG at quality 80 already made."""
    jpeg = imaging.encode(frame, "jpeg", 80) if jpeg is None else jpeg
    assert jpeg == libjpeg_restart_encode(frame, 80)
    assert Image.open(io.BytesIO(imaging.encode(frame, "png"))).tobytes() == image.tobytes()


@pytest.mark.parametrize(
    ("box", "band"),
    [
        ((0, 0, 4, 0), 0),  # the first row only
        ((300, 30, 330, 40), 1),  # inside one band (rows 16-31 hold 30 and 31; 32-47 the rest)
        ((300, 16 * 7, 330, 16 * 7 + 15), 7),  # exactly one band
        ((0, 402, 639, 402), 25),  # the last row: the last band has 3 rows
    ],
)
def test_a_change_in_one_band_is_in_the_next_jpeg_and_png_and_only_that_band_is_encoded(
    box: tuple[int, int, int, int],
    band: int,
    compressed_rows: list[int],
) -> None:
    screen = Screen(desktop_like(640, 403))
    kept = KeptFrames(640, 403)
    first = kept.take(screen.address)
    assert_encodes_exactly(first, screen.image)
    del first
    screen.paint(box, (200, 30, 30))
    compressed_rows.clear()
    frame = kept.take(screen.address)
    assert frame.bgrx == screen.rows
    assert frame.lineage is not None
    history, number = frame.lineage
    expected = {band} if box[1] // BAND_ROWS == box[3] // BAND_ROWS else {band, band + 1}
    assert history.changed_between(number - 1, number) == expected
    jpeg = imaging.encode(frame, "jpeg", 80)
    assert compressed_rows == [16 if band < 25 else 3 for band in sorted(expected)]
    assert_encodes_exactly(frame, screen.image, jpeg)


def test_a_frame_held_by_a_caller_never_changes_under_it() -> None:
    screen = Screen(desktop_like(64, 48))
    kept = KeptFrames(64, 48)
    held: list[tuple[Grab, bytes, Image.Image]] = []
    for step in range(2 * KEPT_BUFFERS + 2):
        frame = kept.take(screen.address)
        held.append((frame, bytes(screen.rows), screen.image))
        screen.paint((0, 4 * step, 63, 4 * step + 20), (step * 30, 0, 0))
    for frame, rows, image in held:
        assert frame.bgrx == rows
        assert_encodes_exactly(frame, image)


def test_frames_let_go_are_written_again_not_allocated() -> None:
    screen = Screen(desktop_like(64, 48))
    kept = KeptFrames(64, 48)
    buffers = set()
    for step in range(8):
        screen.paint((0, 0, 63, step), (step * 30, 0, 0))
        frame = kept.take(screen.address)
        buffers.add(id(frame.bgrx))
        assert frame.bgrx == screen.rows
        del frame
    assert len(buffers) == 1


def test_a_frame_older_than_the_history_is_encoded_whole(compressed_rows: list[int]) -> None:
    screen = Screen(desktop_like(64, 48))
    kept = KeptFrames(64, 48)
    kept.history = FrameHistory(BAND_ROWS, length=2)
    first = kept.take(screen.address)
    imaging.encode(first, "jpeg", 80)
    for step in range(3):
        screen.paint((0, 0, 3, 0), (step * 60, 0, 0))
        kept.take(screen.address)
    screen.paint((0, 40, 3, 40), (0, 200, 0))  # band 2; the JPEG cache's last frame is forgotten
    compressed_rows.clear()
    frame = kept.take(screen.address)
    jpeg = imaging.encode(frame, "jpeg", 80)
    assert compressed_rows == [16, 16, 16]
    assert_encodes_exactly(frame, screen.image, jpeg)


damage = st.tuples(
    st.integers(0, 69), st.integers(0, 69), st.integers(0, 40), st.integers(0, 40), st.integers(0, 255)
)
steps = st.lists(
    st.tuples(
        st.lists(damage, max_size=3),
        st.booleans(),  # the frame is held to the end
        st.booleans(),  # it is blacked out (a frame without history) before encoding
        st.sampled_from([80, 80, 35]),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.tuples(st.integers(1, 70), st.integers(1, 70)), frames=steps, seed=st.integers(0, 1000))
def test_any_sequence_of_damage_holders_and_blackouts_gives_exact_frames_and_encodings(
    size: tuple[int, int],
    frames: list[tuple[list[tuple[int, int, int, int, int]], bool, bool, int]],
    seed: int,
) -> None:
    forget_frames()
    screen = Screen(Image.frombytes("RGB", size, random.Random(seed).randbytes(size[0] * size[1] * 3)))
    kept = KeptFrames(*size)
    held: list[tuple[Grab, bytes]] = []
    for rects, hold, black, quality in frames:
        for x, y, w, h, shade in rects:
            screen.paint((x, y, x + w, y + h), (shade, 255 - shade, shade // 2))
        frame = kept.take(screen.address)
        assert frame.bgrx == screen.rows
        image = screen.image
        if black:
            frame = imaging.black_out(frame, [imaging.Bounds(x=0, y=0, width=1, height=1)], (0, 0))
            image = image.copy()
            image.putpixel((0, 0), (0, 0, 0))
        assert imaging.encode(frame, "jpeg", quality) == libjpeg_restart_encode(frame, quality)
        assert Image.open(io.BytesIO(imaging.encode(frame, "png"))).tobytes() == image.tobytes()
        if hold:
            held.append((frame, bytes(frame.bgrx or b"")))
    for frame, rows in held:
        assert frame.bgrx == rows


def grab_suspect(kept: KeptFrames, screen: Screen, left: int = 0, top: int = 0) -> Grab:
    """As the X11 grabber does with damage: only the rows of ``kept``'s suspect bands are grabbed
    into a segment laid out as the region, whose other rows hold junk (left from other grabs)."""
    stride = kept.width * 4
    segment = bytearray(random.Random(len(screen.rows)).randbytes(kept.height * stride))
    for first, rows in kept.suspect_rows():
        for row in range(first, first + rows):
            start = ((top + row) * screen.image.width + left) * 4
            segment[row * stride : (row + 1) * stride] = screen.rows[start : start + stride]
    address = ctypes.addressof((ctypes.c_char * len(segment)).from_buffer(segment))
    return kept.take(address, suspect_only=True)


def region_rows(screen: Screen, left: int, top: int, width: int, height: int) -> bytes:
    stride = screen.image.width * 4
    return b"".join(
        screen.rows[row * stride + left * 4 : row * stride + (left + width) * 4]
        for row in range(top, top + height)
    )


def test_a_band_drawn_on_is_grabbed_and_compared_next_and_nothing_else_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    screen = Screen(desktop_like(64, 48))
    kept = KeptFrames(64, 48)
    assert kept.suspect_rows() == [(0, 48)]  # nothing kept: every row
    grab_suspect(kept, screen)
    assert kept.suspect_rows() == []
    screen.paint((10, 20, 19, 24), (250, 0, 0))
    kept.drawn([(10, 20, 10, 5)])  # band 1
    assert kept.suspect_rows() == [(16, 16)]
    compared: list[int] = []
    memcmp = grabs._memcmp()

    def counting(first: int, second: int, length: int) -> int:
        compared.append(length)
        return memcmp(first, second, length)

    monkeypatch.setattr(grabs, "_memcmp", lambda: counting)
    frame = grab_suspect(kept, screen)
    assert frame.bgrx == screen.rows
    assert compared == [16 * 64 * 4]
    assert frame.lineage is not None
    history, number = frame.lineage
    assert history.changed_between(number - 1, number) == {1}


def test_with_nothing_drawn_nothing_is_grabbed_and_the_frame_is_a_new_one_of_the_same_rows() -> None:
    screen = Screen(desktop_like(64, 48))
    kept = KeptFrames(64, 48)
    first = grab_suspect(kept, screen)
    kept.drawn([])
    assert kept.suspect_rows() == []
    second = grab_suspect(kept, screen)
    assert second.bgrx == screen.rows
    assert first.lineage is not None and second.lineage is not None
    assert second.lineage[1] == first.lineage[1] + 1
    assert second.lineage[0].changed_between(first.lineage[1], second.lineage[1]) == frozenset()


@pytest.mark.parametrize(
    ("height", "rectangles", "runs"),
    [
        (48, [(0, 0, 64, 1), (0, 20, 1, 1)], [(0, 32)]),  # adjacent bands: one run
        (48, [(0, 0, 64, 1), (0, 40, 1, 1)], [(0, 16), (32, 16)]),
        (43, [(0, 40, 64, 9)], [(32, 11)]),  # the last band is short
        (43, [(0, 0, 64, 43)], [(0, 43)]),
    ],
)
def test_suspect_bands_are_grabbed_as_runs_of_rows(
    height: int, rectangles: list[tuple[int, int, int, int]], runs: list[tuple[int, int]]
) -> None:
    kept = KeptFrames(64, height)
    grab_suspect(kept, Screen(desktop_like(64, height)))
    kept.drawn(rectangles)
    assert kept.suspect_rows() == runs


def test_damage_read_for_one_region_counts_for_the_others() -> None:
    screen = Screen(desktop_like(64, 48))
    whole, part = KeptFrames(64, 48), KeptFrames(64, 16, origin=(0, 32))
    grab_suspect(whole, screen)
    grab_suspect(part, screen, top=32)
    screen.paint((0, 40, 5, 41), (0, 250, 0))
    for frames in (whole, part):  # read when the whole screen was grabbed
        frames.drawn([(0, 40, 6, 2)])
    grab_suspect(whole, screen)
    whole.drawn([])  # read when the part is grabbed: nothing drawn since
    frame = grab_suspect(part, screen, top=32)
    assert frame.bgrx == screen.rows[32 * 64 * 4 :]


@pytest.mark.parametrize(
    ("rectangle", "bands"),
    [
        ((0, 0, 64, 1), [0]),
        ((0, 15, 1, 2), [0, 1]),
        ((0, -5, 3, 6), [0]),  # above the region, its last row in it
        ((0, 47, 64, 100), [2]),
        ((64, 0, 5, 48), []),  # right of the region
        ((-5, 0, 5, 48), []),  # left of it, touching
        ((0, 48, 64, 1), []),  # below it
    ],
)
def test_rectangles_drawn_on_map_to_the_bands_of_the_region(
    rectangle: tuple[int, int, int, int], bands: list[int]
) -> None:
    kept = KeptFrames(64, 48)
    grab_suspect(kept, Screen(desktop_like(64, 48)))
    kept.drawn([rectangle])
    assert kept.suspect() == bands


painting = st.tuples(st.integers(-5, 69), st.integers(-5, 69), st.integers(1, 30), st.integers(1, 30))
region = st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(1, 30), st.integers(1, 30))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    regions=st.lists(region, min_size=1, max_size=3),
    events=st.lists(
        st.tuples(st.integers(0, 2), st.lists(painting, max_size=3), st.booleans()), min_size=1, max_size=10
    ),
    seed=st.integers(0, 1000),
)
def test_with_damage_any_grabs_of_any_regions_are_the_screen_as_it_is(
    regions: list[tuple[int, int, int, int]],
    events: list[tuple[int, list[tuple[int, int, int, int]], bool]],
    seed: int,
) -> None:
    """Each event: paints, then a grab of one of the regions: the damage read (counting for every
    region), then only the suspect rows grabbed; the frame may be held to the end."""
    rng = random.Random(seed)
    screen = Screen(Image.frombytes("RGB", (72, 72), rng.randbytes(72 * 72 * 3)))
    kept = [KeptFrames(w, h, origin=(x, y)) for x, y, w, h in regions]
    held: list[tuple[Grab, bytes]] = []
    for which, paints, hold in events:
        x, y, w, h = regions[which % len(regions)]
        for px, py, pw, ph in paints:
            screen.paint((px, py, px + pw - 1, py + ph - 1), (rng.randrange(256), rng.randrange(256), 7))
        for frames in kept:
            frames.drawn(paints)
        frame = grab_suspect(kept[which % len(regions)], screen, x, y)
        assert frame.bgrx == region_rows(screen, x, y, w, h)
        if hold:
            held.append((frame, bytes(frame.bgrx or b"")))
    for frame, rows in held:
        assert frame.bgrx == rows
