"""A tool result reaches the wire as pydantic would dump it, with its structured content (already
JSON data) handed over as it is rather than walked and copied, by deskrig before the SDK's own pass
or by the SDK's spec check."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
import pytest
from mcp import Client
from mcp.server import runner
from mcp.server.runner import _dump_result
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from tests.server.helpers import scripted_server

from deskrig.identity import ClientRef
from deskrig.server import DeskrigServer, JsonReadyResult, hand_over_structured_content, json_text
from deskrig.tools import CallInfo

WIRE = {"by_alias": True, "mode": "json", "exclude_none": True}


@pytest.fixture(scope="module")
def server() -> Iterator[DeskrigServer]:
    with scripted_server() as server:
        yield server


def _called(server: DeskrigServer, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    result = anyio.run(server.call, server.tools[tool], arguments, CallInfo(ClientRef("test")))
    assert not result.is_error, result
    return result


def test_the_sdk_gets_the_structured_content_itself_and_the_same_wire_form(server: DeskrigServer) -> None:
    result = _called(server, "get_screen_size", {})
    plain = types.CallToolResult.model_validate(result.model_dump(by_alias=True))
    dumped = _dump_result(result)  # what the SDK's runner does with a handler's result
    assert dumped["structuredContent"] is result.structured_content, "not walked and copied"
    assert dumped == plain.model_dump(**WIRE)  # type: ignore[arg-type]
    for version in ("2025-06-18", *sorted(MODERN_PROTOCOL_VERSIONS)):
        assert methods.serialize_server_result("tools/call", version, dumped) == (
            methods.serialize_server_result("tools/call", version, plain.model_dump(**WIRE))  # type: ignore[arg-type]
        )


@pytest.mark.parametrize(
    "options",
    [{}, {"mode": "json"}, {**WIRE, "exclude": {"content"}}, {**WIRE, "round_trip": True}],
    ids=["python", "json-without-aliases", "exclude", "round-trip"],
)
def test_any_other_dump_is_pydantics_own(server: DeskrigServer, options: dict[str, Any]) -> None:
    result = _called(server, "get_screen_size", {})
    plain = types.CallToolResult.model_validate(result.model_dump(by_alias=True))
    assert result.model_dump(**options) == plain.model_dump(**options)


def test_nulls_inside_the_structured_content_stay_as_pydantic_keeps_them() -> None:
    """``exclude_none`` leaves out a result's own empty fields, never a null inside its content."""
    content = {"age_ms": None, "rows": [None, {"cell": None}]}
    handed = JsonReadyResult(content=[], structured_content=content)
    plain = types.CallToolResult(content=[], structured_content=content)
    assert handed.model_dump(**WIRE) == plain.model_dump(**WIRE)  # type: ignore[arg-type]


#: Every protocol version the SDK checks results against, oldest first.
VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25", *sorted(MODERN_PROTOCOL_VERSIONS))


@pytest.mark.parametrize("version", VERSIONS)
def test_the_spec_check_gets_a_placeholder_and_the_wire_the_content_itself(
    server: DeskrigServer, version: str
) -> None:
    """What the SDK's runner does with a tools/call (the handler, then the result dumped and
    checked against the version's spec) inside the hand-over middleware: the wire form is the
    plain result's, and the spec check never saw the content to copy it."""
    checked: list[Any] = []

    async def handler_then_spec_check(ctx: Any) -> dict[str, Any]:
        result = await server.call_tool(ctx, types.CallToolRequestParams(name="get_screen_size"))
        dumped = _dump_result(result)
        checked.append(dumped["structuredContent"])
        return methods.serialize_server_result("tools/call", version, dumped)

    ctx = SimpleNamespace(method="tools/call", params={}, session=None, request=None)
    wire = anyio.run(hand_over_structured_content, ctx, handler_then_spec_check)
    result = _called(server, "get_screen_size", {})
    plain = types.CallToolResult.model_validate(result.model_dump(by_alias=True))
    assert checked == [{}]
    assert wire == methods.serialize_server_result("tools/call", version, plain.model_dump(**WIRE))  # type: ignore[arg-type]


def test_a_result_dumped_elsewhere_during_the_call_keeps_its_content(server: DeskrigServer) -> None:
    """Only the result the tools/call returns is held back: another one dumped while the call runs
    (a replayed call's, a recording's) is dumped whole."""
    other = JsonReadyResult(content=[], structured_content={"width": 1})

    async def dumps_another_first(ctx: Any) -> dict[str, Any]:
        assert _dump_result(other)["structuredContent"] == {"width": 1}
        result = await server.call_tool(ctx, types.CallToolRequestParams(name="get_screen_size"))
        assert _dump_result(other)["structuredContent"] == {"width": 1}
        return _dump_result(result)

    ctx = SimpleNamespace(method="tools/call", params={}, session=None, request=None)
    wire = anyio.run(hand_over_structured_content, ctx, dumps_another_first)
    assert wire["structuredContent"] == _called(server, "get_screen_size", {}).structured_content


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_real_client_gets_the_structured_content_the_spec_check_did_not_copy(
    server: DeskrigServer, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[Any] = []
    spec_check = methods.serialize_server_result

    def spying(method: str, version: str, data: Any, **options: Any) -> dict[str, Any]:
        if method == "tools/call":
            checked.append(data.get("structuredContent"))
        return spec_check(method, version, data, **options)

    monkeypatch.setattr(runner._methods, "serialize_server_result", spying)

    async def call() -> types.CallToolResult:
        async with Client(server.mcp, mode=mode) as client:  # type: ignore[arg-type]
            return await client.call_tool("get_screen_size", {})

    result = anyio.run(call)
    assert not result.is_error, result
    # The server's spec check, then the client's own check of the result it got.
    assert checked == [{}, result.structured_content]
    assert result.structured_content == _called(server, "get_screen_size", {}).structured_content
    assert result.structured_content


@pytest.mark.parametrize(
    "data",
    [
        {"name": 'Zoë "quoted" \u2028', "ratio": 0.1, "big": 2**63 - 1, "rows": [None, True, {}]},
        {"beyond 64 bits": 2**64, "negative": -(2**70)},  # orjson refuses these: pydantic-core writes them
    ],
    ids=["orjson", "beyond-64-bits"],
)
def test_the_text_block_is_the_json_pydantic_core_would_write(data: dict[str, Any]) -> None:
    assert json_text(data) == pydantic_core.to_json(data).decode()


def test_a_results_text_block_is_its_structured_contents_json(server: DeskrigServer) -> None:
    result = _called(server, "get_screen_size", {})
    text = result.content[-1]
    assert isinstance(text, types.TextContent)
    assert text.text == pydantic_core.to_json(result.structured_content).decode()
