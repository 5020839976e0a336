"""tools/list's tools are dumped and checked against the spec once per protocol version in a
server's life, and every listing still runs the SDK's whole chain (its gate, its check of the
request, the handler) and gets the same wire form the SDK makes of the tools."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import runner
from mcp.server.runner import _dump_result
from mcp.shared.exceptions import MCPError
from mcp_types import methods
from tests.server.helpers import scripted_server

from deskrig.server import DeskrigServer, ToolsListedOnce, describe_tools


def _wire(model: types.Tool | types.ListToolsResult) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


@pytest.fixture
def server() -> Iterator[DeskrigServer]:
    with scripted_server() as server:
        yield server


def _as_the_sdk_lists(server: DeskrigServer, version: str) -> list[Any]:
    listed = types.ListToolsResult(tools=describe_tools(list(server.tools.values())))
    tools: list[Any] = methods.serialize_server_result("tools/list", version, _wire(listed))["tools"]
    return tools


def test_real_clients_get_the_sdks_listing_made_once_per_protocol_version(
    server: DeskrigServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[tuple[str, int]] = []
    spec_check = methods.serialize_server_result

    def spying(method: str, version: str, data: Any, **options: Any) -> dict[str, Any]:
        if method == "tools/list":
            checked.append((version, len(data["tools"])))
        return spec_check(method, version, data, **options)

    monkeypatch.setattr(runner._methods, "serialize_server_result", spying)

    async def listings(mode: str) -> tuple[str, list[list[Any]]]:
        async with Client(server.mcp, mode=mode) as client:  # type: ignore[arg-type]
            # Past the client's cache, which would answer a 2026-07-28 client's later listings
            # itself (tests/server/test_cache_hints.py): each listing here reaches the server.
            made = [(await client.list_tools(cache_mode="bypass")).tools for _ in range(3)]
            return client.session.protocol_version, [[_wire(tool) for tool in tools] for tools in made]

    for mode in ("legacy", "2026-07-28"):
        version, made = anyio.run(listings, mode)
        # Each listing: the server's spec check, then the client's own check of what it got. The
        # server checks the tools on its first listing only, and an empty list on the later ones.
        tools = len(server.tools)
        assert [count for seen, count in checked if seen == version] == [tools, tools, 0, tools, 0, tools]
        expected = [_wire(types.Tool.model_validate(tool)) for tool in _as_the_sdk_lists(server, version)]
        assert made == [expected] * 3
    assert len({version for version, _ in checked}) == 2


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2026-07-28"])
def test_every_listing_runs_the_chain_with_the_tools_held_back(server: DeskrigServer, version: str) -> None:
    """The SDK's part of the chain (its gate and check of the request, the handler, the dump and
    spec check) as its runner runs it inside the middleware: on every listing, and an error it
    raises is the answer, kept tools or not."""
    handed: list[int] = []
    refused = False

    async def gate_handler_and_spec_check(ctx: Any) -> dict[str, Any]:
        if refused:
            raise MCPError(types.INVALID_PARAMS, "Invalid request parameters")
        result = await server.list_tools(ctx, None)
        handed.append(len(result.tools))
        return methods.serialize_server_result("tools/list", version, _dump_result(result))

    middleware = ToolsListedOnce()
    ctx = SimpleNamespace(method="tools/list", protocol_version=version, params={})
    first = anyio.run(middleware, ctx, gate_handler_and_spec_check)
    second = anyio.run(middleware, ctx, gate_handler_and_spec_check)
    assert handed == [len(server.tools), 0]
    assert first == second
    assert first["tools"] == _as_the_sdk_lists(server, version)
    refused = True
    with pytest.raises(MCPError, match="Invalid request parameters"):
        anyio.run(middleware, ctx, gate_handler_and_spec_check)


def test_other_methods_pass_through(server: DeskrigServer) -> None:
    async def answers(ctx: Any) -> dict[str, Any]:
        return {"tools": []}

    ctx = SimpleNamespace(method="resources/list", protocol_version="2025-06-18", params={})
    middleware = ToolsListedOnce()
    assert anyio.run(middleware, ctx, answers) == {"tools": []}
    assert anyio.run(middleware, ctx, answers) == {"tools": []}
