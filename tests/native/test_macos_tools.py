"""The MCP tools over the macOS backend: the real server and an in-memory MCP client (as
tests/tools), the backend's Quartz, event sink and pasteboard replaced by the recorded stand-ins, so
the tool layer's use of the backend is checked on any OS (the real host runs the contract suite)."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from PIL import Image

from deskrig.config import SecurityPolicy, Settings
from deskrig.desktop.base import Desktop
from deskrig.desktop.macos import MacOSBackend
from deskrig.desktop.macos_clipboard import PasteboardSelections
from deskrig.desktop.macos_input import MacOSInput
from deskrig.desktop.macos_keys import FLAG_COMMAND, TEXT_KEY_CODE
from deskrig.errors import tool_error
from deskrig.serving import build_server

from .recorded import MemoryPasteboard, RecordedQuartz, RecordingSink

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class MacTools:
    def __init__(self, client: Client, quartz: RecordedQuartz, sink: RecordingSink, board: MemoryPasteboard):
        self.client, self.quartz, self.sink, self.board = client, quartz, sink, board

    async def ok(self, tool: str, arguments: dict[str, Any] | None = None) -> Any:
        result = await self.client.call_tool(tool, arguments or {})
        assert not result.is_error, (tool, tool_error(result))
        return result

    async def error(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        error = tool_error(await self.client.call_tool(tool, arguments))
        assert error is not None, f"{tool} succeeded"
        return error


@pytest.fixture
async def mac(tmp_path: Path) -> AsyncIterator[MacTools]:
    sink = RecordingSink()
    quartz = RecordedQuartz(pointer_from=sink)
    board = MemoryPasteboard()
    desktop = Desktop(MacOSBackend(quartz), MacOSInput(sink), PasteboardSelections(board))
    server = build_server(desktop, Settings(security=SecurityPolicy(allowed_directories=[str(tmp_path)])))
    try:
        async with Client(server.mcp, mode="legacy") as client:
            yield MacTools(client, quartz, sink, board)
    finally:
        if server.services.recorder is not None:
            server.services.recorder.close()
        server.services.desktop.close()
        server.services.security.close()


async def test_discovery_lists_quartz_windows_and_retina_displays(mac: MacTools) -> None:
    windows = (await mac.ok("list_windows")).structured_content["windows"]
    displays = (await mac.ok("list_displays")).structured_content["displays"]

    assert [(w["title"], w["app"], w["focused"]) for w in windows[:2]] == [
        ("tk-macos", "Python", True),
        ("green-macos", "Python", False),
    ]
    assert windows[0]["bounds"] == {"x": 40, "y": 400, "width": 320, "height": 220}
    assert [(d["id"], d["primary"], d["scale"]) for d in displays] == [(1, True, 2.0)]


async def test_a_window_screenshot_is_its_own_pixels_in_points(mac: MacTools) -> None:
    result = await mac.ok("screenshot_window", {"window_title": "tk-macos"})

    image_block = next(block for block in result.content if block.type == "image")
    image = Image.open(io.BytesIO(base64.b64decode(image_block.data)))
    assert image.size == (320, 220)
    assert image.convert("RGB").getcolors() == [(320 * 220, mac.quartz.colour_of(6120))]
    assert result.structured_content["window_capture"] == "composite"


async def test_actions_post_quartz_events(mac: MacTools) -> None:
    await mac.ok("click", {"x": 100, "y": 500})
    typed = await mac.ok("type_text", {"text": "naïve\n"})
    await mac.ok("press_key", {"key": "cmd+s"})

    assert ("mouse", "down", 100, 500, "left", 1, 0) in mac.sink.events
    assert typed.structured_content["detail"] == {"path": "quartz"}
    keys = [e for e in mac.sink.events if e[0] == "key"]
    assert keys[:2] == [("key", TEXT_KEY_CODE, True, 0, "naïve"), ("key", TEXT_KEY_CODE, False, 0, "naïve")]
    assert keys[-2:] == [("key", 0x01, False, FLAG_COMMAND, "s"), ("key", 0x37, False, 0, "")]


async def test_without_accessibility_an_action_is_a_permission_error_naming_the_pane(mac: MacTools) -> None:
    mac.sink.allowed = False

    error = await mac.error("click", {"x": 100, "y": 500})

    assert error["code"] == "PERMISSION_DENIED"
    assert "Privacy & Security > Accessibility" in error["remediation"]
    assert mac.sink.events == []


async def test_without_screen_recording_a_screenshot_is_a_permission_error(mac: MacTools) -> None:
    mac.quartz.screen_recording = False

    error = await mac.error("screenshot_screen", {})

    assert error["code"] == "PERMISSION_DENIED"
    assert "Privacy & Security > Screen Recording" in error["remediation"]


async def test_the_clipboard_is_the_pasteboard(mac: MacTools) -> None:
    await mac.ok("set_clipboard", {"text": "héllo"})

    assert mac.board.items == {"public.utf8-plain-text": "héllo".encode()}
    assert (await mac.ok("get_clipboard", {})).structured_content["text"] == "héllo"
