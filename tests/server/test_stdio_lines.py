"""The stdio transport's JSON lines: the bytes pydantic-core writes for the same message (as the
MCP SDK's own transport does), whichever writer wrote them."""

from __future__ import annotations

import base64
import json

import mcp_types as types
import pytest

from deskrig.stdio import message_line

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
