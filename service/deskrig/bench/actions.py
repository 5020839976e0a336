"""Action benchmark: click round trip, get_app_state and type_text against the tools peers use
(xdotool + ImageMagick ``import``, a pyatspi tree walk), measured side by side in one run."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from typing import Any

import anyio

from deskrig.bench.over_http import over_http, over_http_bare
from deskrig.bench.stats import Row, Timing, measure, measure_async, print_table
from deskrig.config import load_settings
from deskrig.desktop import open_desktop
from deskrig.identity import ClientRef
from deskrig.rig import Rig, RigOptions
from deskrig.server import DeskrigServer
from deskrig.serving import build_server
from deskrig.tools import CallInfo

SYSTEM_PYTHON = "/usr/bin/python3"
TEXT_100 = ("The quick brown fox jumps over the lazy dog. " * 3)[:100]

#: A pyatspi walk of one app's tree (role, name, states, extents per node), timed inside the
#: process so that interpreter start-up is not counted. Prints the samples as JSON.
PYATSPI_WALK = textwrap.dedent(
    """
    import json, sys, time
    import pyatspi
    pid, runs = int(sys.argv[1]), int(sys.argv[2])
    def walk(node):
        count = 1
        node.getRole(); node.name; node.getState()
        try:
            node.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        except NotImplementedError:
            pass
        for child in node:
            if child is not None:
                count += walk(child)
        return count
    app = next(a for a in pyatspi.Registry.getDesktop(0) if a is not None and a.get_process_id() == pid)
    samples, nodes = [], 0
    for _ in range(runs + 2):
        started = time.perf_counter()
        nodes = walk(app)
        samples.append((time.perf_counter() - started) * 1000)
    sys.stdout.write(json.dumps({"samples": samples[2:], "nodes": nodes}))
    """
)


async def call_tool(server: DeskrigServer, tool: str, arguments: dict[str, Any]) -> Any:
    spec = server.tools[tool]
    result = await server.call(spec, arguments, CallInfo(ClientRef("bench")))
    assert not result.is_error, result.structured_content
    return result.structured_content


def _pyatspi_walk(env: dict[str, str], pid: int, runs: int) -> Timing:
    out = subprocess.run(
        [SYSTEM_PYTHON, "-c", PYATSPI_WALK, str(pid), str(runs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout)
    return Timing(f"peer: pyatspi walk ({report['nodes']} nodes)", report["samples"])


def _widget_factory(runs: int) -> list[Row]:
    with Rig(RigOptions(app=["gtk3-widget-factory"])) as rig:
        env = {**os.environ, **rig.env}
        status = rig.status()
        assert status.app_pid is not None
        pid = status.app_pid
        peer = _pyatspi_walk(env, pid, runs)
        with open_desktop("x11", rig.display) as desktop:
            server = build_server(
                desktop, load_settings(env={}), session_bus=rig.env["DBUS_SESSION_BUS_ADDRESS"]
            )

            async def run() -> Timing:
                state = await call_tool(server, "get_app_state", {"pid": pid})
                name = f"get_app_state, in process ({state['element_count']} elements, live mirror)"
                return await measure_async(
                    name, lambda: call_tool(server, "get_app_state", {"pid": pid}), runs
                )

            async def fetched() -> Timing:
                name = "get_app_state, in process, refresh=true (bulk fetch)"
                arguments = {"pid": pid, "refresh": True}
                return await measure_async(name, lambda: call_tool(server, "get_app_state", arguments), runs)

            ours = anyio.run(run)
            whole = anyio.run(fetched)
            over_mcp = over_http(
                server, "get_app_state", {"pid": pid}, "get_app_state over MCP/HTTP (live mirror)", runs
            )
            floor = over_http(
                server, "get_screen_size", {}, "per-call floor: get_screen_size over MCP/HTTP", runs
            )
            bare = over_http_bare(
                server,
                "get_app_state",
                {"pid": pid},
                "get_app_state over MCP/HTTP, bare JSON-RPC client",
                runs,
            )
            bare_floor = over_http_bare(
                server, "get_screen_size", {}, "per-call floor: get_screen_size, bare JSON-RPC client", runs
            )
    return [
        Row(peer),
        Row(ours, peer, 20.0),
        Row(whole, peer),
        Row(over_mcp, peer, 20.0),
        Row(floor),
        Row(bare, peer, 20.0),
        Row(bare_floor),
    ]


def _input(runs: int) -> list[Row]:
    with Rig(RigOptions(app=["xterm", "-e", "cat > /dev/null"], a11y=False)) as rig:
        env = {**os.environ, **rig.env}
        with open_desktop("x11", rig.display) as desktop:
            server = build_server(
                desktop, load_settings(env={}, overrides={"reuse_unchanged_captures": False})
            )
            window = desktop.windows()[0]
            x, y = window.bounds.x + 20, window.bounds.y + 20
            peer_click = measure(
                "peer: xdotool click + import",
                lambda: subprocess.run(
                    f"xdotool mousemove {x} {y} click 1 && import -window root png:- > /dev/null",
                    shell=True,
                    env=env,
                    check=True,
                ),
                runs,
            )
            peer_type = measure(
                "peer: xdotool type, 100 chars (default 12 ms delay)",
                lambda: subprocess.run(["xdotool", "type", TEXT_100], env=env, check=True),
                max(3, runs // 5),
            )

            async def run() -> tuple[Timing, Timing]:
                args = {"x": x, "y": y, "include_screenshot": True}
                click = await measure_async(
                    "click + after-screenshot", lambda: call_tool(server, "click", args), runs
                )
                typing = await measure_async(
                    "type_text, 100 chars",
                    lambda: call_tool(server, "type_text", {"text": TEXT_100}),
                    max(3, runs // 5),
                )
                return click, typing

            click, typing = anyio.run(run)
    return [Row(peer_click), Row(click, peer_click, 5.0), Row(peer_type), Row(typing, peer_type, 1.0)]


def run(runs: int) -> None:
    print_table(f"actions vs peers ({runs} runs)", _widget_factory(runs) + _input(runs))
