"""X11 grabs into the grabber's own shared-memory segment (deskrig.desktop.x11_capture), on a real
Xvfb of their own with nothing else drawing: a change in one band, the last partial band of a
region or the first row shows in the next JPEG and PNG exactly as XGetImage sees the screen, only
that band's rows are grabbed (none of a still screen), and a frame a caller holds never changes
while other grabs, and other threads, go on. The damage read and the grab of the rows it names
happen with the server grabbed, which is always released. With another client drawing all the
time, every frame is one moment of the screen, and once it stops each region's next frame is the
screen as XGetImage sees it."""

from __future__ import annotations

import io
import json
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from tests.frames import ENVIRONMENT_LOCK, libjpeg_restart_encode
from tests.polling import poll
from Xlib.display import Display
from Xlib.xobject.drawable import Window

from deskrig import imaging
from deskrig.capture import CaptureOptions, CapturePipeline, CaptureTarget
from deskrig.config import Settings
from deskrig.desktop.base import Desktop
from deskrig.desktop.x11 import X11Backend
from deskrig.desktop.x11_capture import (
    GET_INPUT_FOCUS,
    GRAB_SERVER,
    SHM_GET_IMAGE,
    UNGRAB_SERVER,
    X_REPLY,
    DamageRegions,
    XUnits,
    round_trip,
    xlib_get_image,
)
from deskrig.grabs import Grab, KeptFrames
from deskrig.model import Bounds
from deskrig.observation import Observer
from deskrig.security import SecurityContext, WindowBlocklist

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


class SentRequests:
    """The requests the grabber sends on its DAMAGE connection, one by one, from now on."""

    def __init__(self, backend: X11Backend, monkeypatch: pytest.MonkeyPatch) -> None:
        damage = backend._grabber._damage
        assert damage is not None, "the grabber reads no DAMAGE regions"
        self.shm_major = backend._display.query_extension("MIT-SHM").major_opcode
        self.requests: list[bytes] = []
        send = damage._wire.send

        def recording(data: bytes) -> None:
            rest = data
            while rest:
                length = 4 * struct.unpack_from("=H", rest, 2)[0]
                self.requests.append(rest[:length])
                rest = rest[length:]
            send(data)

        monkeypatch.setattr(damage._wire, "send", recording)

    def take(self) -> list[bytes]:
        taken, self.requests = self.requests, []
        return taken

    def rows_grabbed(self, requests: list[bytes]) -> list[tuple[int, int]]:
        """Each ShmGetImage's ``(y, height)`` (of :data:`REGION`), checking it lands at the rows' place
        in the segment."""
        grabbed = []
        for request in requests:
            if request[:2] == bytes((self.shm_major, SHM_GET_IMAGE)):
                x, y, width, height = struct.unpack_from("=hhHH", request, 8)
                assert (x, width) == (REGION.x, REGION.width)  # full-width rows of the region
                assert struct.unpack_from("=I", request, 28)[0] == (y - REGION.y) * width * 4
                grabbed.append((y, height))
        return grabbed


def assert_server_grabbed_around(requests: list[bytes]) -> None:
    """The first request of a screen grab grabs the server, the last releases it, and only then."""
    assert requests[0] == GRAB_SERVER
    assert requests[-1] == UNGRAB_SERVER
    assert GRAB_SERVER not in requests[1:] and UNGRAB_SERVER not in requests[:-1]


def assert_server_answers(display: str) -> None:
    """Another client's request is answered: nobody holds the server (a python-xlib sync would
    wait forever; this fails after x11_capture.ROUND_TRIP_TIMEOUT_S)."""
    xlib = Display(display)
    try:
        wire = XUnits(socket.socket(fileno=os.dup(xlib.fileno())), xlib.display.data_recv or b"")
        try:
            round_trip(
                wire, GET_INPUT_FOCUS, lambda: next((u for u in wire.receive() if u[0] == X_REPLY), None)
            )
        finally:
            wire.close()
    finally:
        xlib.close()


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
    ("top", "height", "band"),
    [
        (0, 1, (0, 16)),
        (16 * 20, 16, (320, 16)),
        (16 * 20 + 5, 3, (320, 16)),
        (16 * 49, 11, (784, 11)),
        (794, 1, (784, 11)),
    ],
    ids=["first row", "one band", "inside a band", "last partial band", "last row"],
)
def test_a_change_in_one_band_shows_in_the_next_jpeg_and_png_and_only_that_band_is_grabbed(
    bare_x: tuple[X11Backend, Painter],
    top: int,
    height: int,
    band: tuple[int, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend, painter = bare_x
    window = painter.window(100, top, 200, height, 0x336699)
    sent = SentRequests(backend, monkeypatch)
    grabbed = []
    for _ in range(2):  # the first grab of the region: every row; then nothing drawn, no row
        assert_shows(backend.grab(REGION), as_seen(backend, REGION))
        requests = sent.take()
        assert_server_grabbed_around(requests)
        grabbed.append(sent.rows_grabbed(requests))
    assert grabbed == [[(0, REGION.height)], []]
    painter.recolour(window, 0xCC3311)
    frame = backend.grab(REGION)
    assert sent.rows_grabbed(sent.take()) == [band]
    assert frame.image().getpixel((150, top)) == (0xCC, 0x33, 0x11)
    assert_shows(frame, as_seen(backend, REGION))


def test_bands_drawn_on_apart_are_grabbed_as_runs_each(
    bare_x: tuple[X11Backend, Painter], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, painter = bare_x
    windows = [painter.window(0, top, 50, 20, 0x000000) for top in (40, 200)]  # bands 2-3, 12-13
    backend.grab(REGION)
    sent = SentRequests(backend, monkeypatch)
    for window in windows:
        painter.recolour(window, 0x00FF00)
    frame = backend.grab(REGION)
    assert sent.rows_grabbed(sent.take()) == [(32, 32), (192, 32)]
    assert_shows(frame, as_seen(backend, REGION))


@pytest.mark.parametrize(
    ("owner", "step"),
    [(KeptFrames, "suspect_rows"), (DamageRegions, "_shm_get_image")],
    ids=["naming the rows", "writing their grab"],
)
def test_a_failure_with_the_server_grabbed_still_releases_it(
    bare_x: tuple[X11Backend, Painter], monkeypatch: pytest.MonkeyPatch, owner: type, step: str
) -> None:
    backend, painter = bare_x
    window = painter.window(0, 0, 64, 64, 0x000000)
    backend.grab(REGION)
    painter.recolour(window, 0xFFFFFF)  # a band to grab
    sent = SentRequests(backend, monkeypatch)

    def failing(*_: object) -> None:
        raise RuntimeError("failed with the server grabbed")

    monkeypatch.setattr(owner, step, failing)
    with pytest.raises(RuntimeError, match="server grabbed"):
        backend.grab(REGION)
    assert_server_grabbed_around(sent.take())
    assert_server_answers(painter.xlib.get_display_name())


def test_a_grab_the_server_refuses_falls_back_to_whole_grabs_and_says_so(
    bare_x: tuple[X11Backend, Painter], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, painter = bare_x
    window = painter.window(100, 100, 200, 20, 0x336699)
    backend.grab(REGION)
    damage = backend._grabber._damage
    assert damage is not None
    shm_get_image = damage._shm_get_image

    def into_no_segment(region: Bounds, segment: int, first: int, rows: int) -> bytes:
        return shm_get_image(region, segment + 1, first, rows)  # BadShmSeg

    monkeypatch.setattr(damage, "_shm_get_image", into_no_segment)
    painter.recolour(window, 0xCC3311)
    frame = backend.grab(REGION)
    monkeypatch.undo()
    assert_shows(frame, as_seen(backend, REGION))
    assert backend._grabber._damage is None
    assert any("every band of a grab is compared" in note.message for note in backend.diagnostics)
    assert_server_answers(painter.xlib.get_display_name())


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


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
def test_screenshots_refresh_the_grabbers_one_buffer_in_place(
    bare_x: tuple[X11Backend, Painter], fmt: str
) -> None:
    """The unchanged-screen cache keeps a capture's encoding, not its frame: a frame it held would
    pin its buffer, and every grab would fill the other one, copying the bands changed in the last
    two grabs instead of this one's."""
    backend, painter = bare_x
    window = painter.window(0, 0, 64, 64, 0x000000)
    settings = Settings()
    pipeline = CapturePipeline(
        Observer(Desktop(backend), WindowBlocklist([])),
        settings,
        SecurityContext.from_policy(settings.security),
    )
    target = CaptureTarget(source="screen", region=backend.screen_bounds())
    for step in range(3):
        metadata, data = pipeline.run(target, CaptureOptions(format=fmt))
        assert not metadata.from_cache
        assert Image.open(io.BytesIO(data)).convert("RGB").getpixel((10, 10))[2] in range(
            step * 40 - 4, step * 40 + 5
        )
        painter.recolour(window, (step + 1) * 40)
    assert len(backend._grabber._kept.get(target.region)._kept) == 1


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


#: Another client drawing all the time: two stripes far apart (bands 6 and 43) always of one colour,
#: as it repaints them with the server grabbed. Before each repaint it draws on the first alone,
#: unchanged, and pauses, so a damage read may name the first's band and not the second's just
#: before both change. A grab of the rows such a read names, were the server not grabbed from the
#: read to the grab, would show the first's new colour beside the second's old one.
PAIR_PAINTER = """
import itertools, sys, time
from Xlib.display import Display
display = Display(sys.argv[1])
screen = display.screen()
pair = [
    screen.root.create_window(
        0, top, 1280, 5, 0, screen.root_depth, background_pixel=0, override_redirect=True
    )
    for top in (100, 700)
]
for stripe in pair:
    stripe.map()
display.sync()
print("painting", flush=True)
for step in itertools.count(1):
    pair[0].clear_area()
    display.sync()
    time.sleep(0.0002)  # a damage read may come now
    display.grab_server()
    for stripe in pair:
        stripe.change_attributes(background_pixel=(step * 0x050301) & 0xFFFFFF)
        stripe.clear_area()
    display.ungrab_server()
    display.sync()
"""
PAIR_ROWS = (102, 702)
#: Regions grabbed in turn: the screen, a window over the first stripe only, one over both.
TURNS = [
    Bounds(x=0, y=0, width=SCREEN[0], height=SCREEN[1]),
    Bounds(x=200, y=50, width=400, height=200),
    Bounds(x=600, y=0, width=300, height=SCREEN[1]),
]


def test_with_another_client_drawing_every_frame_is_one_moment_of_the_screen(
    bare_x: tuple[X11Backend, Painter],
) -> None:
    backend, painter = bare_x
    display = painter.xlib.get_display_name()
    busy = subprocess.Popen([sys.executable, "-c", PAIR_PAINTER, display], stdout=subprocess.PIPE)
    torn = 0
    colours: set[bytes] = set()
    grabs = 0

    def grab_in_turn() -> bool:
        """One grab of each region; True once 1500 frames showed the stripes in 10 colours or more."""
        nonlocal torn, grabs
        for region in TURNS:
            rows = backend.grab(region).bgrx or b""
            # Column 10's pixel in each stripe the region holds (no image made: grabs back to back).
            pair = {
                bytes(rows[offset : offset + 3])
                for row in PAIR_ROWS
                if region.y <= row < region.y + region.height
                for offset in [((row - region.y) * region.width + 10) * 4]
            }
            torn += len(pair) > 1
            colours.update(pair)
        grabs += len(TURNS)
        return grabs >= 1500 and len(colours) > 10

    try:
        assert busy.stdout is not None and busy.stdout.readline() == b"painting\n"
        poll("1500 grabs with the stripes changing under them", grab_in_turn, interval=0)
    finally:
        stop_process(busy)
    assert torn == 0
    # Nothing draws any more: each region's next frame is the screen as XGetImage sees it.
    poll(
        "the screen to stay still", lambda: rgb(as_seen(backend, TURNS[0])) == rgb(as_seen(backend, TURNS[0]))
    )
    for region in TURNS:
        assert_shows(backend.grab(region), as_seen(backend, region))


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


def test_closing_waits_for_a_grab_reading_the_segment(
    bare_x: tuple[X11Backend, Painter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grab copies from the segment by address: closing the grabber meanwhile must wait for it,
    not unmap the segment under the copy (which crashes the process)."""
    backend, painter = bare_x
    painter.window(0, 0, 64, 64, 0x0000FF)
    reading, go_on = threading.Event(), threading.Event()
    take = KeptFrames.take

    def held_in_the_copy(kept: KeptFrames, *args: Any, **kwargs: Any) -> Grab:
        reading.set()
        go_on.wait()
        return take(kept, *args, **kwargs)

    monkeypatch.setattr(KeptFrames, "take", held_in_the_copy)
    frames: list[Grab] = []
    grabbing = threading.Thread(target=lambda: frames.append(backend.grab(REGION)), daemon=True)
    grabbing.start()
    assert reading.wait(10), "the grab did not start"
    closing = threading.Thread(target=backend.close)
    closing.start()
    closing.join(0.5)
    # Failing, the segment is gone already: the grab is left where it is, not let into it.
    assert closing.is_alive(), "the grabber closed under a grab reading its segment"
    go_on.set()
    grabbing.join(10)
    closing.join(10)
    assert frames and frames[0].image().getpixel((10, 10)) == (0, 0, 255)
