"""Video edge cases: ffmpeg or the screen recorder missing, failing or killed, a desktop without
video, and a stdio client hanging up mid-recording."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from tests.polling import poll
from tests.recording.conftest import (
    FormRig,
    Session,
    feeding,
    ffmpeg_writing,
    ffprobe_duration,
    in_session,
    load_json,
    mp4_boxes,
    video_frames,
)
from tests.server.rigproc import DESKRIG, RigProcess, color_app, read_events

from deskrig.desktop.base import ScreenVideo
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.desktop.sway import wf_recorder_video
from deskrig.desktop.x11 import x11grab_video
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, DisplayInfo
from deskrig.recording.session import Recording
from deskrig.recording.video import FRAME_RATE, VideoRecorder, video_argv

GREEN = "#20c040"




def sway_output(name: str = "HEADLESS-1") -> DisplayInfo:
    return DisplayInfo(id=1, name=name, bounds=Bounds(x=0, y=0, width=65, height=48), primary=True)


def path_without(bin_dir: Path, missing: str = "ffmpeg") -> str:
    """A PATH with every program of this system but ``missing`` (symlinks in ``bin_dir``)."""
    bin_dir.mkdir()
    for source in (Path("/usr/local/bin"), Path("/usr/bin"), Path("/usr/sbin")):
        for program in source.iterdir():
            link = bin_dir / program.name
            if program.name != missing and not link.exists():
                link.symlink_to(program)
    return str(bin_dir)


def test_without_ffmpeg_turns_are_recorded_and_last_error_says_why(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    boot = tmp_path / "boot"
    rig = RigProcess(
        app=color_app("No Video", GREEN, log, pos="100,120"),
        extra=["--record", str(boot), "--record-video"],
        env={"PATH": path_without(tmp_path / "bin")},
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


@pytest.mark.parametrize(
    ("source", "failing", "diagnostic"),
    [
        (x11grab_video(":9999", 64, 48, FRAME_RATE), "ffmpeg", ":9999"),
        (wf_recorder_video("/nonexistent/wayland-9", sway_output()), "wf-recorder", "failed to create display"),
    ],
    ids=["x11", "sway"],
)
def test_video_failing_at_start_up_is_a_recording_error_with_its_diagnostic(
    tmp_path: Path, source: ScreenVideo, failing: str, diagnostic: str
) -> None:
    recorder = VideoRecorder(source, tmp_path / "recording.mp4")
    with pytest.raises(DeskrigError) as raised:
        recorder.start()
    assert raised.value.code == ErrorCode.RECORDING_ERROR
    assert recorder.last_error is not None and f"{failing} exited at start-up" in recorder.last_error
    details = raised.value.details or {}
    said = details["feeder_stderr" if source.feeder else "ffmpeg_stderr"]
    assert any(diagnostic in line for line in said), said
    assert not recorder.running and not ffmpeg_writing(recorder.path)  # nothing left behind
    assert recorder.stop() is not None  # already exited: stop only reaps


@pytest.mark.parametrize(
    ("source", "missing", "packages"),
    [
        (x11grab_video(":9999", 64, 48, FRAME_RATE), "ffmpeg", "apt-get install ffmpeg)"),
        (wf_recorder_video("wayland-9", sway_output()), "ffmpeg", "apt-get install ffmpeg wf-recorder)"),
        (wf_recorder_video("wayland-9", sway_output()), "wf-recorder", "apt-get install ffmpeg wf-recorder)"),
    ],
    ids=["x11-ffmpeg", "sway-ffmpeg", "sway-wf-recorder"],
)
def test_a_missing_program_is_named_with_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: ScreenVideo, missing: str, packages: str
) -> None:
    monkeypatch.setenv("PATH", path_without(tmp_path / "bin", missing))
    recorder = VideoRecorder(source, tmp_path / "recording.mp4")
    with pytest.raises(DeskrigError) as raised:
        recorder.start()
    assert raised.value.message == f"{missing} is not installed (no {missing!r} on PATH)"
    assert packages in (raised.value.remediation or "")
    assert recorder.pid is None and recorder.feeder_pid is None


def test_sway_video_is_wf_recorder_piping_raw_frames_into_the_same_ffmpeg(tmp_path: Path) -> None:
    source = wf_recorder_video("/run/sway/wayland-1", sway_output("HEADLESS-2"))
    assert source.feeder is not None and source.feeder.env == {"WAYLAND_DISPLAY": "/run/sway/wayland-1"}
    assert source.feeder.argv == (
        "wf-recorder", "-D", "-c", "rawvideo", "-m", "nut", "-o", "HEADLESS-2", "-f", "pipe:1",
    )  # fmt: skip
    path = tmp_path / "recording.mp4"
    x11 = video_argv("ffmpeg", x11grab_video(":7", 65, 48, FRAME_RATE), path)
    sway = video_argv("ffmpeg", source, path)
    assert sway[:5] == ["ffmpeg", "-f", "nut", "-i", "pipe:0"]
    assert sway[5:] == x11[x11.index(":7") + 1 :]  # the same encoder, size (64x48) and mp4 flags


def test_a_desktop_without_video_records_turns_and_says_why(tmp_path: Path) -> None:
    with ScriptedDesktop().open() as desktop:
        recording = Recording(tmp_path / "scripted", "session")
        recording.start(lambda: desktop.screen_video(FRAME_RATE))
        state = recording.stop()
    assert state.last_error == "the scripted desktop has no screen to record video from"
    assert state.video_path is None and not state.video_recording
    assert (tmp_path / "scripted").is_dir()


@pytest.mark.parametrize(
    ("backend", "killed"),
    [("x11", "ffmpeg"), ("sway", "ffmpeg"), ("sway", "wf-recorder")],
    indirect=["backend"],
)
def test_the_video_survives_sigkill_of_the_recorder(recording_rig: FormRig, killed: str) -> None:
    out = recording_rig.allowed / f"killed-{killed}"
    video = out / "recording.mp4"

    async def record(s: Session) -> tuple[dict[str, Any], dict[str, Any]]:
        await s.ok("start_recording", {"output_dir": str(out), "record_video": True})
        (ffmpeg,) = ffmpeg_writing(video)
        await anyio.sleep(1.5)  # some video to keep
        (pid,) = [ffmpeg] if killed == "ffmpeg" else feeding(ffmpeg)
        os.kill(pid, signal.SIGKILL)
        await anyio.sleep(0.1)
        state = await s.ok("get_recording_state")
        for _ in range(50):
            if state["last_error"]:
                break
            await anyio.sleep(0.1)
            state = await s.ok("get_recording_state")
        return state, await s.ok("stop_recording")

    state, stopped = in_session(recording_rig.rig, record)
    assert f"{killed} stopped unexpectedly" in state["last_error"], state
    assert not state["video_recording"] and state["recording"]  # turns go on
    assert stopped["last_video_path"] == str(video)
    poll("ffmpeg gone", lambda: not ffmpeg_writing(video), timeout=15)
    assert ffprobe_duration(video) > 1.0 and video_frames(video) > 20


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
