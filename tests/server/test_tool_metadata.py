"""Every tool as a real MCP client over stdio sees it: a title, and hints that tell the truth; and
what the stdio rig refuses by default (run_command) or serves (files) over that transport."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from tests.server.conftest import GREEN
from tests.server.rigproc import DESKRIG, color_app

from deskrig.errors import tool_error
from deskrig.tools import tools_for_profile

#: Tools that change the desktop or the rig but destroy nothing.
NOT_DESTRUCTIVE = {"move_cursor", "scroll", "launch_app", "focus_window", "start_recording", "stop_recording"}
DESTRUCTIVE = {"click", "type_text", "kill_app", "upload_file", "run_command", "replay_trajectory"}


def stdio_rig(tmp: Path, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=DESKRIG[0],
        args=["rig", "run", "--stdio", *flags, "--", *color_app("Stdio Tools", GREEN, tmp / "app.log")],
        env={**os.environ, "HOME": str(tmp)},
    )


@pytest.fixture(scope="module")
def listed_and_called(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """tools/list of a stdio rig with every profile, and a few calls on it."""
    tmp = tmp_path_factory.mktemp("stdio-tools")

    async def run() -> dict[str, Any]:
        async with Client(stdio_rig(tmp, "--tool-profile", "all")) as client:
            tools = (await client.list_tools()).tools
            command = await client.call_tool("run_command", {"argv": ["touch", str(tmp / "ran")]})
            target = tmp / "deskrig" / "stdio.bin"
            payload = base64.b64encode(b"\x00\x01stdio").decode()
            upload = await client.call_tool("upload_file", {"path": str(target), "content_base64": payload})
            download = await client.call_tool("download_file", {"path": "~/deskrig/stdio.bin"})
            return {"tools": tools, "command": command, "upload": upload, "download": download, "tmp": tmp}

    yield anyio.run(run)


def test_every_tool_has_a_title_and_truthful_hints(listed_and_called: dict[str, Any]) -> None:
    tools: list[types.Tool] = listed_and_called["tools"]
    assert {t.name for t in tools} == {t.name for t in tools_for_profile("all")}
    for tool in tools:
        assert tool.title and tool.title != tool.name, tool.name
        hints = tool.annotations
        assert hints is not None and hints.read_only_hint is not None, tool.name
        if hints.read_only_hint:
            assert hints.destructive_hint is False, tool.name
    by_name = {t.name: t.annotations for t in tools}
    assert all(by_name[name].destructive_hint is False for name in NOT_DESTRUCTIVE)  # type: ignore[union-attr]
    assert all(by_name[name].destructive_hint is True for name in DESTRUCTIVE)  # type: ignore[union-attr]
    for name in ("download_file", "zoom", "get_cursor_position", "screenshot_capture_full"):
        assert by_name[name].read_only_hint is True, name  # type: ignore[union-attr]
    assert len({t.title for t in tools}) == len(tools)  # no two tools share a title


def test_run_command_is_off_by_default_and_says_how_to_turn_it_on(listed_and_called: dict[str, Any]) -> None:
    error = tool_error(listed_and_called["command"])
    assert error is not None and error["code"] == "PERMISSION_DENIED"
    assert "--allow-commands" in error["remediation"] and "DESKRIG_ALLOW_COMMANDS" in error["remediation"]
    assert not (listed_and_called["tmp"] / "ran").exists()


def test_files_over_stdio(listed_and_called: dict[str, Any]) -> None:
    assert not listed_and_called["upload"].is_error
    assert (listed_and_called["tmp"] / "deskrig" / "stdio.bin").read_bytes() == b"\x00\x01stdio"
    download = listed_and_called["download"].structured_content
    assert base64.b64decode(download["content_base64"]) == b"\x00\x01stdio"
    assert download["mime_type"] == "application/octet-stream"
