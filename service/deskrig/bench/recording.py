"""Recording benchmark: what recording adds to an action, ffmpeg's CPU, and turn write throughput.

- Action latency (``move_cursor``, in process, 1280x800) with recording off and on: on the window
  of gtk3-widget-factory (261 accessible elements: window pixels plus two accessibility snapshots
  per turn) and on the bare screen (full-screen pixels, no accessibility state). *Paced* leaves
  100 ms between actions, as an agent's round trip does, so the "after" capture (which runs once
  the call has returned) is off the clock; *back-to-back* is the worst case, where each action
  first waits for the previous one's "after". Target: at most 30 ms added. The two parts of a
  capture (pixels, accessibility snapshot) are timed on their own to show where the time goes.
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

from deskrig.bench.stats import Timing, process_cpu_seconds
from deskrig.config import load_settings
from deskrig.desktop import Desktop, open_desktop
from deskrig.desktop.x11 import x11grab_video
from deskrig.identity import ClientRef
from deskrig.model import ActionTarget, Point
from deskrig.recording.moments import grab_image
from deskrig.recording.registry import registry_of
from deskrig.recording.session import Recording
from deskrig.recording.turns import Moment, TurnImage, TurnRecord, TurnTree, captured
from deskrig.recording.video import FRAME_RATE, VideoRecorder
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


def _free_point(desktop: Desktop) -> dict[str, int]:
    """A point on the bare desktop: no window under it, so a turn captures the whole screen."""
    screen = desktop.screen_bounds()
    frames = [w.frame_bounds or w.bounds for w in desktop.windows()]
    for y in range(screen.bottom - 2, screen.y, -8):
        for x in range(screen.x + 2, screen.right, 16):
            if not any(frame.contains(x, y) for frame in frames):
                return {"x": x, "y": y}
    raise RuntimeError("no bare desktop to point at")


def _latency(runs: int) -> list[tuple[Timing, Timing | None]]:
    """(timing, the timing it adds to) rows: actions on a 261-element app's window, on the bare
    screen (full-screen capture, no accessibility state), and the two parts of a capture."""
    with (
        Rig(RigOptions(size=SIZE, app=["gtk3-widget-factory"])) as rig,
        open_desktop("x11", rig.display) as desktop,
        tempfile.TemporaryDirectory() as tmp,
    ):
        server = build_server(
            desktop,
            load_settings(env={}),
            session_bus=rig.env["DBUS_SESSION_BUS_ADDRESS"],
        )
        registry = registry_of(server.services)
        window = next(w for w in desktop.windows() if w.pid == rig.status().app_pid)
        visible = window.bounds.intersection(desktop.screen_bounds())
        assert visible is not None
        on_app = {"x": visible.right - 4, "y": visible.bottom - 4}
        bare = _free_point(desktop)
        target = ActionTarget(pid=window.pid, window_id=window.id, window_title=window.title)

        def action(point: dict[str, int]) -> Callable[[], Awaitable[None]]:
            async def move() -> None:
                result = await server.call(server.tools["move_cursor"], point, CallInfo(ClientRef("bench")))
                assert not result.is_error, result.structured_content

            return move

        async def recorded(name: str, point: dict[str, int], video: bool, pause: float) -> Timing:
            folder = Path(tmp) / f"{len(os.listdir(tmp))}"
            await anyio.to_thread.run_sync(registry.start_session, "bench", folder, video)
            timing = await _timed(name, action(point), runs, pause)
            await registry.settle()
            state = await anyio.to_thread.run_sync(registry.stop_session, "bench")
            assert state.turns == runs + 2 and not state.last_error, state
            return timing

        async def run() -> list[tuple[Timing, Timing | None]]:
            off = await _timed("app window: recording off", action(on_app), runs, PACE_SECONDS)
            bare_off = await _timed("bare screen: recording off", action(bare), runs, PACE_SECONDS)
            recorder_a11y = registry.a11y
            assert recorder_a11y is not None
            client = await recorder_a11y.client()
            return [
                (off, None),
                (await recorded("app window: recording on, paced", on_app, False, PACE_SECONDS), off),
                (await recorded("app window: recording on, back-to-back", on_app, False, 0.0), off),
                (await recorded("app window: recording on + video, paced", on_app, True, PACE_SECONDS), off),
                (bare_off, None),
                (await recorded("bare screen: recording on, paced", bare, False, PACE_SECONDS), bare_off),
                (
                    await _timed(
                        "part: app window pixels",
                        lambda: anyio.to_thread.run_sync(grab_image, registry.observer.observe(), target),
                        runs,
                        0.0,
                    ),
                    None,
                ),
                (
                    await _timed(
                        "part: accessibility snapshot (261 elements)",
                        lambda: client.snapshot(target.pid or 0),
                        runs,
                        0.0,
                    ),
                    None,
                ),
            ]

        try:
            return anyio.run(run)
        finally:
            registry.close()


def _ffmpeg_cpu(app: list[str], seconds: float) -> float:
    """ffmpeg's CPU use while recording ``app``'s screen, in % of one core."""
    with Rig(RigOptions(size=SIZE, app=app, a11y=False)) as rig, tempfile.TemporaryDirectory() as tmp:
        width, height = (int(n) for n in SIZE.split("x"))
        video = VideoRecorder(
            x11grab_video(rig.display, width, height, FRAME_RATE), Path(tmp) / "recording.mp4"
        )
        video.start()
        try:
            assert video.pid is not None
            time.sleep(1.0)  # past the encoder's start-up
            cpu, wall = process_cpu_seconds(video.pid), time.monotonic()
            time.sleep(seconds)
            return 100 * (process_cpu_seconds(video.pid) - cpu) / (time.monotonic() - wall)
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
    moment = Moment(TurnImage(image, captured(source="screen", region=screen)), TurnTree(state, captured()))
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
    rows = _latency(runs)
    out.write(f"\n### recording: move_cursor latency at {SIZE} (gtk3-widget-factory, {runs} runs)\n\n")
    out.write("| case | p50 ms | p95 ms | added p50 ms | target | met |\n|---|---:|---:|---:|---:|:-:|\n")
    for timing, baseline in rows:
        if baseline is None:
            out.write(f"| {timing.name} | {timing.p50:.1f} | {timing.p95:.1f} |  |  |  |\n")
            continue
        added = timing.p50 - baseline.p50
        met = "yes" if added <= ADDED_TARGET_MS else "NO"
        out.write(
            f"| {timing.name} | {timing.p50:.1f} | {timing.p95:.1f} | {added:.1f} | "
            f"≤ {ADDED_TARGET_MS:g} | {met} |\n"
        )

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
