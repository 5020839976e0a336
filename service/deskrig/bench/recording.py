"""Recording benchmark: what recording adds to an action, ffmpeg's CPU, and turn write throughput.

- Action latency (``move_cursor`` on gtk3-widget-factory at 1280x800, in process) with recording
  off and on. *Paced* leaves 100 ms between actions, as an agent's round trip does, so the "after"
  capture (which runs once the call has returned) is off the clock; *back-to-back* is the worst
  case, where each action first waits for the previous one's "after". Target: at most 30 ms added.
- ffmpeg x11grab CPU, as a share of one core, on an idle screen (a still xterm) and a busy one
  (an xterm scrolling text over most of the screen).
- Turn write throughput: full-screen click turns (three 1280x800 PNGs, two states) through one
  recording's writer thread.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from deskrig.bench.stats import Timing
from deskrig.config import load_settings
from deskrig.desktop import open_desktop
from deskrig.model import Point
from deskrig.recording.registry import registry_of
from deskrig.recording.session import Recording
from deskrig.recording.turns import AppState, Frame, Moment, TurnRecord, captured
from deskrig.recording.video import VideoRecorder
from deskrig.rig import Rig, RigOptions
from deskrig.serving import build_server
from deskrig.tools import CallInfo

SIZE = "1280x800"
ADDED_TARGET_MS = 30.0
PACE_SECONDS = 0.1
CPU_SECONDS = 5.0
BUSY_SCREEN = ["xterm", "-geometry", "200x58+0+0", "-e", "sh", "-c", "while :; do ls -lR /usr; done"]


async def _timed(name: str, fn: Callable[[], Awaitable[object]], runs: int, pause: float) -> Timing:
    samples = []
    for index in range(runs + 2):
        started = time.perf_counter()
        await fn()
        if index >= 2:  # warm-up
            samples.append((time.perf_counter() - started) * 1000)
        await anyio.sleep(pause)
    return Timing(name, samples)


def _latency(runs: int) -> list[Timing]:
    with (
        Rig(RigOptions(size=SIZE, app=["gtk3-widget-factory"])) as rig,
        open_desktop("x11", rig.display) as desktop,
        tempfile.TemporaryDirectory() as tmp,
    ):
        server = build_server(
            desktop,
            load_settings(env={}),
            session_bus=rig.env["DBUS_SESSION_BUS_ADDRESS"],
            display=rig.display,
        )
        registry = registry_of(server.services)
        window = next(w for w in desktop.windows() if w.pid == rig.status().app_pid)
        visible = window.bounds.intersection(desktop.screen_bounds())
        assert visible is not None
        point = {"x": visible.right - 4, "y": visible.bottom - 4}

        async def action() -> None:
            result = await server.call(server.tools["move_cursor"], point, CallInfo("bench"))
            assert not result.is_error, result.structured_content

        async def run() -> list[Timing]:
            timings = [await _timed("recording off", action, runs, PACE_SECONDS)]
            for name, video, pause in [
                ("recording on, paced", False, PACE_SECONDS),
                ("recording on, back-to-back", False, 0.0),
                ("recording on + video, paced", True, PACE_SECONDS),
            ]:
                folder = Path(tmp) / name.replace(" ", "-").replace(",", "")
                await anyio.to_thread.run_sync(registry.start_session, "bench", folder, video)
                timings.append(await _timed(name, action, runs, pause))
                await registry.settle()
                state = await anyio.to_thread.run_sync(registry.stop_session, "bench")
                assert state.turns == runs + 2 and not state.last_error, state
            return timings

        try:
            return anyio.run(run)
        finally:
            registry.close()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ffmpeg_cpu(app: list[str], seconds: float) -> float:
    """ffmpeg's CPU use while recording ``app``'s screen, in % of one core."""
    with Rig(RigOptions(size=SIZE, app=app, a11y=False)) as rig, tempfile.TemporaryDirectory() as tmp:
        width, height = (int(n) for n in SIZE.split("x"))
        video = VideoRecorder(rig.display, width, height, Path(tmp) / "recording.mp4")
        video.start()
        try:
            assert video.pid is not None
            time.sleep(1.0)  # past the encoder's start-up
            cpu, wall = _cpu_seconds(video.pid), time.monotonic()
            time.sleep(seconds)
            return 100 * (_cpu_seconds(video.pid) - cpu) / (time.monotonic() - wall)
        finally:
            video.stop()


def _throughput(turns: int) -> tuple[float, float]:
    """(turns per second, ms per turn) for full-screen click turns through one writer."""
    with (
        Rig(RigOptions(size=SIZE, app=["gtk3-widget-factory"], a11y=False)) as rig,
        open_desktop("x11", rig.display) as desktop,
    ):
        screen = desktop.screen_bounds()
        image = desktop.capture(screen)
    state: dict[str, Any] = {
        "elements": [{"index": i, "role": "push button", "name": f"b{i}"} for i in range(200)]
    }
    moment = Moment(Frame(image, captured(source="screen", region=screen)), AppState(state, captured()))
    records = [
        TurnRecord(
            "click", {"tool": "click", "arguments": {"x": 640, "y": 400}}, moment, moment, Point(x=640, y=400)
        )
        for _ in range(turns)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        recording = Recording(Path(tmp), "session")
        recording.start()
        started = time.perf_counter()
        for record in records:
            recording.enqueue(record)
        final = recording.stop()
        elapsed = time.perf_counter() - started
    assert final.turns == turns, final
    return turns / elapsed, 1000 * elapsed / turns


def run(runs: int) -> None:
    out = sys.stdout
    timings = _latency(runs)
    off = timings[0]
    out.write(f"\n### recording: move_cursor latency at {SIZE} (gtk3-widget-factory, {runs} runs)\n\n")
    out.write("| case | p50 ms | p95 ms | added p50 ms | target | met |\n|---|---:|---:|---:|---:|:-:|\n")
    for timing in timings:
        added = timing.p50 - off.p50
        target = "" if timing is off else f"≤ {ADDED_TARGET_MS:g}"
        met = "" if timing is off else ("yes" if added <= ADDED_TARGET_MS else "NO")
        shown = "" if timing is off else f"{added:.1f}"
        out.write(f"| {timing.name} | {timing.p50:.1f} | {timing.p95:.1f} | {shown} | {target} | {met} |\n")

    idle = _ffmpeg_cpu(["xterm"], CPU_SECONDS)
    busy = _ffmpeg_cpu(BUSY_SCREEN, CPU_SECONDS)
    out.write(
        f"\n### recording: ffmpeg x11grab CPU at {SIZE}, 30 fps, ultrafast ({CPU_SECONDS:g} s each)\n\n"
    )
    out.write("| screen | CPU, % of one core |\n|---|---:|\n")
    out.write(f"| idle (still xterm) | {idle:.1f} |\n| busy (scrolling xterm) | {busy:.1f} |\n")

    turns = max(20, runs)
    per_second, per_turn = _throughput(turns)
    out.write(f"\n### recording: turn write throughput ({turns} full-screen click turns, one writer)\n\n")
    out.write("| turns/s | ms per turn |\n|---:|---:|\n")
    out.write(f"| {per_second:.1f} | {per_turn:.1f} |\n")
    out.flush()
