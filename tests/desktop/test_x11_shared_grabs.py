"""X11 grabs into the grabber's own shared-memory segment (deskrig.desktop.x11_capture), on a real
Xvfb of their own with nothing else drawing: a change in one band, the last partial band of a
region or the first row shows in the next JPEG and PNG exactly as XGetImage sees the screen, and a
frame a caller holds never changes while other grabs, and other threads, go on. With another
client drawing all the time, every frame is the segment as grabbed, though only the bands the
DAMAGE regions name are compared."""

from __future__ import annotations

import ctypes
import io
import json
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from tests.frames import ENVIRONMENT_LOCK, libjpeg_restart_encode
from Xlib.display import Display
from Xlib.xobject.drawable import Window

from deskrig import imaging
from deskrig.desktop.x11 import X11Backend
from deskrig.desktop.x11_capture import xlib_get_image
from deskrig.grabs import Grab
from deskrig.model import Bounds

from .conftest import SCREEN, start_xvfb, stop_process

#: 795 rows: 49 bands of 16 and a last one of 11.
REGION = Bounds(x=0, y=0, width=SCREEN[0], height=795)


class Painter:
    """Override-redirect windows of one colour, drawn by a client of the test's own."""

    def __init__(self, display: str) -> None:
        self.xlib = Display(display)
        self.screen = self.xlib.screen()

    def window(self, x: int, y: int, width: int, height: int, pixel: int) -> Window:
        root = self.screen.root
        window = root.create_window(
            x, y, width, height, 0, self.screen.root_depth, background_pixel=pixel, override_redirect=True
        )
        window.map()
        self.xlib.sync()
        return window

    def recolour(self, window: Window, pixel: int) -> None:
        window.change_attributes(background_pixel=pixel)
        window.clear_area()
        self.xlib.sync()


@pytest.fixture
def bare_x(tmp_path: Path) -> Iterator[tuple[X11Backend, Painter]]:
    xvfb, display = start_xvfb(tmp_path)
    backend = X11Backend(display)
    painter = Painter(display)
    try:
        yield backend, painter
    finally:
        painter.xlib.close()
        backend.close()
        stop_process(xvfb)


def as_seen(backend: X11Backend, region: Bounds) -> Grab:
    return xlib_get_image(backend._root, region.x, region.y, region.width, region.height)


def rgb(frame: Grab) -> bytes:
    return frame.image().tobytes()


def assert_shows(frame: Grab, seen: Grab) -> None:
    """``frame`` is the screen as XGetImage saw it, and so are its PNG and JPEG."""
    assert rgb(frame) == rgb(seen)
    assert Image.open(io.BytesIO(imaging.encode(frame, "png"))).tobytes() == rgb(seen)
    assert imaging.encode(frame, "jpeg", 80) == libjpeg_restart_encode(seen, 80)


@pytest.mark.parametrize(
    ("top", "height"),
    [(0, 1), (16 * 20, 16), (16 * 20 + 5, 3), (16 * 49, 11), (794, 1)],
    ids=["first row", "one band", "inside a band", "last partial band", "last row"],
)
def test_a_change_in_one_band_shows_in_the_next_jpeg_and_png(
    bare_x: tuple[X11Backend, Painter], top: int, height: int
) -> None:
    backend, painter = bare_x
    window = painter.window(100, top, 200, height, 0x336699)
    for _ in range(2):  # the first grab of the region, then one that compares with it
        assert_shows(backend.grab(REGION), as_seen(backend, REGION))
    painter.recolour(window, 0xCC3311)
    frame = backend.grab(REGION)
    assert frame.image().getpixel((150, top)) == (0xCC, 0x33, 0x11)
    assert_shows(frame, as_seen(backend, REGION))


def test_a_held_frame_never_changes_under_its_holder(bare_x: tuple[X11Backend, Painter]) -> None:
    backend, painter = bare_x
    window = painter.window(0, 0, 64, 64, 0x000000)
    held: list[tuple[Grab, bytes]] = []
    for step in range(6):
        frame = backend.grab(REGION)
        held.append((frame, bytes(frame.bgrx or b"")))
        assert frame.image().getpixel((10, 10)) == (0, 0, step * 40)
        painter.recolour(window, (step + 1) * 40)
    for frame, rows in held:
        assert frame.bgrx == rows


def test_threads_grabbing_and_encoding_while_the_screen_changes_each_get_their_own_frame(
    bare_x: tuple[X11Backend, Painter],
) -> None:
    backend, painter = bare_x
    window = painter.window(0, 300, 1280, 40, 0x000000)
    failures: list[str] = []
    done = threading.Event()

    def capture() -> None:
        held = []
        while not done.is_set():
            frame = backend.grab(REGION)
            rows = bytes(frame.bgrx or b"")
            with ENVIRONMENT_LOCK:  # the reference's TJ_RESTART must not reach the other thread's encode
                if imaging.encode(frame, "jpeg", 80) != libjpeg_restart_encode(frame, 80):
                    failures.append("a JPEG is not its frame's")
            if Image.open(io.BytesIO(imaging.encode(frame, "png"))).tobytes() != rgb(frame):
                failures.append("a PNG is not its frame's")
            held = [*held[-3:], (frame, rows)]
            failures.extend("a held frame changed" for frame, rows in held if frame.bgrx != rows)

    workers = [threading.Thread(target=capture) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        for step in range(30):
            painter.recolour(window, step * 0x080402)
    finally:
        done.set()
        for worker in workers:
            worker.join()
    assert failures == []


#: Another client recolouring stripes across the screen as fast as the server takes it, in bursts
#: of one request each, so drawing lands between a grab and the damage read after it.
BUSY_PAINTER = """
import itertools, sys
from Xlib.display import Display
display = Display(sys.argv[1])
screen = display.screen()
stripes = [
    screen.root.create_window(0, 37 * n, 1280, 5, 0, screen.root_depth, override_redirect=True)
    for n in range(21)
]
for stripe in stripes:
    stripe.map()
display.sync()
print("painting", flush=True)
for step in itertools.count():
    stripe = stripes[step % len(stripes)]
    stripe.change_attributes(background_pixel=(step * 0x050301) & 0xFFFFFF)
    stripe.clear_area()
    display.flush()
    if step % 64 == 0:
        display.sync()
"""


def test_with_another_client_drawing_all_the_time_every_frame_is_the_segment_as_grabbed(
    bare_x: tuple[X11Backend, Painter],
) -> None:
    backend, painter = bare_x
    screen = Bounds(x=0, y=0, width=SCREEN[0], height=SCREEN[1])
    display = painter.xlib.get_display_name()
    busy = subprocess.Popen([sys.executable, "-c", BUSY_PAINTER, display], stdout=subprocess.PIPE)
    try:
        assert busy.stdout is not None and busy.stdout.readline() == b"painting\n"
        segment = backend._grabber._segment
        assert segment is not None, "the grabber has no shared-memory segment of its own"
        stale = 0
        frames = set()
        for _ in range(200):
            frame = backend.grab(screen)
            # The segment holds this grab until the next one: compared in full here.
            stale += frame.bgrx != ctypes.string_at(segment.address, len(frame.bgrx or b""))
            frames.add(zlib.crc32(frame.bgrx or b""))
    finally:
        stop_process(busy)
    assert stale == 0
    assert len(frames) > 10  # the screen changed under the grabs


#: Runs in a child process (python-xlib's event-code table is shared by every connection of a
#: process, see test_x11.FALLBACK_PROBE): grabs on a server without DAMAGE, before and after a
#: window is recoloured, and what the backend noted.
NO_DAMAGE_PROBE = """
import json, sys
from Xlib.display import Display
from deskrig.desktop.x11 import X11Backend
from deskrig.model import Bounds

backend = X11Backend(sys.argv[1])
xlib = Display(sys.argv[1])
screen = xlib.screen()
window = screen.root.create_window(
    0, 100, 64, 20, 0, screen.root_depth, background_pixel=0x0000FF, override_redirect=True
)
window.map()
xlib.sync()
region = Bounds(x=0, y=0, width=1280, height=800)
pixels = [backend.grab(region).image().getpixel((10, 110))]
window.change_attributes(background_pixel=0xFF0000)
window.clear_area()
xlib.sync()
pixels.append(backend.grab(region).image().getpixel((10, 110)))
print(json.dumps({"pixels": pixels, "diagnostics": [d.message for d in backend.diagnostics]}))
backend.close()
"""


def test_without_damage_every_band_is_compared_and_said_so(tmp_path: Path) -> None:
    xvfb, display = start_xvfb(tmp_path, "-extension", "DAMAGE")
    try:
        probe = subprocess.run(
            [sys.executable, "-c", NO_DAMAGE_PROBE, display], capture_output=True, text=True, timeout=30
        )
    finally:
        stop_process(xvfb)
    assert probe.returncode == 0, probe.stderr
    result = json.loads(probe.stdout)
    assert result["pixels"] == [[0, 0, 255], [255, 0, 0]]
    assert any("every band of a grab is compared" in message for message in result["diagnostics"])
