"""MCP over stdio: how soon ``deskrig serve --stdio`` answers, and how fast it serves at the limit.

The encoders at the limit: full-screen PNG and JPEG q80 over MCP stdio on a changing screen
(through the MCP SDK's client, and in bare JSON-RPC lines with the server's CPU time per call)
beside the same figures at issue 12's stop 23, the in-process grab + encode, the old Pillow path
(BGRX->RGB copy, Pillow's encoders) in the same run, the per-call floor (``get_screen_size`` over
the same transport) and the load average; then, for each call, the server's CPU over stdio beside
the same tool call's in process (``DeskrigServer.call``), whose difference is what the MCP SDK's
dispatch and the transport cost.

The start: how soon ``deskrig serve --stdio`` answers, beside the MCP SDK's own import.

MCP clients spawn their stdio servers on every start and wait for ``initialize``. The floor is a
fresh Python importing what any server on the MCP SDK needs (``mcp.server.lowlevel`` and
``mcp.server.stdio``); each run times that, then spawns deskrig on the same display and times, from
the spawn, ``initialize``, then (as clients do next) ``tools/list`` and a first ``screenshot_screen``.
Floor and server alternate run by run, so both see the same machine load.

deskrig's own modules are byte-compiled first, as ``pip install`` does: from a source checkout
under ``PYTHONDONTWRITEBYTECODE`` (set on the development VM) every spawn would otherwise compile
some 500 modules again, about 100 ms of CPU that no installed server pays.
"""

from __future__ import annotations

import compileall
import ctypes
import functools
import io
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from PIL import Image

import deskrig
from deskrig import imaging, turbojpeg
from deskrig.bench import ts_client
from deskrig.bench.capture import DEMO_APP
from deskrig.bench.reliability_rig import INITIALIZE
from deskrig.bench.stats import Timing, awaitable, measure_interleaved
from deskrig.config import load_settings
from deskrig.desktop import Desktop, open_desktop
from deskrig.grabs import Grab
from deskrig.identity import ClientRef
from deskrig.model import Bounds
from deskrig.rig import Rig, RigOptions
from deskrig.serving import build_server, close_server
from deskrig.tools import CallInfo

DESKRIG = [str(Path(sys.executable).parent / "deskrig"), "serve", "--stdio"]
SDK_IMPORT = [sys.executable, "-c", "import mcp.server.lowlevel, mcp.server.stdio"]
SDK_NAME = "MCP SDK import (python -c 'import mcp.server.lowlevel, mcp.server.stdio')"
#: The targets (issue 12): initialize within this of the SDK's import; the first screenshot after it.
INITIALIZE_OVER_FLOOR_MS = 150.0
FIRST_SCREENSHOT_MS = 300.0


class StdioPeer:
    """A spawned stdio MCP server, spoken to in raw JSON-RPC lines, each answer timed from spawn."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.spawned = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and wait for its answer (notifications before it are skipped)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        self.send(message if params is None else {**message, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed stdout before answering {method}: {self.stderr()}")
            answer: dict[str, Any] = json.loads(line)
            if answer.get("id") == request_id:
                return answer

    def moment(self) -> Moment:
        """Now, from the spawn; CPU time from the kernel's count for the process (utime + stime)."""
        wall = (time.perf_counter() - self.spawned) * 1000
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        ticks = int(fields[11]) + int(fields[12])  # utime and stime: fields 14 and 15 of stat(5)
        return Moment(wall, ticks * 1000 / os.sysconf("SC_CLK_TCK"))

    def close(self, timeout: float = 30) -> int:
        """Hang up (stdin EOF ends a stdio server) and wait for it to exit."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def stderr(self) -> str:
        """What the server logged; it must have exited (or exit within a few seconds)."""
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")


def initialize(peer: StdioPeer) -> dict[str, Any]:
    """The handshake: initialize, then the initialized notification."""
    answer = peer.request(1, "initialize", INITIALIZE["params"])
    peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return answer


@dataclass(frozen=True)
class Moment:
    """When something happened, from the spawn: wall-clock, and CPU time the process had used by
    then (all threads). CPU time barely moves with the machine's load, so it shows what a quiet
    machine would take."""

    wall_ms: float
    cpu_ms: float


def _sdk_import() -> Moment:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(SDK_IMPORT, check=True)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return Moment(wall, cpu)


def _deskrig_start(env: dict[str, str]) -> tuple[Moment, Moment, Moment]:
    """From spawn to the initialize answer, to tools/list's, to the first screenshot's."""
    peer = StdioPeer(DESKRIG, env)
    try:
        initialize(peer)
        answered = peer.moment()
        tools = peer.request(2, "tools/list")
        assert tools["result"]["tools"], tools
        listed = peer.moment()
        shot = peer.request(3, "tools/call", {"name": "screenshot_screen", "arguments": {}})
        assert not shot["result"].get("isError"), shot
        return answered, listed, peer.moment()
    finally:
        peer.close()


def _row(
    name: str, wall: list[float], cpu: list[float], beside: str = "", target: float | None = None
) -> str:
    timing, cpu_p50 = Timing(name, wall), statistics.median(cpu)
    met = (
        ""
        if target is None
        else ("yes" if timing.p50 <= target else f"NO (CPU: {'yes' if cpu_p50 <= target else 'no'})")
    )
    limit = "" if target is None else f"≤ {target:g}"
    return f"| {name} | {timing.p50:.0f} | {timing.p95:.0f} | {cpu_p50:.0f} | {beside} | {limit} | {met} |\n"


def run(runs: int) -> None:
    _encoders_at_the_limit(runs)
    _start(runs)


def _start(runs: int) -> None:
    runs = max(3, min(runs, 15))  # each run spawns two interpreters: seconds, not milliseconds
    compileall.compile_dir(Path(deskrig.__file__).parent, quiet=1)
    floor: list[Moment] = []
    starts: list[tuple[Moment, Moment, Moment]] = []
    with Rig(RigOptions(size="1280x800", app=["xterm"], a11y=False)) as rig:
        env = {**os.environ, **rig.env}
        _deskrig_start(env)  # warm the page cache for both
        for _ in range(runs):
            floor.append(_sdk_import())
            starts.append(_deskrig_start(env))

    def series(pick: Callable[[tuple[Moment, Moment, Moment], Moment], float]) -> list[float]:
        return [pick(start, sdk) for start, sdk in zip(starts, floor, strict=True)]

    out = sys.stdout
    out.write(f"\n### stdio start: deskrig serve --stdio beside the MCP SDK's import ({runs} runs)\n\n")
    out.write("| case | p50 ms | p95 ms | CPU p50 ms | beside | target ms | met |\n")
    out.write("|---|---:|---:|---:|---|---:|:-:|\n")
    out.write(_row(SDK_NAME, [m.wall_ms for m in floor], [m.cpu_ms for m in floor], "the floor"))
    out.write(
        _row(
            "deskrig serve --stdio: spawn → initialize",
            series(lambda s, _: s[0].wall_ms),
            series(lambda s, _: s[0].cpu_ms),
        )
    )
    out.write(
        _row(
            "initialize − SDK import, paired per run",
            series(lambda s, sdk: s[0].wall_ms - sdk.wall_ms),
            series(lambda s, sdk: s[0].cpu_ms - sdk.cpu_ms),
            "",
            INITIALIZE_OVER_FLOOR_MS,
        )
    )
    out.write(
        _row(
            "initialize → tools/list",
            series(lambda s, _: s[1].wall_ms - s[0].wall_ms),
            series(lambda s, _: s[1].cpu_ms - s[0].cpu_ms),
        )
    )
    out.write(
        _row(
            "initialize → tools/list + first screenshot_screen",
            series(lambda s, _: s[2].wall_ms - s[0].wall_ms),
            series(lambda s, _: s[2].cpu_ms - s[0].cpu_ms),
            "",
            FIRST_SCREENSHOT_MS,
        )
    )
    out.flush()


#: End-to-end targets over MCP stdio, full screen 1280x800 on a changing screen (ms, p50).
STDIO_TARGETS_MS = {"png": 9.0, "jpeg": 5.0}
#: Long enough for a server to be waiting again after its last answer.
SETTLE_SECONDS = 0.1
#: ``deskrig serve`` on the MCP SDK's stdio transport (worker-thread reads, writes and flushes), as it
#: was served before :mod:`deskrig.stdio`: the transport's baseline, measured in the same run.
ON_THE_SDK_TRANSPORT = """
import sys
from mcp.server.stdio import stdio_server
import deskrig.serving
from deskrig.cli import main
deskrig.serving._stdio_streams = lambda first_written=None: stdio_server()
sys.exit(main(sys.argv[1:]))
"""
#: The same figures at the end of issue 12's last stop (23, quiet: load 0.8), with deskrig's own
#: stdio transport and before quick steps ran on the event loop, base64 and the answer's JSON went
#: to SIMD writers and the damage serial was read off the socket: SDK client / bare JSON-RPC, p50 ms.
BASELINE_MS = {"png": (6.16, 5.53), "jpeg": (6.23, 5.35), "floor": (2.75, 2.12)}


def _pillow_path(frame: Grab, fmt: str) -> bytes:
    """The encoders before they read BGRX: an RGB copy, then Pillow's PNG (level 1) or JPEG q80."""
    out = io.BytesIO()
    image = Image.frombuffer("RGB", frame.size, frame.bgrx or b"", "raw", "BGRX", 0, 1)
    if fmt == "png":
        image.save(out, format="PNG", compress_level=1)
    else:
        image.save(out, format="JPEG", quality=imaging.DEFAULT_QUALITY["jpeg"])
    return out.getvalue()


def _grab_and_encode(
    desktop: Desktop, screen: Bounds, fmt: str, encode: Callable[[Grab, str], bytes]
) -> bytes:
    return encode(desktop.grab(screen), fmt)


def process_cpu_clock(pid: int) -> int:
    """The clock of the CPU time process ``pid`` has used, all its threads, in nanoseconds
    (clock_getcpuclockid(3); Linux lets a process read those of its own user's). One system call a
    read: the sum of its threads' /proc/<pid>/task/*/schedstat, read through pathlib, took
    0.3-0.5 ms on a CPU that was idle, and the bare JSON-RPC calls' wall time held two such reads."""
    clock = ctypes.c_int()
    error = ctypes.CDLL(None).clock_getcpuclockid(pid, ctypes.byref(clock))
    if error:
        raise OSError(error, os.strerror(error))
    return clock.value


class _RawStdio:
    """``deskrig serve --stdio`` spoken to in bare JSON-RPC lines: the transport's own cost, without
    an MCP client's validation of every answer; the server's CPU time per call is read from its
    CPU-time clock (:func:`process_cpu_clock`: nanoseconds, all its threads).

    A call's CPU time is read up to the start of the next call, not when its answer arrives. A
    process's clock counts each of its threads' time up to the thread's last scheduler tick or
    switch (Linux adds a running thread's current stretch only to the thread's own clock, which
    another process cannot read), and the server's thread runs on for a moment after writing an
    answer: read then, a call that ran in one stretch between two ticks took 0 ms, and every call
    lost its tail. By the next call the server has long been waiting for it; what it did meanwhile
    unasked (its damage watch, its timers) counts to the call before, some hundredths of a ms."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.peer = StdioPeer(argv, env)
        initialize(self.peer)
        self.ids = itertools.count(10)
        self.server_cpu_ms: dict[str, list[float]] = {}
        self.cached = 0
        self._cpu_clock = process_cpu_clock(self.peer.proc.pid)
        #: The last call's name and the server's CPU time when it began, until the next call begins.
        self._uncounted: tuple[str, float] | None = None

    def _cpu_ms(self) -> float:
        return time.clock_gettime_ns(self._cpu_clock) / 1e6

    def _count(self, now_ms: float) -> None:
        if self._uncounted is not None:
            name, began_ms = self._uncounted
            self.server_cpu_ms.setdefault(name, []).append(now_ms - began_ms)
            self._uncounted = None

    def call(self, name: str, tool: str, arguments: dict[str, Any]) -> None:
        began_ms = self._cpu_ms()
        self._count(began_ms)
        answer = self.peer.request(next(self.ids), "tools/call", {"name": tool, "arguments": arguments})
        self._uncounted = (name, began_ms)
        assert not answer["result"].get("isError"), answer
        self.cached += bool(answer["result"].get("structuredContent", {}).get("from_cache"))

    def close(self) -> None:
        """Count the last call (once the server has settled), then end the server."""
        time.sleep(SETTLE_SECONDS)
        self._count(self._cpu_ms())
        self.peer.close()


def _limit_rows(desktop: Desktop, display: str, runs: int) -> list[str]:
    """Every case in turn, round after round (:func:`measure_interleaved`): on a shared machine a
    case measured a minute later is measured under another load. Each stdio case twice: through
    the MCP SDK's client, as an agent's host would call, and in bare JSON-RPC lines."""
    screen = desktop.screen_bounds()
    argv = [str(Path(sys.executable).parent / "deskrig"), "serve", "--stdio", "--display", display]
    # A fast round of 300 runs makes more than the default 600 captures a minute on one server.
    env = {**os.environ, "DISPLAY": display, "DESKRIG_MAX_CAPTURES_PER_MINUTE": "1000000"}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)  # the venv's, like the tests
    # The same tools called in process, as the stdio server calls them for its one client: what a
    # call costs without the MCP SDK's dispatch and the transport.
    server = build_server(desktop, load_settings(env={"DESKRIG_MAX_CAPTURES_PER_MINUTE": "1000000"}))
    server.one_client = True
    cached = 0
    raw = _RawStdio(argv, env)
    sdk_transport = _RawStdio([sys.executable, "-c", ON_THE_SDK_TRANSPORT, *argv[1:]], env)
    # The TypeScript SDK's Client spawning the same server (where Node and the SDK are installed).
    ts = (
        None
        if ts_client.missing()
        else ts_client.TsClient(ts_client.StdioTarget(command=argv[0], args=argv[1:], env=env))
    )

    async def run() -> list[Timing]:
        nonlocal cached
        async with Client(params) as client:

            async def call(tool: str, arguments: dict[str, Any]) -> None:
                nonlocal cached
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, result
                cached += bool((result.structured_content or {}).get("from_cache"))

            async def call_in_process(tool: str, arguments: dict[str, Any]) -> None:
                result = await server.call(server.tools[tool], arguments, CallInfo(ClientRef("bench")))
                assert not result.is_error, result

            cases: list[tuple[str, Callable[[], Awaitable[object]]]] = [
                ("floor", functools.partial(call, "get_screen_size", {})),
                ("call floor", functools.partial(call_in_process, "get_screen_size", {})),
                ("raw floor", awaitable(functools.partial(raw.call, "raw floor", "get_screen_size", {}))),
                (
                    "sdk floor",
                    awaitable(functools.partial(sdk_transport.call, "sdk floor", "get_screen_size", {})),
                ),
                *([] if ts is None else [("ts floor", ts.case("ts floor", "get_screen_size", {}))]),
            ]
            # The spawned servers' cases first, then the in-process ones, whose old Pillow path
            # (tens of ms of CPU, megabytes allocated and freed) would otherwise come just before
            # one format's stdio calls and not the other's.
            for fmt in STDIO_TARGETS_MS:
                arguments = {"format": fmt}
                cases += [
                    (f"stdio {fmt}", functools.partial(call, "screenshot_screen", arguments)),
                    (f"call {fmt}", functools.partial(call_in_process, "screenshot_screen", arguments)),
                    (
                        f"raw {fmt}",
                        awaitable(functools.partial(raw.call, f"raw {fmt}", "screenshot_screen", arguments)),
                    ),
                    (
                        f"sdk {fmt}",
                        awaitable(
                            functools.partial(
                                sdk_transport.call, f"sdk {fmt}", "screenshot_screen", arguments
                            )
                        ),
                    ),
                    *(
                        []
                        if ts is None
                        else [(f"ts {fmt}", ts.case(f"ts {fmt}", "screenshot_screen", arguments))]
                    ),
                ]
            for fmt in STDIO_TARGETS_MS:
                for name, encode in (("new", imaging.encode), ("old", _pillow_path)):
                    grab_and_encode = functools.partial(_grab_and_encode, desktop, screen, fmt, encode)
                    cases.append((f"{name} {fmt}", awaitable(grab_and_encode)))
            return await measure_interleaved(cases, runs)

    try:
        timings = {timing.name: timing for timing in anyio.run(run)}
    finally:
        close_server(server)
        raw.close()
        sdk_transport.close()
        if ts is not None:
            ts.close()

    def ms(name: str) -> str:
        return f"{timings[name].p50:.2f}"

    def cpu(name: str) -> str:  # the CPU time does not move with the machine's load
        return f"{timings[name].cpu().p50:.2f}"

    def server_cpu_ms(name: str) -> float:
        peer = sdk_transport if name.startswith("sdk ") else raw
        return statistics.median(peer.server_cpu_ms[name][-runs:])

    def server_cpu(name: str) -> str:
        return f"{server_cpu_ms(name):.2f}"

    def on_sdk(name: str) -> str:
        return f"{ms(name)} (server CPU {server_cpu(name)})"

    def before(case: str) -> str:
        return "{:g} / {:g}".format(*BASELINE_MS[case])

    lines = []
    for fmt, target in STDIO_TARGETS_MS.items():
        sdk, bare = timings[f"stdio {fmt}"].p50, timings[f"raw {fmt}"].p50
        met = "/".join("yes" if e2e <= target else "NO" for e2e in (sdk, bare))
        lines.append(
            f"| {fmt} | {sdk:.2f} (CPU {cpu(f'stdio {fmt}')}) | {bare:.2f} (server CPU {server_cpu(f'raw {fmt}')}) | "
            f"{on_sdk(f'sdk {fmt}')} | {before(fmt)} | {target:g} | {met} | "
            f"{ms(f'new {fmt}')} (CPU {cpu(f'new {fmt}')}) | {ms(f'old {fmt}')} (CPU {cpu(f'old {fmt}')}) | "
            f"{ms('floor')} (CPU {cpu('floor')}) | {ms('raw floor')} (server CPU {server_cpu('raw floor')}) | "
            f"{on_sdk('sdk floor')} | {before('floor')} |"
        )
    lines.append(
        "\nscreenshots served from the unchanged-screen cache: "
        f"{cached + raw.cached + sdk_transport.cached + (0 if ts is None else ts.cached)} of "
        f"{(6 if ts is None else 8) * (runs + 2)}"
    )
    return lines + _ts_rows(ts, timings, runs) + _dispatch_rows(timings, server_cpu_ms)


def _dispatch_rows(timings: dict[str, Timing], server_cpu_ms: Callable[[str], float]) -> list[str]:
    """The server's CPU per call over stdio (bare JSON-RPC client) beside the same tool call's in
    process: what is left is the MCP SDK's dispatch (its read loop, request context, middleware,
    params and result checks) and the transport (the line read, parsed, written)."""
    lines = [
        "\n#### where the server's time goes: its CPU per call, p50 ms\n",
        "| call | over MCP stdio: the server's CPU (bare JSON-RPC client) | in process: the tool call "
        "(`DeskrigServer.call`), CPU | the rest: the MCP SDK's dispatch and the transport |",
        "|---|---:|---:|---:|",
    ]
    for call, over_stdio, in_process in (
        ("get_screen_size", "raw floor", "call floor"),
        *((f"screenshot_screen {fmt}", f"raw {fmt}", f"call {fmt}") for fmt in STDIO_TARGETS_MS),
    ):
        served = server_cpu_ms(over_stdio)
        tool = timings[in_process].cpu().p50
        lines.append(f"| {call} | {served:.2f} | {tool:.2f} | {served - tool:.2f} |")
    return lines


def _ts_rows(ts: ts_client.TsClient | None, timings: dict[str, Timing], runs: int) -> list[str]:
    """The same calls through the TypeScript SDK's Client (Node's clock around each awaited
    ``callTool``), measured in the same rounds, beside the Python clients' figures."""
    title = "\n#### the same run through the TypeScript SDK's Client (Node 22; ajv checks each result)\n"
    if ts is None:
        return [title, str(ts_client.missing())]

    def ms(series: str) -> Timing:
        return ts.timing(series, runs, series)

    floor = ms("ts floor")
    lines = [
        title,
        "| format | MCP stdio, TypeScript SDK Client, p50 (p95) | of which its outputSchema check | "
        "target | met | MCP stdio, SDK client (Python), same run | bare JSON-RPC, same run | floor: "
        "get_screen_size, TypeScript SDK Client, p50 (p95) |",
        "|---|---:|---:|---:|:-:|---:|---:|---:|",
    ]
    for fmt, target in STDIO_TARGETS_MS.items():
        shot = ms(f"ts {fmt}")
        check = ts.check_timing(f"ts {fmt}", runs, "check").p50
        lines.append(
            f"| {fmt} | {shot.p50:.2f} ({shot.p95:.2f}) | {check:.3f} | {target:g} | "
            f"{'yes' if shot.p50 <= target else 'NO'} | {timings[f'stdio {fmt}'].p50:.2f} | "
            f"{timings[f'raw {fmt}'].p50:.2f} | {floor.p50:.2f} ({floor.p95:.2f}) |"
        )
    return lines


def _encoders_at_the_limit(runs: int) -> None:
    with (
        Rig(RigOptions(size="1280x800", app=DEMO_APP, a11y=False)) as rig,
        open_desktop("x11", rig.display) as desktop,
    ):
        compileall.compile_dir(Path(deskrig.__file__).parent, quiet=1)  # as an installed server has
        load_before = os.getloadavg()
        lines = _limit_rows(desktop, rig.display, runs)
        load_after = os.getloadavg()
        whole_change = _whole_change_rows(desktop, runs)
    out = sys.stdout
    out.write(f"\n### full screen 1280x800 over MCP stdio ({DEMO_APP[0]}, {runs} runs, p50 ms)\n\n")
    out.write(
        "Load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}, after: {:.2f} {:.2f} {:.2f}. CPU: the "
        "calling process's (an MCP client's, or the in-process encoder's) or, for bare JSON-RPC, the "
        "server's, per call.\n\n".format(*load_before, *load_after)
    )
    out.write("| format | MCP stdio, SDK client | MCP stdio, bare JSON-RPC | bare, on the SDK's transport | ")
    out.write(
        "stop 23: SDK / bare | target | met (SDK/bare) | in process: grab + encode | in process: old "
        "Pillow path | floor: get_screen_size, SDK client | floor, bare JSON-RPC | floor, bare, on the "
        "SDK's transport | floor, stop 23: SDK / bare |\n"
    )
    out.write("|---|---:|---:|---:|---:|---:|:-:|---:|---:|---:|---:|---:|---:|\n")
    out.write("\n".join(lines + whole_change) + "\n")
    out.flush()


def _whole_change_rows(desktop: Desktop, runs: int) -> list[str]:
    """A JPEG of a screen whose every band changed since the last one (the grab, and the same
    grab scrolled by half a band, in turn), in process: with TurboJPEG's helper threads, and in
    the calling thread alone. Alternated run by run: both meet the same load."""
    grab = desktop.grab(desktop.screen_bounds())
    rows = bytes(grab.bgrx or b"")
    shift = grab.width * 4 * 8
    frames = [
        Grab.from_bgrx(bytearray(rows), *grab.size),
        Grab.from_bgrx(bytearray(rows[shift:] + rows[:shift]), *grab.size),
    ]
    alone = turbojpeg.Helpers(0)
    turns = itertools.count()

    def encode(helpers: turbojpeg.Helpers | None) -> None:
        frame = frames[next(turns) % 2]
        assert frame.bgrx is not None
        turbojpeg.encode_bgrx(frame, frame.bgrx, 80, helpers)

    timings = anyio.run(
        measure_interleaved,
        [
            ("helpers", awaitable(functools.partial(encode, None))),
            ("alone", awaitable(functools.partial(encode, alone))),
        ],
        runs,
    )
    shared, single = timings
    return [
        f"\n#### a whole-screen change, JPEG q80 in process ({runs} runs, p50 ms; every band encoded anew)\n",
        "| TurboJPEG's helper threads | with them: wall (CPU) | the calling thread alone: wall (CPU) |",
        "|---:|---:|---:|",
        f"| {turbojpeg.shared_helpers.count} | {shared.p50:.2f} ({shared.cpu().p50:.2f}) | {single.p50:.2f} ({single.cpu().p50:.2f}) |",
    ]
