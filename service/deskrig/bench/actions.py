"""Action benchmark: click round trip, get_app_state and type_text against the tools peers use
(xdotool + ImageMagick ``import``, a pyatspi tree walk), measured side by side in one run; and
tools/list through a 2026-07-28 client, from its cache against over the wire."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import methods

from deskrig.bench import ts_client
from deskrig.bench.over_http import BareMcp, serving
from deskrig.bench.stats import (
    Row,
    Timing,
    awaitable,
    measure,
    measure_async,
    measure_interleaved,
    print_table,
)
from deskrig.client import connect, quick_validator, rig_http_client
from deskrig.config import load_settings
from deskrig.desktop import open_desktop
from deskrig.identity import ClientRef
from deskrig.rig import Rig, RigOptions
from deskrig.server import DeskrigServer, describe_tools
from deskrig.serving import build_server
from deskrig.tools import CallInfo, ToolResult
from deskrig.tools.targets import a11y_of

SYSTEM_PYTHON = "/usr/bin/python3"
SDK_CHECKS = "mcp.Client (checks the result against the outputSchema)"
SDK_APP_STATE = f"get_app_state over MCP/HTTP, {SDK_CHECKS}"
#: get_app_state asked for its elements' data too (``include_elements``, off by default).
APP_STATE_ELEMENTS = "get_app_state with include_elements=true over MCP/HTTP"
SDK_APP_STATE_ELEMENTS = f"{APP_STATE_ELEMENTS}, {SDK_CHECKS}"
QUICK_CLIENT = "deskrig.client (an mcp.Client whose check is jsonschema-rs first: the client extra)"
TS_APP_STATE = "get_app_state over MCP/HTTP, TypeScript SDK Client (Node 22; checks the result against the outputSchema, ajv)"
TS_FLOOR = "per-call floor: get_screen_size over MCP/HTTP, TypeScript SDK Client"
TEXT_100 = ("The quick brown fox jumps over the lazy dog. " * 3)[:100]

#: A pyatspi walk of one app's tree (role, name, states, extents per node), once per line read
#: from stdin, timed inside the process so that neither interpreter start-up nor the pipe is
#: counted: writes each walk's node count and milliseconds as a JSON line.
PYATSPI_WALKER = textwrap.dedent(
    """
    import json, sys, time
    import pyatspi
    from gi.repository import GLib
    pid = int(sys.argv[1])
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
    context = GLib.MainContext.default()
    for _ in sys.stdin:
        # What a pyatspi client's main loop does while it waits: handle the events the app sent
        # meanwhile (a walk would otherwise sift through the backlog first).
        while context.iteration(False):
            pass
        started = time.perf_counter()
        nodes = walk(app)
        sys.stdout.write(json.dumps({"nodes": nodes, "ms": (time.perf_counter() - started) * 1000}) + "\\n")
        sys.stdout.flush()
    """
)


async def call_tool(server: DeskrigServer, tool: str, arguments: dict[str, Any]) -> Any:
    spec = server.tools[tool]
    result = await server.call(spec, arguments, CallInfo(ClientRef("bench")))
    assert not result.is_error, result.structured_content
    return result.structured_content


class PyatspiWalker:
    """The peer: a system Python with pyatspi walking the app's tree on request (round-robin with
    deskrig's cases, so that both meet the same load on a shared machine)."""

    def __init__(self, env: dict[str, str], pid: int) -> None:
        self._process = subprocess.Popen(
            [SYSTEM_PYTHON, "-c", PYATSPI_WALKER, str(pid)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.samples_ms: list[float] = []
        self.nodes = 0

    def walk(self) -> None:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write("walk\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the pyatspi walker exited ({self._process.wait(10)})")
        report = json.loads(line)
        self.samples_ms.append(report["ms"])
        self.nodes = report["nodes"]

    def close(self) -> None:
        if self._process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):  # it has exited already
                self._process.stdin.close()
        self._process.wait(10)


async def _skip_output_check(name: str, result: types.CallToolResult) -> None:
    """Stands in for ``ClientSession.validate_tool_result``: what ``mcp.Client`` costs without it."""


def _over_mcp(
    server: DeskrigServer, env: dict[str, str], pid: int, runs: int
) -> tuple[Timing, list[Timing], list[Timing]]:
    """The pyatspi walk and get_app_state through a bare JSON-RPC client, through ``mcp.Client``,
    through ``deskrig.client`` and through the TypeScript SDK's ``Client`` (and each one's per-call
    floor), and the same asked for the elements' data too (through ``mcp.Client`` also without its
    output schema check), one after the other in every round. Returned: the walk; the rest as
    timed here, ``mcp.Client``'s checked call of the elements first; last, the TypeScript client's
    rows, as Node timed them (none where it cannot run)."""
    arguments = {"pid": pid}  # the default answer: the text rendering alone
    with_elements = {**arguments, "include_elements": True}
    with (
        serving(server) as url,
        BareMcp(url) as bare,
        BareMcp(url, stateless=True) as stateless,
        contextlib.ExitStack() as stack,
    ):
        ts = (
            None
            if ts_client.missing()
            else stack.enter_context(ts_client.TsClient(ts_client.HttpTarget(url=url)))
        )
        ts_cases = (
            []
            if ts is None
            else [
                (TS_APP_STATE, ts.case(TS_APP_STATE, "get_app_state", arguments)),
                (TS_FLOOR, ts.case(TS_FLOOR, "get_screen_size", {})),
            ]
        )

        async def run(walker: PyatspiWalker) -> list[Timing]:
            async with (
                connect(url, quick_checks=False) as client,
                connect(url) as quick,
                connect(url, quick_checks=False) as unchecked,
            ):
                unchecked.session.validate_tool_result = _skip_output_check  # type: ignore[method-assign]

                async def sdk(tool: str, args: dict[str, Any]) -> None:
                    result = await client.call_tool(tool, args)
                    assert not result.is_error, result

                async def sdk_quick(args: dict[str, Any]) -> None:
                    result = await quick.call_tool("get_app_state", args)
                    assert not result.is_error and result.structured_content, result

                async def sdk_unchecked() -> None:
                    result = await unchecked.call_tool("get_app_state", with_elements)
                    assert not result.is_error and result.structured_content, result

                return await measure_interleaved(
                    [
                        # mcp.Client's checked call of the elements comes right before the peer:
                        # its pure-Python check (~4,000 values) leaves the next call in this process
                        # ~1.5 ms slower (an unchecked get_app_state 8.5 -> 10.1 ms p50), and the
                        # peer's walk is timed by its own clock in its own process.
                        (SDK_APP_STATE_ELEMENTS, lambda: sdk("get_app_state", with_elements)),
                        ("peer", awaitable(walker.walk)),
                        (
                            "get_app_state over MCP/HTTP, bare JSON-RPC client",
                            awaitable(lambda: bare.call("get_app_state", arguments)),
                        ),
                        (
                            "per-call floor: get_screen_size, bare JSON-RPC client",
                            awaitable(lambda: bare.call("get_screen_size", {})),
                        ),
                        (SDK_APP_STATE, lambda: sdk("get_app_state", arguments)),
                        (f"get_app_state over MCP/HTTP, {QUICK_CLIENT}", lambda: sdk_quick(arguments)),
                        (
                            "per-call floor: get_screen_size over MCP/HTTP, mcp.Client",
                            lambda: sdk("get_screen_size", {}),
                        ),
                        (
                            "get_app_state over MCP/HTTP, bare JSON-RPC client, stateless (2026-07-28) calls",
                            awaitable(lambda: stateless.call("get_app_state", arguments)),
                        ),
                        (
                            f"{APP_STATE_ELEMENTS}, bare JSON-RPC client",
                            awaitable(lambda: bare.call("get_app_state", with_elements)),
                        ),
                        (f"{APP_STATE_ELEMENTS}, {QUICK_CLIENT}", lambda: sdk_quick(with_elements)),
                        (f"{APP_STATE_ELEMENTS}, mcp.Client without its outputSchema check", sdk_unchecked),
                        *ts_cases,
                    ],
                    runs,
                )

        walker = PyatspiWalker(env, pid)
        try:
            timings = anyio.run(run, walker)
        finally:
            walker.close()
    # The walker's own clock: neither the pipe nor the Python start-up is the peer's cost.
    warmup = len(walker.samples_ms) - runs
    peer = Timing(f"peer: pyatspi walk ({walker.nodes} nodes)", walker.samples_ms[warmup:])
    # Node's own clock, for the same reason.
    ts_timings = (
        []
        if ts is None
        else [
            ts.timing(TS_APP_STATE, runs, TS_APP_STATE),
            ts.check_timing(
                TS_APP_STATE,
                runs,
                "of which the TypeScript Client's outputSchema check (ajv), run again in Node",
            ),
            ts.timing(TS_FLOOR, runs, TS_FLOOR),
        ]
    )
    sdk_timing, _peer_as_timed_here, *others = timings[: len(timings) - len(ts_cases)]
    return peer, [sdk_timing, *others], ts_timings


def app_state_rows(runs: int) -> list[Row]:
    """get_app_state on gtk3-widget-factory in process and over MCP/HTTP, against a pyatspi walk."""
    with Rig(RigOptions(app=["gtk3-widget-factory"])) as rig:
        status = rig.status()
        assert status.app_pid is not None
        pid = status.app_pid
        with open_desktop("x11", rig.display) as desktop:
            server = build_server(
                desktop, load_settings(env={}), session_bus=rig.env["DBUS_SESSION_BUS_ADDRESS"]
            )

            async def run() -> Timing:
                state = await call_tool(server, "get_app_state", {"pid": pid})
                sources: list[str] = []  # per read: "mirror", or "fetch" when it fetched the whole tree

                async def read() -> None:
                    sources.append((await call_tool(server, "get_app_state", {"pid": pid}))["source"])

                timing = await measure_async("", read, runs)
                wholes = f"{sources.count('fetch')} of {len(sources)} reads fetched the whole tree"
                name = f"get_app_state, in process ({state['element_count']} elements, live mirror; {wholes})"
                return replace(timing, name=name)

            async def fetched() -> Timing:
                name = "get_app_state, in process, refresh=true (bulk fetch)"
                arguments = {"pid": pid, "refresh": True}
                return await measure_async(name, lambda: call_tool(server, "get_app_state", arguments), runs)

            ours = anyio.run(run)
            whole = anyio.run(fetched)
            structured = anyio.run(call_tool, server, "get_app_state", {"pid": pid, "include_elements": True})
            checked, quick_checked = _output_checks(server, structured, runs)
            parsed = _result_parse(server, pid, runs)
            parts = _breakdown(server, pid, runs)
            (
                peer,
                (
                    sdk_elements,
                    bare,
                    bare_floor,
                    sdk,
                    quick,
                    sdk_floor,
                    bare_stateless,
                    bare_elements,
                    quick_elements,
                    unchecked_elements,
                ),
                ts_timings,
            ) = _over_mcp(server, {**os.environ, **rig.env}, pid, runs)
            listing = _listing_rows(server, runs)
    return [
        Row(peer),
        Row(ours, peer, 20.0),
        Row(whole, peer),
        # The default answer (the text rendering), through each client.
        Row(bare, peer, 20.0),
        # Server and client share this process: its CPU per call is what both spent, whatever the load.
        Row(bare.cpu()),
        Row(bare_floor),
        Row(bare_stateless, peer, 20.0),
        *(Row(part) for part in parts),
        Row(sdk, peer, 20.0),
        Row(sdk.cpu()),
        Row(parsed),
        Row(quick, peer, 20.0),
        Row(sdk_floor),
        *(Row(timing, peer, 20.0) if timing.name == TS_APP_STATE else Row(timing) for timing in ts_timings),
        # Asked for the elements' data too: ~4,000 more values for a client to check.
        Row(bare_elements, peer, 20.0),
        Row(sdk_elements, peer, 20.0),
        Row(sdk_elements.cpu()),
        # The SDK client's check apart: its pure-Python check against jsonschema-rs's, and the
        # call without it.
        Row(checked),
        Row(quick_elements, peer, 20.0),
        Row(quick_elements.cpu()),
        Row(quick_checked),
        Row(unchecked_elements, peer),
        Row(unchecked_elements.cpu()),
        *listing,
    ]


def _listing_rows(server: DeskrigServer, runs: int) -> list[Row]:
    """tools/list as an agent's host asks for it before a turn, through ``mcp.Client`` on the
    2026-07-28 protocol: over the wire (past its cache), and from its cache, which the listing's
    ``ttlMs`` lets it keep (``deskrig.mcp_face.CACHE_HINTS``), alternated."""

    async def run(url: str) -> list[Timing]:
        async with rig_http_client() as http, Client(streamable_http_client(url, http_client=http)) as client:
            assert client.session.protocol_version == "2026-07-28", client.session.protocol_version
            await client.list_tools()
            return await measure_interleaved(
                [
                    (
                        "tools/list over MCP/HTTP, mcp.Client on 2026-07-28, past its cache",
                        lambda: client.list_tools(cache_mode="bypass"),
                    ),
                    ("tools/list, the same client, from its cache (ttlMs)", client.list_tools),
                ],
                runs,
            )

    with serving(server) as url:
        wire, cached = anyio.run(run, url)
    return [Row(wire), Row(cached, wire)]


def _breakdown(server: DeskrigServer, pid: int, runs: int) -> list[Timing]:
    """Where a get_app_state call's time goes, each part timed apart in process on the call's real
    data: the tool's handler (the mirror read and the rest), the text rendering, deskrig's result
    (JSON data and its JSON as the text block), the SDK's dump and spec check of it, the HTTP
    transport's JSON encoding and the client's parse of that."""
    spec = server.tools["get_app_state"]
    args = spec.input_model.model_validate({"pid": pid})
    call = CallInfo(ClientRef("bench"))

    async def handler() -> tuple[Timing, Timing, ToolResult]:
        handled = await measure_async(
            "of which the tool's handler (mirror read, text rendering, model)",
            lambda: spec.handler(server.services, call, args),
            runs,
        )
        snapshot = await (await a11y_of(server.services).client()).snapshot(pid)
        rendered = measure(
            "the text rendering of every element (the tool renders those its last state did not hold)",
            snapshot.render_text,
            runs,
        )
        return handled, rendered, await spec.handler(server.services, call, args)

    handled, rendered, result = anyio.run(handler)
    wire = server.success_result(spec, result)
    version = "2025-06-18"  # the bare client's
    sieved = methods.serialize_server_result(
        "tools/call", version, wire.model_dump(by_alias=True, mode="json", exclude_none=True)
    )
    response = types.JSONRPCResponse(jsonrpc="2.0", id=1, result=sieved)
    body = response.model_dump_json(by_alias=True, exclude_unset=True)
    return [
        handled,
        rendered,
        measure(
            "of which deskrig's result (JSON data + its JSON text block)",
            lambda: server.success_result(spec, result),
            runs,
        ),
        measure(
            # deskrig.server.hand_over_structured_content: the check sees an empty placeholder.
            "of which the SDK's dump and spec check of the result (its structured content held back)",
            lambda: methods.serialize_server_result(
                "tools/call",
                version,
                {**wire.model_dump(by_alias=True, mode="json", exclude_none=True), "structuredContent": {}},
            ),
            runs,
        ),
        measure(
            f"of which the transport's JSON encoding ({len(body) // 1000} kB)",
            lambda: response.model_dump_json(by_alias=True, exclude_unset=True),
            runs,
        ),
        measure("of which the client's JSON parse", lambda: json.loads(body), runs),
    ]


def _result_parse(server: DeskrigServer, pid: int, runs: int) -> Timing:
    """What ``mcp.Client`` spends turning one get_app_state result (as JSON data off the wire) into
    its pydantic ``CallToolResult``, apart from the protocol."""
    spec = server.tools["get_app_state"]
    call = CallInfo(ClientRef("bench"))

    async def wire() -> dict[str, Any]:
        args = spec.input_model.model_validate({"pid": pid})
        result = server.success_result(spec, await spec.handler(server.services, call, args))
        dumped: dict[str, Any] = json.loads(result.model_dump_json(by_alias=True, exclude_none=True))
        return dumped

    data = anyio.run(wire)
    return measure(
        "of which the client's pydantic parse of the result (CallToolResult), in process",
        lambda: types.CallToolResult.model_validate(data),
        runs,
    )


def _output_checks(server: DeskrigServer, structured: Any, runs: int) -> tuple[Timing, Timing]:
    """What a client spends checking one get_app_state result with its elements against the tool's
    output schema, apart from the protocol: ``mcp.Client``'s ``jsonschema`` (compiled once, as the
    SDK does), and jsonschema-rs, which ``deskrig.client`` asks first."""
    from jsonschema import Draft202012Validator  # what the SDK picks for a schema without $schema
    from referencing import Registry

    schema = describe_tools([server.tools["get_app_state"]])[0].output_schema
    assert schema is not None
    validator = Draft202012Validator(schema, registry=Registry())
    quick = quick_validator(schema)

    def check() -> None:
        assert validator.is_valid(structured)

    def check_quickly() -> None:
        assert quick.is_valid(structured)

    return (
        measure("of which mcp.Client's outputSchema check (jsonschema), in process", check, runs),
        measure(
            "of which deskrig.client's outputSchema check (jsonschema-rs), in process", check_quickly, runs
        ),
    )


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
    rows = app_state_rows(runs) + _input(runs)
    print_table(f"actions vs peers ({runs} runs, load average {os.getloadavg()[0]:.1f})", rows)
    if absent := ts_client.missing():
        sys.stdout.write(f"\nget_app_state through the TypeScript SDK's Client: {absent}\n")
