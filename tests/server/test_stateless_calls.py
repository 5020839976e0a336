"""A stateless (2026-07-28) tools/call over HTTP, in process: its Mcp-Param-* header check reads the
called tool's input schema alone, not the whole tools/list, which the SDK otherwise runs (and
dumps, every tool's schemas) on every call."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import deskrig.server
from deskrig.bench.over_http import serving
from deskrig.config import SecurityPolicy, Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.serving import build_server


def test_a_stateless_call_lists_no_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    server = build_server(ScriptedDesktop().open(), Settings(security=SecurityPolicy()))
    listings: list[int] = []
    describe_tools = deskrig.server.describe_tools

    def counted(specs: Any) -> Any:
        listings.append(len(specs))
        return describe_tools(specs)

    monkeypatch.setattr(deskrig.server, "describe_tools", counted)

    async def call(url: str) -> dict[str, Any] | None:
        async with (
            httpx2.AsyncClient() as http,
            Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client,
        ):
            arguments = {"title": "no such window"}
            await client.session.call_tool("list_windows", arguments)  # the client lists the tools once
            listings.clear()
            result = await client.session.call_tool("list_windows", arguments)
            assert not result.is_error, result
            return result.structured_content

    try:
        with serving(server) as url:
            assert anyio.run(call, url) == {"windows": []}
    finally:
        server.services.desktop.close()
    assert listings == [], "the call ran the tools/list handler"
