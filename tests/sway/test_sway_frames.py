"""What a sway capture hands the encoders, and what a click sends: frames as sway's BGRX rows
(no RGB conversion before a PNG or JPEG), pixels identical to the RGB capture's whatever the
buffer's row padding and orientation, and one pointer motion for a click on a Wayland window."""

from __future__ import annotations

import io
import mmap
from collections.abc import Iterator

import pytest
from PIL import Image
from tests.desktop.conftest import FixtureApp
from tests.polling import poll
from tests.sway.conftest import COLOR, window_of

from deskrig import imaging
from deskrig.desktop import Desktop
from deskrig.desktop.sway_input import SwayInput
from deskrig.desktop.sway_wayland import ShmBuffer, _bgrx_frame, bgrx_part
from deskrig.model import Bounds

XRGB8888 = 1


def _inside(desktop: Desktop, app: FixtureApp) -> Bounds:
    window = window_of(desktop, app)
    return Bounds(x=window.bounds.x + 10, y=window.bounds.y + 10, width=60, height=40)


def test_a_screen_grab_is_sways_bgrx_frame_with_the_captures_pixels(
    sway_desktop: Desktop, color_app: FixtureApp
) -> None:
    region = _inside(sway_desktop, color_app)
    poll("the colour app drawn", lambda: sway_desktop.capture(region).getcolors() == [(60 * 40, COLOR)])
    frame = sway_desktop.grab(region)
    assert frame.bgrx is not None
    assert frame.image().tobytes() == sway_desktop.capture(region).tobytes()


def test_a_window_grab_is_bgrx_and_its_png_decodes_to_the_same_pixels(
    sway_desktop: Desktop, color_app: FixtureApp
) -> None:
    window = window_of(sway_desktop, color_app)
    frame = sway_desktop.grab_window(window.id).grab
    assert frame.bgrx is not None and frame.size == (window.bounds.width, window.bounds.height)
    decoded = Image.open(io.BytesIO(imaging.encode(frame, "png")))
    assert decoded.mode == "RGB" and decoded.tobytes() == frame.image().tobytes()
    assert decoded.tobytes() == sway_desktop.capture_window(window.id, include_frame=False).tobytes()


@pytest.mark.parametrize("part", [Bounds(x=0, y=0, width=7, height=5), Bounds(x=2, y=1, width=4, height=3)])
@pytest.mark.parametrize("inverted", [False, True])
@pytest.mark.parametrize("padding", [0, 12])
def test_a_part_of_a_padded_or_upside_down_buffer_is_its_pixels(
    inverted: bool, padding: int, part: Bounds
) -> None:
    """Every byte of the buffer differs, so a row out of place or a pixel shifted shows. A held
    frame's part is how a capture of a region reads sway's last drawn frame."""
    width, height = 7, 5
    stride = width * 4 + padding
    with mmap.mmap(-1, stride * height) as memory:
        memory.write(bytes(i % 251 for i in range(stride * height)))
        buffer = ShmBuffer((XRGB8888, width, height, stride), memory, pool=None, buffer=None)
        frame = bgrx_part(buffer, inverted, part)
        assert frame.bgrx is not None and frame.size == (part.width, part.height)
        for x, y in [(0, 0), (part.width - 1, part.height - 1), (1, part.height // 2)]:
            row = height - 1 - (part.y + y) if inverted else part.y + y
            start = row * stride + (part.x + x) * 4
            assert frame.image().getpixel((x, y)) == tuple(reversed(memory[start : start + 3]))
        if part.width == width:
            assert frame.bgrx == _bgrx_frame(buffer, inverted).bgrx


@pytest.fixture
def motions(sway_desktop: Desktop, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """The virtual pointer's motions, as (x, y) in the layout, while the test runs."""
    device = sway_desktop.with_input(lambda d: d)
    assert isinstance(device, SwayInput)
    pointer = device._pointer
    sent: list[tuple[int, int]] = []
    send = pointer.motion_absolute

    def recorded(time: int, x: int, y: int, x_extent: int, y_extent: int) -> None:
        sent.append((x, y))
        send(time, x, y, x_extent, y_extent)

    monkeypatch.setattr(pointer, "motion_absolute", recorded)
    yield sent


def test_a_click_on_a_wayland_window_moves_the_pointer_straight_there(
    sway_desktop: Desktop, color_app: FixtureApp, motions: list[tuple[int, int]]
) -> None:
    """No detour through the neighbouring pixel (that is for X windows under Xwayland): a cursor
    that moved is a new frame for sway to draw, which the screenshot after the click waits for."""
    region = _inside(sway_desktop, color_app)
    sway_desktop.with_input(lambda d: d.button(region.x, region.y))
    sway_desktop.with_input(lambda d: d.button(region.x, region.y))
    assert motions == [(region.x, region.y)] * 2
