"""The stdio transport: stdout carries only the protocol; the MCP client speaks to it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from tests.server.conftest import GREEN
from tests.server.rigproc import DESKRIG, INITIALIZE, color_app


def test_stdio_stdout_carries_only_protocol(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    proc = subprocess.Popen(
        [*DESKRIG, "rig", "run", "--stdio", "--", *color_app("Stdio App", GREEN, log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.stdin and proc.stdout
    messages = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "list_windows", "arguments": {}},
        },
    ]
    for message in messages:
        proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    replies = [json.loads(proc.stdout.readline()) for _ in range(2)]
    proc.stdin.close()  # EOF: the runner ends and tears the rig down
    rest = proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    assert rest.strip() == b""
    assert replies[0]["id"] == 1 and replies[0]["result"]["serverInfo"]["name"] == "deskrig"
    titles = [w["title"] for w in replies[1]["result"]["structuredContent"]["windows"]]
    assert "Stdio App" in titles


def test_stdio_with_the_mcp_client(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    params = StdioServerParameters(
        command=DESKRIG[0],
        args=["rig", "run", "--stdio", "--", *color_app("Client App", GREEN, log)],
        env={**os.environ, "HOME": str(tmp_path)},
    )

    async def run() -> tuple[list[str], dict[str, object]]:
        async with Client(params) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            shot = await client.call_tool("screenshot_window", {"window_title": "client app"})
            return tools, shot.structured_content or {}

    tools, shot = anyio.run(run)
    assert {"list_windows", "screenshot_screen", "screenshot_window", "screenshot_region"} <= set(tools)
    assert "screenshot_capture_full" not in tools
    assert shot["window"]["title"] == "Client App"  # type: ignore[index]
