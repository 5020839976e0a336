"""The one translator from an error to what each boundary sends: every client sees the same error.

From one :class:`~deskrig.errors.ErrorInfo`:

==================  ========================================================================
MCP tool call       :func:`tool_error_result`: ``isError`` with :func:`error_body` as the JSON of
                    a text block and no structured content (structured content must match the
                    tool's output schema, which describes success; strict clients such as the MCP
                    Inspector validate it and would drop the error)
acs tool call       :func:`acs_envelope`: ``{"status": "error", "error": {...}}``; the acs output
                    schema admits it, so it is the result's structured content as well
HTTP                :func:`http_error`: :func:`error_body` with the status for the code (the
                    orchestrator's API, the rig's recording feed, the guard in front of both);
                    :func:`unexpected_error` for a failure nothing expected (INTERNAL_ERROR, 500)
MCP over HTTP,      :func:`mcp_request_refused`: a JSON-RPC error (no id) with the error as its
unread request      ``data``, which MCP clients read at any HTTP status (a request too large)
==================  ========================================================================

The error itself is always ``{code, message, details?, remediation?}``: a field without a value
is left out, never sent as null. :func:`deskrig.errors.tool_error` reads an MCP result back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from starlette.requests import Request
from starlette.responses import JSONResponse

from deskrig.errors import REMEDIATION, ErrorCode, ErrorInfo

#: The HTTP status for an error code; any other code is a server-side failure (500).
HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.INVALID_PATH: 400,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.SESSION_NOT_FOUND: 404,
    ErrorCode.RIG_FAILED: 502,
    ErrorCode.QUEUE_TIMEOUT: 503,
    ErrorCode.RUNTIME_UNAVAILABLE: 503,
}


def error_json(error: ErrorInfo) -> dict[str, Any]:
    """``{code, message, details?, remediation?}``, the error every boundary carries."""
    return error.model_dump(mode="json", exclude_none=True)


def error_body(error: ErrorInfo) -> dict[str, Any]:
    """A failure's JSON document: ``{"error": {code, message, details?, remediation?}}``."""
    return {"error": error_json(error)}


def acs_envelope(error: ErrorInfo) -> dict[str, Any]:
    """A failure in the acs envelope: ``{"status": "error", "error": {code, message, ...}}``."""
    return {"status": "error", "error": error_json(error)}


def tool_error_result(error: ErrorInfo, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    """A failed tool call: the ``structured`` document when the tool's output schema admits failures
    (as its structured content too), else :func:`error_body` in the text block alone."""
    body = structured if structured is not None else error_body(error)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body))],
        structured_content=structured,
        is_error=True,
    )


def http_error(
    error: ErrorInfo, status: int | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """A failed HTTP request: :func:`error_body` with ``status``, by default the code's."""
    return JSONResponse(
        error_body(error), status_code=status or HTTP_STATUS.get(error.code, 500), headers=headers
    )


def mcp_request_refused(error: ErrorInfo, status: int) -> JSONResponse:
    """An MCP request refused before it was read: a JSON-RPC error without an id (there is none
    to read), :func:`error_json` as its ``data``, at HTTP ``status``."""
    rpc_error = {"code": types.INVALID_REQUEST, "message": error.message, "data": error_json(error)}
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": rpc_error}, status_code=status)


async def unexpected_error(_: Request, exc: Exception) -> JSONResponse:
    """The handler of an HTTP app's unexpected exceptions: INTERNAL_ERROR rather than a plain-text
    500. The traceback stays in the server's log (Starlette logs the exception after answering)."""
    return http_error(
        ErrorInfo(
            code=ErrorCode.INTERNAL_ERROR,
            message=f"internal error ({type(exc).__name__})",
            remediation=REMEDIATION[ErrorCode.INTERNAL_ERROR],
        )
    )
