"""Recording benchmark: what recording adds to an action, ffmpeg's CPU, and turn write throughput.

- Added cost end to end over MCP/HTTP (issue 12's target: at most 25 ms per turn): a real rig
  (``deskrig rig run``, gtk3-widget-factory at 1280x800, in its own process) and a client calling
  it, the same action with this session's recording off and on (``start_recording``) in the same
  run. Actions: ``move_cursor`` on the app's window, a click on a check box by coordinates, and a
  click on another by element (``{snapshot_id, index}`` from ``get_app_state``, as agents do); each
  one toggles the box, so the after-state differs from the before-state. Calls go in blocks of
  :data:`BLOCK` (the first of each block a warm-up), off and on blocks alternating, so both meet
  the same load; the added cost is shown as the difference of the medians and as p50/p95 of the
  paired differences (n-th call on minus n-th call off), beside the rig server's CPU per call of
  each side (median over blocks; the writer's encoding included), which the machine's load does
  not move. *Paced*: :data:`PACE_OVER_MCP` seconds between a reply and the next call, an agent's
  pace; *back-to-back*: none, so each action's before-observation is the previous one's "after"
  too (see :mod:`deskrig.recording.registry`). Two clients: a bare JSON-RPC one (POSTs, replies
  parsed as JSON) and the SDK's ``mcp.Client``, which also validates each result against the
  tool's output schema.
- Action latency (``move_cursor``, in process, 1280x800) with recording off and on: on the window
  of gtk3-widget-factory (261 accessible elements: window pixels plus two accessibility snapshots
  per turn) and on the bare screen (full-screen pixels, no accessibility state). *Paced* leaves
  100 ms between actions, as an agent's round trip does, so the "after" capture (taken 50 ms
  after the call returned) is off the clock; *back-to-back*: each action's before-observation
  is the previous one's "after" too. Target: at most 30 ms added. The two parts of a
  capture (pixels, accessibility snapshot) are timed on their own to show where the time goes.
- Video CPU, as a share of one core, on an idle screen (a still xterm) and a busy one (an xterm
  scrolling text over most of the screen): the recorder's pipeline (ffmpeg plus the frame pump
  thread that grabs and redacts the screen), with the frames it actually wrote per second, beside
  ffmpeg grabbing the display itself (x11grab at 30 fps, the pipeline before video came from the
  observation path) on the same screen in the same run.
- Turn write throughput: full-screen click turns (three 1280x800 PNGs, two states) through one
  recording's writer thread, their moments BGRX grabs as on X11: of a live screen (only the
  spinner's bands deflated again from one moment to the next), of a screen whose every row changes
  between moments, and the live frames as Pillow images (a backend without BGRX grabs).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from deskrig.bench.over_http import BareMcp
from deskrig.bench.reliability_rig import GTK_APP, BenchRig
from deskrig.bench.stats import Timing, process_cpu_seconds, thread_cpu_seconds
from deskrig.client import connect
from deskrig.config import load_settings
from deskrig.desktop import Desktop, open_desktop
from deskrig.grabs import Grab
from deskrig.identity import ClientRef
from deskrig.model import ActionTarget, Bounds, Point
from deskrig.observation import Observer
from deskrig.recording.moments import grab_image
from deskrig.recording.registry import registry_of
from deskrig.recording.session import Recording
from deskrig.recording.turns import Moment, TurnImage, TurnRecord, TurnTree, captured
from deskrig.recording.video import FRAME_RATE, VideoRecorder
from deskrig.rig import Rig, RigOptions
from deskrig.security import WindowBlocklist
from deskrig.serving import build_server
from deskrig.tools import CallInfo

SIZE = "1280x800"
ADDED_TARGET_MS = 30.0
PACE_SECONDS = 0.1
CPU_SECONDS = 5.0
#: Issue 12: what recording adds to an action end to end over MCP.
ADDED_OVER_MCP_TARGET_MS = 25.0
#: Between a reply and the next call when paced: an agent acts every 200-500 ms.
PACE_OVER_MCP = 0.3
#: Calls per block of one side (recording off or on); the first of each is a warm-up.
BLOCK = 10
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


#: A tool call over MCP: (tool, arguments) -> its structured result.
McpCall = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class AddedCost:
    """One action by one client at one pace, recording off and on, and the paired differences."""

    client: str
    action: str
    pacing: str
    off: Timing
    on: Timing
    added: Timing
    #: The machine's 1-minute load average when the row was done.
    load: float

    @property
    def met(self) -> bool:
        return self.on.p50 - self.off.p50 <= ADDED_OVER_MCP_TARGET_MS


@dataclass(frozen=True)
class TimedAction:
    """An action timed over MCP: its name in the table, its tool, the arguments its calls take in turn."""

    name: str
    tool: str
    arguments: list[dict[str, Any]]


def _actions(state: dict[str, Any], window: dict[str, Any]) -> list[TimedAction]:
    """The actions timed over MCP. Two enabled check
    boxes of the app's first page: one clicked by its centre, one by element."""
    boxes = [
        e
        for e in state["elements"]
        if e["role"] == "check box"
        and e.get("bounds")
        and {"enabled", "sensitive", "showing"} <= set(e.get("states", []))
    ]
    assert len(boxes) >= 2, f"gtk3-widget-factory shows {len(boxes)} enabled check boxes, not 2"
    by_point, by_element = boxes[0]["bounds"], boxes[1]
    bounds = window["bounds"]
    corner = min(bounds["x"] + bounds["width"], 1280) - 40, min(bounds["y"] + bounds["height"], 800) - 40
    centre = {"x": by_point["x"] + by_point["width"] // 2, "y": by_point["y"] + by_point["height"] // 2}
    element = {"snapshot_id": state["snapshot_id"], "index": by_element["index"]}
    return [
        TimedAction("move_cursor", "move_cursor", [{"x": corner[0] - dx, "y": corner[1]} for dx in (0, 20)]),
        TimedAction("click (x, y)", "click", [centre]),
        TimedAction("click (element)", "click", [{"element": element}]),
    ]


async def _added_cost(
    call: McpCall, action: TimedAction, folder: Path, runs: int, pause: float, server_pid: int
) -> tuple[Timing, Timing, Timing]:
    """(off, on, on minus off pairwise) for ``runs`` calls of each side, in alternating blocks. The
    off and on timings carry, as CPU samples, the server process's CPU per call of each block (the
    on side's until its stop_recording has written every turn): what the load does not move."""
    sides: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    block = 0
    while len(sides[True]) < runs:
        for recorded in (False, True) if block % 2 == 0 else (True, False):
            if recorded:
                await call("start_recording", {"output_dir": str(folder)})
            cpu_started = process_cpu_seconds(server_pid)
            for index in range(BLOCK + 1):
                started = time.perf_counter()
                await call(action.tool, action.arguments[index % len(action.arguments)])
                elapsed = (time.perf_counter() - started) * 1000
                if index > 0 and len(sides[recorded]) < runs:
                    sides[recorded].append(elapsed)
                await anyio.sleep(pause)
            if recorded:  # each block a recording of its own, continuing the folder's turns
                state = await call("stop_recording", {})
                assert state["turns"] == BLOCK + 1 and not state["last_error"], state
            cpu[recorded].append((process_cpu_seconds(server_pid) - cpu_started) * 1000 / (BLOCK + 1))
        block += 1
    off, on = sides[False], sides[True]
    return (
        Timing("off", off, cpu[False]),
        Timing("on", on, cpu[True]),
        Timing("added", [b - a for a, b in zip(off, on, strict=True)]),
    )


async def _client_rows(client: str, call: McpCall, rig: BenchRig, runs: int) -> list[AddedCost]:
    window = (await call("list_windows", {}))["windows"][0]
    state = await call("get_app_state", {"pid": rig.app_pid(), "include_elements": True})
    rows = []
    for pacing, pause in (("paced", PACE_OVER_MCP), ("back-to-back", 0.0)):
        for action in _actions(state, window):
            folder = rig.allowed / f"turns-{len(os.listdir(rig.allowed))}"
            off, on, added = await _added_cost(call, action, folder, runs, pause, rig.pids()["server"])
            rows.append(AddedCost(client, action.name, pacing, off, on, added, os.getloadavg()[0]))
    return rows


def _over_mcp(runs: int) -> list[AddedCost]:
    """Added cost per turn over MCP/HTTP, both clients, against one real rig."""
    rig = BenchRig(app=GTK_APP, extra=["--size", SIZE]).start()
    try:

        async def bare_rows() -> list[AddedCost]:
            with BareMcp(rig.url, rig.token) as bare:

                async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                    return bare.call(tool, arguments)  # blocks the loop: nothing else runs on it

                return await _client_rows("bare JSON-RPC", call, rig, runs)

        async def sdk_rows() -> list[AddedCost]:
            async with connect(rig.url, rig.token) as sdk:

                async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                    result = await sdk.call_tool(tool, arguments)
                    assert not result.is_error, (tool, result.content)
                    return result.structured_content or {}

                return await _client_rows("mcp.Client", call, rig, runs)

        return anyio.run(bare_rows) + anyio.run(sdk_rows)
    finally:
        rig.cleanup()


def _write_over_mcp(rows: list[AddedCost], runs: int, load: tuple[float, float, float]) -> None:
    out = sys.stdout
    out.write(
        f"\n### recording: added cost per turn end to end over MCP/HTTP (rig process, gtk3-widget-factory "
        f"at {SIZE}, {runs} calls a side; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})\n\n"
    )
    out.write(
        "| client | action | pacing | off p50 | off p95 | on p50 | on p95 | added p50 (on − off) "
        "| paired added p50 | paired added p95 | server CPU per call, off / on | load | target | met |\n"
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|\n"
    )
    for row in rows:
        out.write(
            f"| {row.client} | {row.action} | {row.pacing} | {row.off.p50:.1f} | {row.off.p95:.1f} | "
            f"{row.on.p50:.1f} | {row.on.p95:.1f} | {row.on.p50 - row.off.p50:.1f} | {row.added.p50:.1f} | "
            f"{row.added.p95:.1f} | {row.off.cpu().p50:.1f} / {row.on.cpu().p50:.1f} | {row.load:.2f} | "
            f"≤ {ADDED_OVER_MCP_TARGET_MS:g} | {'yes' if row.met else 'NO'} |\n"
        )
    out.flush()


@dataclass(frozen=True)
class VideoCost:
    """What recording one screen as video costs, in % of one core."""

    #: The recorder: ffmpeg + the frame pump thread.
    pipeline: float
    ffmpeg: float
    pump: float
    frames_per_second: float
    #: ffmpeg grabbing the display itself at 30 fps (x11grab), on the same screen.
    x11grab: float


def _shares(counters: list[Callable[[], float]], seconds: float) -> list[float]:
    """Each CPU-seconds counter's growth over the same ``seconds``, in % of one core."""
    before, wall = [count() for count in counters], time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - wall
    return [100 * (count() - start) / elapsed for count, start in zip(counters, before, strict=True)]


def _x11grab_argv(display: str, path: Path) -> list[str]:
    """The baseline: ffmpeg grabbing ``display`` itself at a constant 30 fps, the recorder's command
    line before its video came from the observation path."""
    width, height = (int(n) for n in SIZE.split("x"))
    grab = ["-f", "x11grab", "-video_size", SIZE, "-draw_mouse", "1", "-framerate", str(FRAME_RATE)]
    encode = ["-f", "mp4", "-flush_packets", "1", "-frag_duration", "200000"]
    encode += ["-movflags", "+frag_keyframe+empty_moov", "-pix_fmt", "yuv420p", "-preset", "ultrafast"]
    encode += ["-r", str(FRAME_RATE), "-vcodec", "libx264", "-vf", f"crop={width}:{height}:0:0"]
    return ["ffmpeg", *grab, "-i", display, *encode, str(path), "-nostats"]


def _video_cost(app: list[str], seconds: float) -> VideoCost:
    """The recorder's video of ``app``'s screen, then x11grab's of the same screen."""
    with (
        Rig(RigOptions(size=SIZE, app=app, a11y=False)) as rig,
        open_desktop("x11", rig.display) as desktop,
        tempfile.TemporaryDirectory() as tmp,
    ):
        video = VideoRecorder(Observer(desktop, WindowBlocklist([])), Path(tmp) / "recording.mp4")
        video.start()
        try:
            pid, pump = video.pid, video.pump_thread
            assert pid is not None and pump is not None and pump.native_id is not None
            pump_id = pump.native_id
            time.sleep(1.0)  # past the encoder's start-up
            frames, wall = video.frames_written, time.monotonic()
            ffmpeg, pumping = _shares(
                [lambda: process_cpu_seconds(pid), lambda: thread_cpu_seconds(pump_id)], seconds
            )
            frames_per_second = (video.frames_written - frames) / (time.monotonic() - wall)
        finally:
            video.stop()
        grabbing = subprocess.Popen(
            _x11grab_argv(rig.display, Path(tmp) / "x11grab.mp4"),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(1.0)
            (x11grab,) = _shares([lambda: process_cpu_seconds(grabbing.pid)], seconds)
        finally:
            grabbing.communicate(b"q", timeout=10)
    return VideoCost(ffmpeg + pumping, ffmpeg, pumping, frames_per_second, x11grab)


#: Frames grabbed of the live screen for the write throughput, :data:`LIVE_FRAME_GAP` apart: the
#: turns' moments cycle through them, so one moment differs from the next as the spinner moved.
LIVE_FRAMES = 8
LIVE_FRAME_GAP = 0.05
#: Every byte with its lowest bit flipped: a frame whose every row differs from the original's,
#: and deflates about as well.
_EVERY_ROW_CHANGED = bytes(value ^ 1 for value in range(256))


@dataclass(frozen=True)
class Throughput:
    """One screen's turn write throughput."""

    screen: str
    turns_per_second: float
    ms_per_turn: float


def _unlinked(frame: Grab) -> Grab:
    """``frame``'s pixels without its place in the grabber's history: the PNG writer then compares
    each frame's rows with the last one's (up to about 1 ms a 1280x800 frame, when every row
    changed), as for frames of another grabber. With its history a frame would not be compared,
    but the history cannot say what changed between frames taken out of its order, as the turns'
    moments cycle through them."""
    assert frame.bgrx is not None, "X11 grabs are BGRX rows"
    return Grab.from_bgrx(frame.bgrx, frame.width, frame.height)


def _throughput(turns: int) -> list[Throughput]:
    """Turns per second and ms per turn for full-screen click turns through one writer, their
    moments as the recorder takes them on X11 (BGRX grabs, a moment of its own each: a moment is
    encoded once however many turns show it), on three screens: a live one (gtk3-widget-factory
    with its spinner, where from one moment to the next only the spinner's bands are deflated
    again), one whose every row changes between moments (every band deflated), and the same live
    frames as Pillow images (the path of a backend whose grabs are not BGRX rows: each PNG
    converted and deflated whole)."""
    with (
        Rig(RigOptions(size=SIZE, app=["gtk3-widget-factory"], a11y=False)) as rig,
        open_desktop("x11", rig.display) as desktop,
    ):
        screen = desktop.screen_bounds()
        live: list[Grab] = []
        for _ in range(LIVE_FRAMES):
            live.append(_unlinked(desktop.grab(screen)))
            time.sleep(LIVE_FRAME_GAP)
    first = live[0]
    assert first.bgrx is not None
    changed = Grab.from_bgrx(bytes(first.bgrx).translate(_EVERY_ROW_CHANGED), first.width, first.height)
    screens = [
        ("live (the spinner's bands change)", live),
        ("every row changed", [first, changed]),
        ("live, as Pillow images", [Grab.of(frame.image()) for frame in live]),
    ]
    return [Throughput(name, *_write_turns(frames, screen, turns)) for name, frames in screens]


def _write_turns(frames: list[Grab], screen: Bounds, turns: int) -> tuple[float, float]:
    """(turns per second, ms per turn) for ``turns`` click turns whose moments cycle through
    ``frames``, written by one recording's writer."""
    state: dict[str, Any] = {
        "elements": [{"index": i, "role": "push button", "name": f"b{i}"} for i in range(200)]
    }
    frame_of = itertools.cycle(frames)

    def moment() -> Moment:
        return Moment(
            TurnImage(next(frame_of), captured(source="screen", region=screen)), TurnTree(state, captured())
        )

    records = [
        TurnRecord(
            "click",
            {"tool": "click", "arguments": {"x": 640, "y": 400}},
            moment(),
            moment(),
            Point(x=640, y=400),
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
    load = os.getloadavg()
    _write_over_mcp(_over_mcp(runs), runs, load)
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

    costs = [("idle (still xterm)", _video_cost(["xterm"], CPU_SECONDS))]
    costs.append(("busy (scrolling xterm)", _video_cost(BUSY_SCREEN, CPU_SECONDS)))
    out.write(
        f"\n### recording: video CPU at {SIZE}, up to {FRAME_RATE} fps, ultrafast ({CPU_SECONDS:g} s each, "
        f"load average {os.getloadavg()[0]:.2f})\n\n"
    )
    out.write(
        "| screen | recorder: ffmpeg + pump, % of one core | ffmpeg | pump | frames written/s "
        "| before: x11grab at 30 fps, % |\n|---|---:|---:|---:|---:|---:|\n"
    )
    for name, cost in costs:
        out.write(
            f"| {name} | {cost.pipeline:.1f} | {cost.ffmpeg:.1f} | {cost.pump:.1f} | {cost.frames_per_second:.1f} "
            f"| {cost.x11grab:.1f} |\n"
        )

    turns = max(20, runs)
    out.write(f"\n### recording: turn write throughput ({turns} full-screen click turns, one writer)\n\n")
    out.write("| screen | turns/s | ms per turn |\n|---|---:|---:|\n")
    for row in _throughput(turns):
        out.write(f"| {row.screen} | {row.turns_per_second:.1f} | {row.ms_per_turn:.1f} |\n")
    out.flush()
