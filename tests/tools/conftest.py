"""The tool layer over the scripted desktop: a real MCP server and client, in one process, no X.

``rig`` builds the server the way a rig does (``deskrig.serving.build_server``: services, security,
recorder) over a :class:`~deskrig.desktop.scripted.ScriptedDesktop`, and connects an MCP client to
it in memory (the SDK's in-process transport: JSON-RPC over memory streams, with the initialize
handshake). Every test here runs with no DISPLAY, so none of them can reach an X server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from deskrig.config import SecurityPolicy, Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.errors import tool_error
from deskrig.model import Bounds
from deskrig.server import DeskrigServer
from deskrig.serving import build_server

GREEN = (0, 200, 0)
BLUE = (0, 0, 220)
EDITOR_PID = 101
TERMINAL_PID = 202


class ToolClient:
    """An MCP client session with a server over the scripted desktop."""

    def __init__(self, client: Client, server: DeskrigServer, world: ScriptedDesktop) -> None:
        self.client = client
        self.server = server
        self.world = world

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> Any:
        return await self.client.call_tool(tool, arguments or {})

    async def ok(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.call(tool, arguments)
        assert not result.is_error, (tool, tool_error(result))
        return result.structured_content  # type: ignore[no-any-return]

    async def error(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        error = tool_error(await self.call(tool, arguments))
        assert error is not None, f"{tool} succeeded"
        return error


@pytest.fixture(autouse=True)
def no_display(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may need an X server or a compositor."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def world() -> ScriptedDesktop:
    """One 1280x800 display; a green editor, and a blue terminal over its lower-right corner (focused)."""
    desktop = ScriptedDesktop()
    desktop.add_window(
        "Editor", Bounds(x=100, y=100, width=400, height=300), GREEN, app="editor", pid=EDITOR_PID
    )
    desktop.add_window(
        "Terminal", Bounds(x=300, y=250, width=400, height=300), BLUE, app="terminal", pid=TERMINAL_PID
    )
    return desktop


RigFactory = Callable[..., contextlib.AbstractAsyncContextManager[ToolClient]]


@pytest.fixture
def rig(world: ScriptedDesktop, tmp_path: Path) -> Iterator[RigFactory]:
    """``async with rig(**security_policy) as tools``: a server over ``world`` (or over the
    ``desktop`` given) and a client of it. Screenshots may be saved and recordings made under
    ``tmp_path`` unless the policy says otherwise.
    """
    servers: list[DeskrigServer] = []

    @contextlib.asynccontextmanager
    async def connect(desktop: ScriptedDesktop | None = None, **policy: Any) -> AsyncIterator[ToolClient]:
        served = desktop or world
        policy.setdefault("allowed_directories", [str(tmp_path)])
        settings = Settings(security=SecurityPolicy(**policy))
        server = build_server(served.open(), settings)
        servers.append(server)
        async with Client(server.mcp, mode="legacy") as client:
            yield ToolClient(client, server, served)

    yield connect
    for server in servers:
        if server.services.recorder is not None:
            server.services.recorder.close()
        server.services.desktop.close()
        server.services.security.close()
