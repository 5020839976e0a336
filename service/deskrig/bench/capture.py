"""Capture benchmark: ``screenshot_screen`` in process and over MCP/HTTP against peer servers'
per-capture cost: spawning ``import -window root png:-`` and ``xwd -root | convert``; and the
encoders at the limit: full-screen PNG and JPEG q80 over MCP stdio (through the MCP SDK's client,
and in bare JSON-RPC lines with the server's CPU time per call) beside the in-process grab +
encode, the old Pillow path (BGRX->RGB copy, Pillow's encoders) in the same run, the per-call
floor (``get_screen_size`` over the same transport) and the load average.
"""

from __future__ import annotations

import compileall
import functools
import io
import itertools
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from PIL import Image

import deskrig
from deskrig import imaging
from deskrig.bench.over_http import over_http
from deskrig.bench.stats import (
    Row,
    Timing,
    awaitable,
    measure,
    measure_async,
    measure_interleaved,
    print_table,
)
from deskrig.bench.stdio import StdioPeer, initialize
from deskrig.config import load_settings
from deskrig.desktop import Desktop, open_desktop
from deskrig.grabs import Grab
from deskrig.identity import ClientRef
from deskrig.model import Bounds
from deskrig.rig import Rig, RigOptions
from deskrig.server import DeskrigServer
from deskrig.serving import build_server
from deskrig.tools import CallInfo

SIZES = ("1280x800", "1920x1080")
#: A busy, realistic desktop to encode; xterm when GTK's demo is not installed.
DEMO_APP = ["gtk3-widget-factory"] if shutil.which("gtk3-widget-factory") else ["xterm"]


def screenshot_call(
    server: DeskrigServer, arguments: dict[str, Any], tool: str = "screenshot_screen"
) -> Callable[[], Awaitable[None]]:
    """A screenshot tool's handler called directly: capture, mask, encode, fit; no protocol."""
    spec = server.tools[tool]
    validated = spec.input_model.model_validate(arguments)

    async def call() -> None:
        result = await spec.handler(server.services, CallInfo(ClientRef("bench")), validated)
        assert result.images

    return call


def in_process(server: DeskrigServer, arguments: dict[str, Any], name: str, runs: int) -> Timing:
    return anyio.run(measure_async, name, screenshot_call(server, arguments), runs)


def peer_capture(command: str, env: dict[str, str]) -> Callable[[], None]:
    """A peer's per-capture cost: ``command`` run through the shell, PNG on its stdout."""

    def run() -> None:
        out = subprocess.run(command, shell=True, env=env, capture_output=True, check=True)
        assert out.stdout[:4] == b"\x89PNG"

    return run


def peer(name: str, command: str, env: dict[str, str], runs: int) -> Timing:
    return measure(name, peer_capture(command, env), runs)


def _over_http(server: DeskrigServer, arguments: dict[str, Any], name: str, runs: int) -> Timing:
    return over_http(server, "screenshot_screen", arguments, name, runs)


def _fresh_captures(size: str, runs: int) -> list[Row]:
    rows: list[Row] = []
    with Rig(RigOptions(size=size, app=DEMO_APP, a11y=False)) as rig:
        env = {**os.environ, **rig.env}
        imagemagick = peer(
            f"peer: import -window root png:- ({size})", "import -window root png:-", env, runs
        )
        xwd = peer(
            f"peer: xwd -root | convert ({size})", "xwd -root -silent | convert xwd:- png:-", env, runs
        )
        rows += [Row(imagemagick), Row(xwd, imagemagick)]
        # The damage cache is off: every capture grabs and encodes anew.
        settings = load_settings(env={}, overrides={"reuse_unchanged_captures": False})
        with open_desktop("x11", rig.display) as desktop:
            server = build_server(desktop, settings)
            for fmt, target in (("png", 5.0), ("jpeg", 20.0)):
                timing = in_process(server, {"format": fmt}, f"in-process {fmt} ({size})", runs)
                rows.append(Row(timing, imagemagick, target if size == "1280x800" else None))
            for fmt in ("png", "jpeg"):
                timing = _over_http(server, {"format": fmt}, f"MCP/HTTP {fmt} ({size})", runs)
                rows.append(Row(timing, imagemagick, 4.0 if (size, fmt) == ("1280x800", "png") else None))
    return rows


def _unchanged_screen(runs: int) -> list[Row]:
    """gtk3-widget-factory animates a spinner, so an idle xterm stands for an unchanged screen."""
    with Rig(RigOptions(size="1280x800", app=["xterm"], a11y=False)) as rig:
        env = {**os.environ, **rig.env}
        imagemagick = peer("peer: import -window root png:- (xterm)", "import -window root png:-", env, runs)
        settings = load_settings(env={}, overrides={"reuse_unchanged_captures": True})
        with open_desktop("x11", rig.display) as desktop:
            server = build_server(desktop, settings)
            cached = in_process(server, {}, "in-process png, unchanged screen (xterm)", runs)
            over_http = _over_http(server, {}, "MCP/HTTP png, unchanged screen (xterm)", runs)
    return [Row(imagemagick), Row(cached, imagemagick, 50.0), Row(over_http, imagemagick)]


#: End-to-end targets over MCP stdio, full screen 1280x800 on a changing screen (ms, p50).
STDIO_TARGETS_MS = {"png": 9.0, "jpeg": 5.0}


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


class _RawStdio:
    """``deskrig serve --stdio`` spoken to in bare JSON-RPC lines: the transport's own cost, without
    an MCP client's validation of every answer; the server's CPU time per call is read from the
    kernel's scheduler statistics (nanoseconds, all its threads)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.peer = StdioPeer(argv, env)
        initialize(self.peer)
        self.ids = itertools.count(10)
        self.server_cpu_ms: dict[str, list[float]] = {}
        self.cached = 0

    def _cpu_ms(self) -> float:
        tasks = Path(f"/proc/{self.peer.proc.pid}/task").glob("*/schedstat")
        return sum(int(task.read_text().split()[0]) for task in tasks) / 1e6

    def call(self, name: str, tool: str, arguments: dict[str, Any]) -> None:
        before = self._cpu_ms()
        answer = self.peer.request(next(self.ids), "tools/call", {"name": tool, "arguments": arguments})
        self.server_cpu_ms.setdefault(name, []).append(self._cpu_ms() - before)
        assert not answer["result"].get("isError"), answer
        self.cached += bool(answer["result"].get("structuredContent", {}).get("from_cache"))


def _limit_rows(desktop: Desktop, display: str, runs: int) -> list[str]:
    """Every case in turn, round after round (:func:`measure_interleaved`): on a shared machine a
    case measured a minute later is measured under another load. Each stdio case twice: through
    the MCP SDK's client, as an agent's host would call, and in bare JSON-RPC lines."""
    screen = desktop.screen_bounds()
    argv = [str(Path(sys.executable).parent / "deskrig"), "serve", "--stdio", "--display", display]
    env = {**os.environ, "DISPLAY": display}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)  # the venv's, like the tests
    cached = 0
    raw = _RawStdio(argv, env)

    async def run() -> list[Timing]:
        nonlocal cached
        async with Client(params) as client:

            async def call(tool: str, arguments: dict[str, Any]) -> None:
                nonlocal cached
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, result
                cached += bool((result.structured_content or {}).get("from_cache"))

            cases: list[tuple[str, Callable[[], Awaitable[object]]]] = [
                ("floor", functools.partial(call, "get_screen_size", {})),
                ("raw floor", awaitable(functools.partial(raw.call, "raw floor", "get_screen_size", {}))),
            ]
            # The spawned servers' cases first, then the in-process ones, whose old Pillow path
            # (tens of ms of CPU, megabytes allocated and freed) would otherwise come just before
            # one format's stdio calls and not the other's.
            for fmt in STDIO_TARGETS_MS:
                arguments = {"format": fmt}
                cases += [
                    (f"stdio {fmt}", functools.partial(call, "screenshot_screen", arguments)),
                    (
                        f"raw {fmt}",
                        awaitable(functools.partial(raw.call, f"raw {fmt}", "screenshot_screen", arguments)),
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
        raw.peer.close()

    def ms(name: str) -> str:
        return f"{timings[name].p50:.2f}"

    def cpu(name: str) -> str:  # the CPU time does not move with the machine's load
        return f"{timings[name].cpu().p50:.2f}"

    def server_cpu(name: str) -> str:
        return f"{statistics.median(raw.server_cpu_ms[name][-runs:]):.2f}"

    lines = []
    for fmt, target in STDIO_TARGETS_MS.items():
        sdk, bare = timings[f"stdio {fmt}"].p50, timings[f"raw {fmt}"].p50
        met = "/".join("yes" if e2e <= target else "NO" for e2e in (sdk, bare))
        lines.append(
            f"| {fmt} | {sdk:.2f} (CPU {cpu(f'stdio {fmt}')}) | {bare:.2f} (server CPU {server_cpu(f'raw {fmt}')}) | "
            f"{target:g} | {met} | {ms(f'new {fmt}')} (CPU {cpu(f'new {fmt}')}) | "
            f"{ms(f'old {fmt}')} (CPU {cpu(f'old {fmt}')}) | {ms('floor')} (CPU {cpu('floor')}) | "
            f"{ms('raw floor')} (server CPU {server_cpu('raw floor')}) |"
        )
    lines.append(
        f"\nscreenshots served from the unchanged-screen cache: {cached + raw.cached} of {4 * (runs + 2)}"
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
    out = sys.stdout
    out.write(f"\n### full screen 1280x800 over MCP stdio ({DEMO_APP[0]}, {runs} runs, p50 ms)\n\n")
    out.write(
        "Load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}, after: {:.2f} {:.2f} {:.2f}. CPU: the "
        "calling process's (an MCP client's, or the in-process encoder's) or, for bare JSON-RPC, the "
        "server's, per call.\n\n".format(*load_before, *load_after)
    )
    out.write("| format | MCP stdio, SDK client | MCP stdio, bare JSON-RPC | target | met (SDK/bare) | ")
    out.write(
        "in process: grab + encode | in process: old Pillow path | floor: get_screen_size, SDK client | "
    )
    out.write("floor, bare JSON-RPC |\n")
    out.write("|---|---:|---:|---:|:-:|---:|---:|---:|---:|\n")
    out.write("\n".join(lines) + "\n")
    out.flush()


def run(runs: int) -> None:
    _encoders_at_the_limit(runs)
    rows = [row for size in SIZES for row in _fresh_captures(size, runs)] + _unchanged_screen(runs)
    print_table(f"screenshot_screen vs peers ({DEMO_APP[0]} on screen, {runs} runs)", rows)
