"""stdio start: how soon ``deskrig serve --stdio`` answers, beside the MCP SDK's own import.

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
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deskrig
from deskrig.bench.reliability_rig import INITIALIZE
from deskrig.bench.stats import Timing
from deskrig.rig import Rig, RigOptions

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
