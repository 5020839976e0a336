"""Video of a real sway screen: a still output is not grabbed (only its last frame repeated), and
an output that changes size mid-recording ends the video there, cleanly, saying so."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.desktop.sway_scene import run_commands
from tests.polling import poll
from tests.recording.conftest import ffprobe_duration, mp4_boxes
from tests.sway.swayproc import SwaySession

from deskrig.desktop import Desktop
from deskrig.observation import Observer
from deskrig.recording.video import HEARTBEAT_SECONDS, VideoRecorder
from deskrig.security import WindowBlocklist

#: Seconds without a grab that show the pump asleep on a still screen (it would grab 30 times a second).
ASLEEP_SECONDS = 3.0


@pytest.fixture
def recorder(sway_desktop: Desktop, tmp_path: Path) -> Iterator[VideoRecorder]:
    video = VideoRecorder(Observer(sway_desktop, WindowBlocklist([])), tmp_path / "recording.mp4")
    video.start()
    yield video
    video.stop()


def test_a_resized_output_ends_the_video_there_and_says_so(
    sway: SwaySession, sway_desktop: Desktop, recorder: VideoRecorder
) -> None:
    output = sway_desktop.displays()[0]
    size = (output.bounds.width, output.bounds.height)
    assert recorder.size == size
    try:
        run_commands(sway, f"output {output.name} mode 1000x700")
        poll("the video to end", lambda: not recorder.running)
    finally:
        run_commands(sway, f"output {output.name} mode {size[0]}x{size[1]}")
        poll("the output's size back", lambda: sway_desktop.displays()[0].bounds == output.bounds)
    assert recorder.last_error == (
        f"the screen changed size from {size[0]}x{size[1]} to 1000x700: the video ends there "
        "(start a new recording for video of the new size)"
    )
    assert recorder.stop() == 0
    assert mp4_boxes(recorder.path)[-1] == "mfra"  # finished cleanly, not cut off
    assert ffprobe_duration(recorder.path) > 0


def test_a_still_output_is_not_grabbed_and_its_frame_is_only_repeated(
    sway_desktop: Desktop, tmp_path: Path, grab_times: list[float]
) -> None:
    """sway's damage serial moves on every call: unchanged grabs put the pump to sleep on the
    damage fd, and the heartbeat resends the last frame without grabbing."""
    video = VideoRecorder(Observer(sway_desktop, WindowBlocklist([])), tmp_path / "recording.mp4")
    video.start()
    try:
        poll(
            f"no grab for {ASLEEP_SECONDS:g} s",
            lambda: time.monotonic() - grab_times[-1] > ASLEEP_SECONDS,
            timeout=30,
        )
        sent = video.frames_written
        poll("a heartbeat without a grab", lambda: video.frames_written > sent, timeout=5 * HEARTBEAT_SECONDS)
        assert time.monotonic() - grab_times[-1] > ASLEEP_SECONDS
    finally:
        assert video.stop() == 0
