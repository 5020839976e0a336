"""A tool result reaches the wire as pydantic would dump it, with its structured content (already
JSON data) handed over as it is rather than walked and copied before the SDK's own pass."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.runner import _dump_result
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from deskrig.config import Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.identity import ClientRef
from deskrig.server import DeskrigServer, JsonReadyResult
from deskrig.serving import build_server
from deskrig.tools import CallInfo

WIRE = {"by_alias": True, "mode": "json", "exclude_none": True}


@pytest.fixture(scope="module")
def server() -> Iterator[DeskrigServer]:
    server = build_server(ScriptedDesktop().open(), Settings())
    try:
        yield server
    finally:
        server.services.desktop.close()
        server.services.security.close()


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
