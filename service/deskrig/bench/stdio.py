"""stdio start: how soon ``deskrig serve --stdio`` answers, beside the MCP SDK's own import.

MCP clients spawn their stdio servers on every start and wait for ``initialize``. The floor is a
fresh Python importing what any server on the MCP SDK needs (``mcp.server.lowlevel`` and
``mcp.server.stdio``); each run times that, then spawns deskrig on the same display and times, from
the spawn, ``initialize``, then (as clients do next) ``tools/list`` and a first ``screenshot_screen``.
Floor and server alternate run by run, so both see the same machine load.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from deskrig.bench.reliability_rig import INITIALIZE
from deskrig.bench.stats import Timing
from deskrig.rig import Rig, RigOptions

DESKRIG = [str(Path(sys.executable).parent / "deskrig"), "serve", "--stdio"]
SDK_IMPORT = [sys.executable, "-c", "import mcp.server.lowlevel, mcp.server.stdio"]
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

    def since_spawn_ms(self) -> float:
        return (time.perf_counter() - self.spawned) * 1000

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


def _sdk_import_ms() -> float:
    started = time.perf_counter()
    subprocess.run(SDK_IMPORT, check=True)
    return (time.perf_counter() - started) * 1000


def _deskrig_start(env: dict[str, str]) -> tuple[float, float, float]:
    """Milliseconds from spawn to the initialize answer, then to tools/list's, then to the first
    screenshot's."""
    peer = StdioPeer(DESKRIG, env)
    try:
        initialize(peer)
        answered = peer.since_spawn_ms()
        tools = peer.request(2, "tools/list")
        assert tools["result"]["tools"], tools
        listed = peer.since_spawn_ms()
        shot = peer.request(3, "tools/call", {"name": "screenshot_screen", "arguments": {}})
        assert not shot["result"].get("isError"), shot
        return answered, listed, peer.since_spawn_ms()
    finally:
        peer.close()


def _row(name: str, timing: Timing, beside: str = "", target: float | None = None) -> str:
    met = "" if target is None else ("yes" if timing.p50 <= target else "NO")
    limit = "" if target is None else f"≤ {target:g}"
    return f"| {name} | {timing.p50:.0f} | {timing.p95:.0f} | {beside} | {limit} | {met} |\n"


def run(runs: int) -> None:
    runs = max(3, min(runs, 15))  # each run spawns two interpreters: seconds, not milliseconds
    floor: list[float] = []
    starts: list[tuple[float, float, float]] = []
    with Rig(RigOptions(size="1280x800", app=["xterm"], a11y=False)) as rig:
        env = {**os.environ, **rig.env}
        _deskrig_start(env)  # warm the page cache for both
        for _ in range(runs):
            floor.append(_sdk_import_ms())
            starts.append(_deskrig_start(env))
    sdk = Timing("MCP SDK import (python -c 'import mcp.server.lowlevel, mcp.server.stdio')", floor)
    init = Timing("deskrig serve --stdio: spawn → initialize", [s[0] for s in starts])
    over = Timing("initialize − SDK import, same run", [s[0] - f for s, f in zip(starts, floor, strict=True)])
    listed = Timing("initialize → tools/list", [s[1] - s[0] for s in starts])
    shot = Timing("initialize → tools/list + first screenshot_screen", [s[2] - s[0] for s in starts])
    out = sys.stdout
    out.write(f"\n### stdio start: deskrig serve --stdio beside the MCP SDK's import ({runs} runs)\n\n")
    out.write("| case | p50 ms | p95 ms | beside | target ms | met |\n|---|---:|---:|---|---:|:-:|\n")
    out.write(_row(sdk.name, sdk, "the floor"))
    out.write(_row(init.name, init, f"floor p50 {statistics.median(floor):.0f}"))
    out.write(_row(over.name, over, "paired per run", INITIALIZE_OVER_FLOOR_MS))
    out.write(_row(listed.name, listed))
    out.write(_row(shot.name, shot, "", FIRST_SCREENSHOT_MS))
    out.flush()
