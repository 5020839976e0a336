"""The pointer in the video: drawn by the recorder where the backend's captures leave it out (the
arrow itself, the scripted fake's recording), shown at each place it moved to on the real
desktops (X11: drawn; sway: its screencopy's), never over a blocked window."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from PIL import Image, ImageChops, ImageStat
from tests.polling import poll
from tests.recording.conftest import FormRig, Session, decoded_frames, ffmpeg_writing, in_session
from tests.recording.helpers import dark, scripted_world, vault_blocked
from tests.server.rigproc import RigProcess, color_app, read_events

from deskrig.grabs import BGRX_PIXEL, Grab
from deskrig.model import Bounds
from deskrig.recording.pointer import SPRITE, with_pointer
from deskrig.recording.video import VideoRecorder

GRAY = (100, 110, 120)
#: Offsets from the arrow's tip of a pixel of its black outline and of its white inside.
OUTLINE, INSIDE = (0, 4), (3, 9)


def gray_frame(width: int, height: int) -> bytes:
    return bytes((GRAY[2], GRAY[1], GRAY[0], 0)) * (width * height)


def as_image(rows: bytes | bytearray, width: int, height: int) -> Image.Image:
    return Image.frombytes("RGB", (width, height), bytes(rows), "raw", "BGRX")


def bright(pixel: tuple[int, ...]) -> bool:
    return min(pixel[:3]) >= 180  # the arrow's white, through H.264's blur


def test_the_arrow_is_drawn_tip_at_the_pointer_in_screen_pixels_and_the_frame_is_not_touched() -> None:
    rows = gray_frame(40, 30)
    drawn = with_pointer(rows, (40, 30), origin=(10, 20), pointer=(15, 25))
    image = as_image(drawn, 40, 30)
    assert image.getpixel((5 + OUTLINE[0], 5 + OUTLINE[1])) == (0, 0, 0)
    assert image.getpixel((5 + INSIDE[0], 5 + INSIDE[1])) == (255, 255, 255)
    assert image.getpixel((4, 5)) == GRAY and image.getpixel((5 + SPRITE.width, 5)) == GRAY
    assert rows == gray_frame(40, 30)  # a new frame; the grab stays as captured


@pytest.mark.parametrize(
    ("pointer", "changed"),
    [((48, 48), (8, 8, 10, 10)), ((5, 5), (0, 0, 8, 16)), ((60, 10), None), ((-20, 10), None)],
    ids=["bottom-right corner", "above-left edge", "off right", "off left"],
)
def test_the_arrow_is_clipped_at_the_frame_edges(
    pointer: tuple[int, int], changed: tuple[int, int, int, int] | None
) -> None:
    """A 10x10 frame at (40, 40) and at (10, 10): only the arrow's part on it is drawn."""
    origin = (40, 40) if pointer[0] > 20 else (10, 10)
    rows = gray_frame(10, 10)
    drawn = with_pointer(rows, (10, 10), origin, pointer)
    if changed is None:
        assert drawn is rows
        return
    diff = ImageChops.difference(as_image(drawn, 10, 10), as_image(rows, 10, 10)).getbbox()
    assert diff is not None and changed[0] <= diff[0] and diff[2] <= changed[2] and diff[3] <= changed[3]
    assert len(drawn) == 10 * 10 * BGRX_PIXEL


def test_the_arrow_over_a_blocked_area_stays_black() -> None:
    """The left half of the arrow lies over a blocked window: black there, drawn beside it."""
    blocked = [Bounds(x=10, y=0, width=7, height=100)]  # screen x 10-16: frame columns 0-6
    redacted = Grab.from_bgrx(gray_frame(40, 30), 40, 30).blacked_out([(0, 0, 7, 30)]).bgrx
    assert redacted is not None
    drawn = as_image(with_pointer(redacted, (40, 30), (10, 0), (12, 2), blocked), 40, 30)
    assert all(drawn.getpixel((x, y)) == (0, 0, 0) for x in range(7) for y in range(30))
    assert drawn.getpixel((7, 2 + 10)) == (255, 255, 255)  # the inside, right of the blocked area


def test_the_scripted_video_shows_the_pointer_where_it_moved_but_never_over_a_blocked_window(
    tmp_path: Path,
) -> None:
    world = scripted_world()
    observer = vault_blocked(world)
    desktop = observer.desktop
    notes, background, in_vault = (170, 30), (200, 150), (40, 40)
    recorder = VideoRecorder(observer, tmp_path / "recording.mp4")
    frames_at: dict[tuple[int, int], int] = {}
    try:
        desktop.with_input(lambda device: device.move(*background))
        recorder.start()
        assert recorder.draws_pointer
        for at in (notes, in_vault, background):
            desktop.with_input(lambda device, at=at: device.move(*at))
            # A pointer move draws nothing on the screen: the pump sends a frame for it alone.
            poll(f"a frame with the pointer at {at}", lambda at=at: recorder.pointer_drawn_at == at)
            frames_at[at] = recorder.frames_written
        assert recorder.stop() == 0
    finally:
        recorder.stop()
        desktop.close()
    frames = decoded_frames(recorder.path)
    assert len(frames) == recorder.frames_written
    at_notes = frames[frames_at[notes] - 1]
    assert bright(at_notes.getpixel((notes[0] + INSIDE[0], notes[1] + INSIDE[1])))
    assert not bright(frames[0].getpixel((notes[0] + INSIDE[0], notes[1] + INSIDE[1])))
    last = frames[-1]
    assert bright(last.getpixel((background[0] + INSIDE[0], background[1] + INSIDE[1])))
    for frame in frames:  # the Vault stays black, the pointer over it too
        assert all(dark(frame.getpixel((x, y))) for x in range(12, 108, 4) for y in range(12, 108, 4))


def test_an_idle_screen_with_a_still_pointer_is_a_heartbeat_a_second(tmp_path: Path) -> None:
    world = scripted_world()
    observer = vault_blocked(world)
    recorder = VideoRecorder(observer, tmp_path / "recording.mp4")
    try:
        recorder.start()
        sent = recorder.frames_written
        poll("two heartbeats", lambda: recorder.frames_written >= sent + 2, timeout=10)
        assert recorder.frames_written <= sent + 3  # not a frame per pointer read
    finally:
        recorder.stop()
        observer.desktop.close()


def test_the_pointer_over_a_blocked_window_on_x11_is_black_in_the_video(tmp_path: Path) -> None:
    """The pointer rests, then moves, over a blocked window: black there in every frame."""
    log = tmp_path / "secret.log"
    rig = RigProcess(
        app=color_app("Secret Vault", "#ffffff", log, size="200x160", pos="300,200"),
        extra=["--blocked-window", "^Secret .*"],
    ).start(tmp_path)
    out = tmp_path / "home" / "deskrig" / "secret-pointer"
    try:
        secret = poll("the secret window", lambda: read_events(log, "ready"))[-1]
        places = [(secret["x"] + 40, secret["y"] + 30), (secret["x"] + 120, secret["y"] + 90)]

        async def record(s: Session) -> None:
            await s.ok("move_cursor", {"x": places[0][0], "y": places[0][1]})
            await s.ok("start_recording", {"output_dir": str(out), "record_video": True})
            await s.ok("move_cursor", {"x": places[1][0], "y": places[1][1]})
            await s.ok("stop_recording")  # whose last frame has the pointer there

        in_session(rig, record)
    finally:
        rig.stop()
    frames = decoded_frames(out / "recording.mp4")
    assert len(frames) >= 2
    for frame in frames:
        for x, y in places:
            box = frame.crop((x - 2, y - 2, x + SPRITE.width + 2, y + SPRITE.height + 2))
            assert max(channel_max for _, channel_max in box.getextrema()) <= 24, (
                x,
                y,
            )  # white app, black out


def decoded_so_far(path: Path, box: tuple[int, int, int, int]) -> list[Image.Image]:
    """The ``(left, top, width, height)`` box of every frame of a video still being written, as far
    as it decodes (its last fragment may be cut off)."""
    left, top, width, height = box
    raw = subprocess.run(
        [
            *("ffmpeg", "-v", "quiet", "-i", str(path), "-vf", f"crop={width}:{height}:{left}:{top}"),
            *("-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"),
        ],
        capture_output=True,
        timeout=60,
    ).stdout
    size = width * height * 3
    return [
        Image.frombytes("RGB", (width, height), raw[at : at + size])
        for at in range(0, len(raw) - size + 1, size)
    ]


def differs(frame: Image.Image, reference: Image.Image) -> bool:
    """Whether a pointer shows in ``frame`` that ``reference`` (the same place without it) lacks."""
    return max(ImageStat.Stat(ImageChops.difference(frame, reference)).mean) > 8


def pointer_box(at: tuple[int, int]) -> tuple[int, int, int, int]:
    """Where the pointer at ``at`` shows: an arrow down and right of its tip."""
    return at[0], at[1], 16, 24


def shown_so_far(video: Path, at: tuple[int, int]) -> bool:
    """Whether some frame written so far shows the pointer at ``at`` (the first frame does not)."""
    frames = decoded_so_far(video, pointer_box(at))
    return any(differs(frame, frames[0]) for frame in frames[1:])


def bottom_row(width: int, height: int) -> list[tuple[int, int]]:
    """Three places along the bottom of the screen: the desktop's background on X11, the empty
    bottom of the form that sway tiles over the whole screen; no widget there reacts to hover."""
    return [(x, height - 60) for x in (width // 4, width // 2, 3 * width // 4)]


@pytest.mark.parametrize("backend", ["x11", "sway"], indirect=True)
def test_the_video_shows_the_pointer_at_each_place_it_moved_to(recording_rig: FormRig) -> None:
    """Moved off a start place to two others: the video shows it at each (not at the first before
    it went there), and at the second, not the first, at the end."""
    out = recording_rig.allowed / "pointer"
    video = out / "recording.mp4"

    async def record(s: Session) -> list[tuple[int, int]]:
        size = await s.ok("get_screen_size")
        start, *moves = bottom_row(size["width"], size["height"])
        await s.ok("move_cursor", {"x": start[0], "y": start[1]})
        await s.ok("start_recording", {"output_dir": str(out), "record_video": True})
        for at in moves:
            await s.ok("move_cursor", {"x": at[0], "y": at[1]})
            # The frame showing it is in the file once the next (at most a heartbeat later) is.
            await anyio.to_thread.run_sync(
                lambda at=at: poll(
                    f"the pointer at {at} in the video", lambda: shown_so_far(video, at), timeout=30
                )
            )
        await s.ok("stop_recording")
        return moves

    first, second = in_session(recording_rig.rig, record)
    poll("ffmpeg to finish", lambda: not ffmpeg_writing(video), timeout=15)
    at_first, at_second = (decoded_so_far(video, pointer_box(at)) for at in (first, second))
    assert any(differs(frame, at_first[0]) for frame in at_first)
    assert not differs(at_first[-1], at_first[0])  # gone from there
    assert differs(at_second[-1], at_second[0])  # there at the stop
