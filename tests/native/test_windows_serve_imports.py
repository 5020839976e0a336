"""The MCP server loads without the Linux-only dependencies, as on Windows (and macOS) where pip
installs none of them: the tools build, and the accessibility tools answer A11Y_UNAVAILABLE.

Run in a fresh interpreter where importing dbus-fast, python-xlib, i3ipc or pywayland fails, over
the scripted desktop (the Windows backend itself runs in tests/native/test_windows_host.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SERVE_WITHOUT_LINUX_PACKAGES = """
import json, sys
for blocked in ("dbus_fast", "Xlib", "i3ipc", "pywayland"):
    sys.modules[blocked] = None  # import fails, as where the package is not installed

import anyio
from mcp import Client

from deskrig.config import Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.serving import build_server


async def main() -> None:
    server = build_server(ScriptedDesktop().open(), Settings())
    async with Client(server.mcp, mode="legacy") as client:
        tools = await client.list_tools()
        state = await client.call_tool("get_app_state", {"pid": 1})
    server.services.desktop.close()
    server.services.security.close()
    print(json.dumps({"tools": len(tools.tools), "error": state.is_error, "content": state.content[0].text}))


anyio.run(main)
"""


def test_the_server_builds_and_answers_without_the_linux_only_packages() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SERVE_WITHOUT_LINUX_PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["tools"] > 20
    assert answer["error"] and "A11Y_UNAVAILABLE" in answer["content"]
