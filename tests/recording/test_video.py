"""Video: frames from the observation path (the scripted fake here, real desktops in
tests/server/test_tools_http.py), the ffmpeg command line, ffmpeg missing, failing or killed, the
screen changing size, and a stdio client hanging up mid-recording."""

from __future__ import annotations

import contextlib
import os
import signal
import time
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
    decoded_frames,
    ffmpeg_writing,
    ffprobe_duration,
    in_session,
    load_json,
    mp4_boxes,
    video_frames,
    video_to_keep,
)
from tests.recording.helpers import dark, scripted_world, vault_blocked
from tests.server.rigproc import DESKRIG, RigProcess, color_app, read_events

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds
from deskrig.recording import video as video_module
from deskrig.recording.session import Recording
from deskrig.recording.video import HEARTBEAT_SECONDS, VideoRecorder, video_argv

GREEN = "#20c040"


def near(pixel: tuple[int, ...], rgb: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 16 for a, b in zip(pixel[:3], rgb, strict=True))


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


def test_scripted_video_blacks_out_the_blocked_window_and_sends_only_changes(tmp_path: Path) -> None:
    """The fake desktop records through the same observation path as the real ones."""
    world = scripted_world()
    observer = vault_blocked(world)
    recorder = VideoRecorder(observer, tmp_path / "recording.mp4")
    try:
        recorder.start()
        notes = world.windows()[0]
        poll("the first frame", lambda: recorder.frames_written >= 1)
        # Changes in quick succession, then a still screen: frames both close together and far apart.
        for shade in (90, 120, 150, 180, 200):
            sent = recorder.frames_written
            world.paint(notes.id, (30, 60, shade))
            poll("the change", lambda sent=sent: recorder.frames_written > sent)
        assert recorder.first_frame_at is not None and recorder.size == (321, 241)
        idle_from, sent = time.monotonic(), recorder.frames_written
        poll("a heartbeat", lambda: recorder.frames_written > sent, timeout=HEARTBEAT_SECONDS * 5)
        # Idle: a heartbeat a second, not FRAME_RATE frames.
        assert recorder.frames_written - sent <= 1 + (time.monotonic() - idle_from) / HEARTBEAT_SECONDS
        assert recorder.stop() == 0 and recorder.last_error is None
    finally:
        recorder.stop()
        observer.desktop.close()
    assert ffprobe_duration(recorder.path) >= HEARTBEAT_SECONDS
    frames = decoded_frames(recorder.path)
    assert frames[0].size == (320, 240)
    assert len(frames) == recorder.frames_written
    for frame in frames:
        assert all(dark(frame.getpixel((x, y))) for x in (12, 60, 108) for y in (12, 60, 108))
    assert near(frames[0].getpixel((200, 60)), (30, 190, 60))
    assert near(frames[-1].getpixel((200, 60)), (30, 60, 200))
    assert mp4_boxes(recorder.path)[-1] == "mfra"  # closed cleanly


def test_a_screen_that_changes_size_ends_the_video_there_and_says_so(tmp_path: Path) -> None:
    world = scripted_world()
    observer = vault_blocked(world)
    recording = Recording(tmp_path / "resized", "session")
    try:
        recording.start(observer)
        video = recording.video
        assert video is not None and video.running
        world.set_displays([("screen", Bounds(x=0, y=0, width=400, height=300))])
        poll("the video to end", lambda: not video.running)
        state = recording.state()
        assert state.recording and not state.video_recording  # turns go on
        assert state.last_error == (
            "the screen changed size from 321x241 to 400x300: the video ends there "
            "(start a new recording for video of the new size)"
        )
    finally:
        recording.stop()
        observer.desktop.close()
    assert mp4_boxes(video.path)[-1] == "mfra"  # finished cleanly, not cut off
    assert {frame.size for frame in decoded_frames(video.path)} == {(320, 240)}


def test_a_slow_ffmpeg_start_is_an_error_only_until_the_file_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start that gave up waiting for ffmpeg's file says so, and stops saying so once ffmpeg
    has written it: the video records after all."""
    slow = tmp_path / "ffmpeg"
    slow.write_text('#!/bin/sh\nsleep 1\nexec ffmpeg "$@"\n')
    slow.chmod(0o755)
    monkeypatch.setattr(video_module, "START_TIMEOUT", 0.2)
    world = scripted_world()
    observer = vault_blocked(world)
    recorder = VideoRecorder(observer, tmp_path / "recording.mp4", binary=str(slow))
    try:
        recorder.start()
        assert recorder.last_error is not None and recorder.last_error.endswith("still waiting")
        poll("the error gone once the file is written", lambda: recorder.last_error is None, timeout=20)
        assert recorder.path.stat().st_size > 0 and recorder.first_frame_at is not None
        assert recorder.stop() == 0 and recorder.last_error is None
    finally:
        recorder.stop()
        observer.desktop.close()
    assert decoded_frames(recorder.path)


def test_ffmpeg_failing_at_start_up_is_a_recording_error_with_its_diagnostic(tmp_path: Path) -> None:
    failing = tmp_path / "ffmpeg"
    failing.write_text("#!/bin/sh\necho 'Unknown encoder libx264' >&2\nexit 1\n")
    failing.chmod(0o755)
    world = scripted_world()
    observer = vault_blocked(world)
    recorder = VideoRecorder(observer, tmp_path / "recording.mp4", binary=str(failing))
    try:
        with pytest.raises(DeskrigError) as raised:
            recorder.start()
    finally:
        observer.desktop.close()
    assert raised.value.code == ErrorCode.RECORDING_ERROR
    assert recorder.last_error == "ffmpeg exited at start-up with status 1: Unknown encoder libx264"
    assert (raised.value.details or {})["ffmpeg_stderr"] == ["Unknown encoder libx264"]
    assert "apt-get install ffmpeg" in (raised.value.remediation or "")
    assert not recorder.running and recorder.stop() == 1  # already exited: stop only reaps


@pytest.mark.parametrize("backend", ["x11", "sway"], indirect=True)
def test_the_video_survives_sigkill_of_ffmpeg(recording_rig: FormRig) -> None:
    out = recording_rig.allowed / "killed-ffmpeg"
    video = out / "recording.mp4"

    async def record(s: Session) -> tuple[dict[str, Any], dict[str, Any]]:
        await s.ok("start_recording", {"output_dir": str(out), "record_video": True})
        (ffmpeg,) = ffmpeg_writing(video)
        # Some video to keep (an idle screen sends a heartbeat frame a second).
        await anyio.to_thread.run_sync(
            lambda: poll("some video to keep written", lambda: video_to_keep(video))
        )
        os.kill(ffmpeg, signal.SIGKILL)
        await anyio.sleep(0.1)
        state = await s.ok("get_recording_state")
        for _ in range(50):
            if state["last_error"]:
                break
            await anyio.sleep(0.1)
            state = await s.ok("get_recording_state")
        return state, await s.ok("stop_recording")

    state, stopped = in_session(recording_rig.rig, record)
    assert "ffmpeg stopped unexpectedly" in state["last_error"], state
    assert not state["video_recording"] and state["recording"]  # turns go on
    assert stopped["last_video_path"] == str(video)
    poll("ffmpeg gone", lambda: not ffmpeg_writing(video), timeout=15)
    assert ffprobe_duration(video) >= HEARTBEAT_SECONDS and video_frames(video) >= 2


def test_a_sigkilled_rig_leaves_a_decodable_video_and_no_ffmpeg(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    video = tmp_path / "boot" / "recording.mp4"
    rig = RigProcess(
        app=color_app("Killed Rig", GREEN, log, pos="100,120"),
        extra=["--record", str(video.parent), "--record-video"],
    ).start(tmp_path)
    try:
        poll("ffmpeg writing", lambda: ffmpeg_writing(video))
        poll("some video to keep written", lambda: video_to_keep(video))
    finally:
        rig.stop(signal.SIGKILL)
    poll("ffmpeg gone with the rig (its death signal)", lambda: not ffmpeg_writing(video), timeout=15)
    assert ffprobe_duration(video) > 1.0


def test_an_ffmpeg_that_ignores_sigterm_is_gone_with_the_rig(tmp_path: Path) -> None:
    """The death signal cannot be caught: an ffmpeg stuck in its SIGTERM handling (seen with ffmpeg
    5) must not outlive a SIGKILLed rig. The stand-in ignores SIGTERM and outlives its input."""
    bin_dir, pid_file = tmp_path / "bin", tmp_path / "ffmpeg.pid"
    path = path_without(bin_dir)
    stand_in = bin_dir / "ffmpeg"
    stand_in.write_text(
        "#!/bin/sh\ntrap '' TERM\necho $$ > \"$FFMPEG_PID_FILE\"\n"
        'for arg; do case $arg in *.mp4) out=$arg;; esac; done\ncat > "$out"\nexec sleep 600\n'
    )
    stand_in.chmod(0o755)
    log = tmp_path / "app.log"
    video = tmp_path / "boot" / "recording.mp4"
    rig = RigProcess(
        app=color_app("Stubborn ffmpeg", GREEN, log, pos="100,120"),
        extra=["--record", str(video.parent), "--record-video"],
        env={"PATH": path, "FFMPEG_PID_FILE": str(pid_file)},
    ).start(tmp_path)
    try:
        pid = int(poll("the stand-in started", lambda: pid_file.exists() and pid_file.read_text().strip()))
        poll("frames written", lambda: video.exists() and video.stat().st_size > 0)
    finally:
        rig.stop(signal.SIGKILL)

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")

    try:
        poll("the stand-in gone with the rig", gone, timeout=15)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _options(args: list[str]) -> dict[str, str]:
    """``-name value`` pairs as a mapping, each name once."""
    assert len(args) % 2 == 0 and all(name.startswith("-") for name in args[::2]), args
    options = dict(zip(args[::2], args[1::2], strict=True))
    assert len(options) == len(args) // 2, args
    return options


def test_ffmpeg_reads_raw_frames_stamped_with_the_wall_clock_into_a_fragmented_mp4(tmp_path: Path) -> None:
    path = tmp_path / "recording.mp4"
    argv = video_argv("ffmpeg", 1281, 801, path)
    reading, writing = argv.index("-i"), argv.index(str(path))
    assert argv[0] == "ffmpeg" and argv[reading + 1] == "pipe:0"
    assert _options(argv[1:reading]) == {
        "-f": "rawvideo",
        "-video_size": "1281x801",
        "-analyzeduration": "0",
        "-probesize": "32",
        "-framerate": "100",
        "-pix_fmt": "bgr0",
        "-use_wallclock_as_timestamps": "1",
    }
    assert _options(argv[reading + 2 : writing]) == {
        "-f": "mp4",
        "-vcodec": "libx264",
        "-preset": "ultrafast",
        "-pix_fmt": "yuv420p",
        "-tune": "zerolatency",
        "-fps_mode": "vfr",
        "-vf": "crop=1280:800:0:0",  # the frame's odd size cropped to even
        "-movflags": "+frag_keyframe+empty_moov",
        "-frag_duration": "200000",
        "-flush_packets": "1",
    }
    assert argv[writing + 1 :] == ["-nostats"]


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
