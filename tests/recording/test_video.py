"""Video edge cases: ffmpeg missing or failing, and a stdio client hanging up mid-recording."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from tests.polling import poll
from tests.recording.conftest import (
    Session,
    ffmpeg_writing,
    ffprobe_duration,
    in_session,
    load_json,
    mp4_boxes,
)
from tests.server.rigproc import DESKRIG, RigProcess, color_app, read_events

from deskrig.desktop.x11 import x11grab_video
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.recording.video import FRAME_RATE, VideoRecorder, video_argv

GREEN = "#20c040"


def path_without_ffmpeg(bin_dir: Path) -> str:
    """A PATH with every program of this system but ffmpeg (symlinks in ``bin_dir``)."""
    bin_dir.mkdir()
    for source in (Path("/usr/local/bin"), Path("/usr/bin"), Path("/usr/sbin")):
        for program in source.iterdir():
            link = bin_dir / program.name
            if program.name != "ffmpeg" and not link.exists():
                link.symlink_to(program)
    return str(bin_dir)


def test_without_ffmpeg_turns_are_recorded_and_last_error_says_why(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    boot = tmp_path / "boot"
    rig = RigProcess(
        app=color_app("No Video", GREEN, log, pos="100,120"),
        extra=["--record", str(boot), "--record-video"],
        env={"PATH": path_without_ffmpeg(tmp_path / "bin")},
    ).start(tmp_path)
    try:
        app = poll("app ready", lambda: read_events(log, "ready"))[-1]
        out = tmp_path / "home" / "deskrig" / "no-video"

        async def record(s: Session) -> tuple[dict[str, Any], ...]:
            started = await s.ok("start_recording", {"output_dir": str(out), "record_video": True})
            await s.ok("click", {"x": app["x"] + 20, "y": app["y"] + 20})
            return started, await s.ok("stop_recording"), await s.ok("get_recording_state")

        started, stopped, state = in_session(rig, record)
    finally:
        rig.stop()
    assert started["recording"] and not started["video_recording"]
    assert "ffmpeg is not installed" in started["last_error"]
    assert stopped["turns"] == 1 and stopped["last_error"] == started["last_error"]
    assert state["boot"]["last_error"] and "ffmpeg" in state["boot"]["last_error"]
    for folder in (out, boot):
        assert load_json(folder / "turn-00001" / "action.json")["tool"] == "click"
        assert (folder / "turn-00001" / "click.png").is_file()
        assert not (folder / "recording.mp4").exists()


def test_ffmpeg_failing_at_start_up_is_a_recording_error_with_its_diagnostic(tmp_path: Path) -> None:
    recorder = VideoRecorder(x11grab_video(":9999", 64, 48, FRAME_RATE), tmp_path / "recording.mp4")
    with pytest.raises(DeskrigError) as raised:
        recorder.start()
    assert raised.value.code == ErrorCode.RECORDING_ERROR
    assert recorder.last_error is not None and "exited at start-up" in recorder.last_error
    assert any(":9999" in line for line in raised.value.details["ffmpeg_stderr"])  # type: ignore[index]
    assert recorder.stop() is not None  # already exited: stop only reaps


def test_x11_video_is_ffmpeg_grabbing_the_display_into_a_fragmented_mp4(tmp_path: Path) -> None:
    path = tmp_path / "recording.mp4"
    argv = video_argv("ffmpeg", x11grab_video(":7", 1281, 801, FRAME_RATE), path)
    assert argv == [
        "ffmpeg", "-f", "x11grab", "-video_size", "1280x800", "-draw_mouse", "1", "-framerate", "30",
        "-i", ":7", "-f", "mp4", "-flush_packets", "1", "-frag_duration", "200000",
        "-movflags", "+frag_keyframe+empty_moov", "-pix_fmt", "yuv420p", "-preset", "ultrafast",
        "-r", "30", "-vcodec", "libx264", "-vf", "crop=1280:800:0:0", str(path), "-nostats",
    ]  # fmt: skip  (as before video came from the backend, plus a crop of a grab that is already even)


def test_stdio_hang_up_finalises_the_video(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    out = tmp_path / "deskrig" / "stdio"
    params = StdioServerParameters(
        command=DESKRIG[0],
        args=["rig", "run", "--stdio", "--", *color_app("Stdio Video", GREEN, log, pos="100,120")],
        env={**os.environ, "HOME": str(tmp_path)},
    )

    async def record() -> dict[str, Any]:
        async with Client(params) as client:
            started = await client.call_tool(
                "start_recording", {"output_dir": str(out), "record_video": True}
            )
            assert not started.is_error, started.structured_content
            app = poll("app ready", lambda: read_events(log, "ready"))[-1]
            for dx in range(3):
                moved = await client.call_tool("move_cursor", {"x": app["x"] + dx * 20, "y": app["y"] + 20})
                assert not moved.is_error, moved.structured_content
                await anyio.sleep(0.3)
            return started.structured_content or {}
        # Leaving the block closes the server's stdin: EOF.

    started = anyio.run(record)
    video = Path(started["video_path"])
    poll("ffmpeg to finish", lambda: not ffmpeg_writing(video), timeout=15)
    assert mp4_boxes(video)[-1] == "mfra"
    assert ffprobe_duration(video) > 0.5
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("turn-")) == [
        "turn-00001",
        "turn-00002",
        "turn-00003",
    ]
