"""The TypeScript SDK's Client as the benchmarks drive it (deskrig.bench.ts_client): it times real
calls to a real rig over HTTP and stdio, and its outputSchema check really runs (a result off the
schema fails the call)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from deskrig.bench import stdio, ts_client
from deskrig.bench.over_http import serving
from deskrig.config import load_settings
from deskrig.desktop import open_desktop
from deskrig.rig import Rig, RigOptions
from deskrig.serving import build_server

#: A stdio MCP server in bare JSON-RPC lines with one tool, ``count``, whose output schema wants an
#: integer ``n``; every call returns the structured content given as its argument.
STAND_IN = """
import json, sys
structured = json.loads(sys.argv[1])
results = {
    "initialize": lambda params: {
        "protocolVersion": params["protocolVersion"],
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "stand-in", "version": "1"},
    },
    "tools/list": lambda params: {"tools": [{
        "name": "count",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    }]},
    "tools/call": lambda params: {
        "content": [{"type": "text", "text": json.dumps(structured)}], "structuredContent": structured,
    },
}
for line in sys.stdin:
    message = json.loads(line)
    if "id" in message:
        result = results[message["method"]](message.get("params"))
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def stand_in(structured: dict[str, object]) -> ts_client.StdioTarget:
    return ts_client.StdioTarget(
        command=sys.executable, args=["-c", STAND_IN, json.dumps(structured)], env={}
    )


def test_a_result_on_the_output_schema_is_timed() -> None:
    with ts_client.TsClient(stand_in({"n": 3})) as client:
        assert client.tools == ["count"], "listTools cached the tool's validator"
        client.call("count", "count", {})
    assert len(client.samples_ms["count"]) == 1 and client.samples_ms["count"][0] > 0
    assert client.check_ms["count"][0] > 0


def test_a_result_off_the_output_schema_fails_the_call() -> None:
    with (
        ts_client.TsClient(stand_in({"n": "three"})) as client,
        pytest.raises(ts_client.TsClientError, match="does not match the tool's output schema"),
    ):
        client.call("count", "count", {})
    assert "count" not in client.samples_ms


def test_without_node_the_client_says_it_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert ts_client.missing() is None, "scripts/setup installs Node 22 and the SDK"
    monkeypatch.setattr(ts_client, "NODE", tmp_path / "node")
    assert (
        ts_client.missing()
        == f"not measured: Node 22 is not at {tmp_path / 'node'} (scripts/setup installs it)"
    )


@pytest.mark.slow
def test_get_app_state_over_http_and_get_screen_size_over_stdio_on_a_real_rig() -> None:
    with Rig(RigOptions(app=["gtk3-widget-factory"])) as rig:
        pid = rig.status().app_pid
        assert pid is not None
        with open_desktop("x11", rig.display) as desktop:
            server = build_server(
                desktop, load_settings(env={}), session_bus=rig.env["DBUS_SESSION_BUS_ADDRESS"]
            )
            with serving(server) as url, ts_client.TsClient(ts_client.HttpTarget(url=url)) as over_http:
                assert {"get_app_state", "get_screen_size", "screenshot_screen"} <= set(over_http.tools)
                for _ in range(2):
                    over_http.call("state", "get_app_state", {"pid": pid})
        argv = [*stdio.DESKRIG, "--display", rig.display]
        target = ts_client.StdioTarget(
            command=argv[0], args=argv[1:], env={**os.environ, "DISPLAY": rig.display}
        )
        with ts_client.TsClient(target) as over_stdio:
            over_stdio.call("floor", "get_screen_size", {})
    state = over_http.timing("state", 2, "get_app_state")
    assert len(state.samples_ms) == 2 and state.p50 > 0
    assert len(over_http.check_ms["state"]) == 2 and min(over_http.check_ms["state"]) > 0
    assert over_stdio.timing("floor", 1, "get_screen_size").p50 > 0
