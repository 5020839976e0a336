"""The stdio transport's JSON lines: the bytes pydantic-core writes for the same message (as the
MCP SDK's own transport does), whichever writer wrote them."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import Enum, IntEnum, StrEnum
from uuid import UUID

import mcp_types as types
import pytest

from deskrig.stdio import message_line


class Colour(Enum):
    RED = "red"


class Shade(StrEnum):
    DARK = "dark"


class Rank(IntEnum):
    FIRST = 1


@dataclass
class Point:
    x: int
    y: int


IMAGE = base64.b64encode(bytes(range(256)) * 600).decode("ascii")

MESSAGES: list[types.JSONRPCMessage] = [
    types.JSONRPCResponse(
        jsonrpc="2.0",
        id=7,
        result={
            "content": [
                {"type": "image", "data": IMAGE, "mimeType": "image/jpeg"},
                {"type": "text", "text": '{"title": "Grüße \\u2028 \\"quoted\\" \\\\ \\n \\t \\u0001 😀"}'},
            ],
            "structuredContent": {"scale": 0.333333, "big": 1e16, "tiny": 5e-324, "none": None, "ok": True},
            "isError": False,
        },
    ),
    types.JSONRPCResponse(jsonrpc="2.0", id="a string id", result={}),
    types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/progress", params={"progressToken": 3, "progress": 0.5}
    ),
    types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping"),
    types.JSONRPCError(jsonrpc="2.0", id=9, error=types.ErrorData(code=-32602, message="bad \x00 params")),
    # Beyond 64 bits: orjson refuses it, pydantic-core writes it.
    types.JSONRPCResponse(
        jsonrpc="2.0", id=2, result={"structuredContent": {"huge": 2**70, "negative": -(2**65)}}
    ),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda message: type(message).__name__)
def test_a_line_is_the_bytes_pydantic_core_writes(message: types.JSONRPCMessage) -> None:
    line = message_line(message)
    assert line == message.__pydantic_serializer__.to_json(message, by_alias=True, exclude_unset=True)
    assert b"\n" not in line
    assert types.jsonrpc_message_adapter.validate_json(line) == message
    assert json.loads(line) == message.model_dump(mode="json", by_alias=True, exclude_unset=True)


#: Results that are not JSON data (a custom method's handler may return any dict): what orjson
#: would write otherwise than pydantic-core, or not at all, goes through pydantic.
NOT_JSON_DATA = [
    datetime(2026, 12, 2, 11, 0, tzinfo=UTC),
    date(2026, 12, 2),
    Colour.RED,
    Shade.DARK,
    Rank.FIRST,
    Point(1, 2),
    UUID(int=7),
    Decimal("0.1"),
    (1, "two"),
    {1, 2},
    b"bytes",
    {1: "a key that is not a string"},
]


@pytest.mark.parametrize("value", NOT_JSON_DATA, ids=lambda value: type(value).__name__)
def test_a_result_that_is_not_json_data_is_written_as_pydantic_core_writes_it(value: object) -> None:
    message = types.JSONRPCResponse(jsonrpc="2.0", id=3, result={"value": value})
    line = message_line(message)
    assert line == message.__pydantic_serializer__.to_json(message, by_alias=True, exclude_unset=True)
    assert json.loads(line) == message.model_dump(mode="json", by_alias=True, exclude_unset=True)
