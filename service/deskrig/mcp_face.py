"""What deskrig's MCP server shows before any tool runs: its name, version, instructions, handlers.

Light on purpose (the MCP SDK and nothing of deskrig's own that is heavy): the stdio front in
``deskrig.serving`` answers ``initialize`` with it while the server proper is still being imported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from deskrig import __version__

INSTRUCTIONS = (
    "deskrig drives one virtual desktop. Coordinates are screen pixels everywhere; a scaled "
    "screenshot states its scale and origin so points can be mapped back. Failures carry "
    "{code, message, details, remediation}."
)

#: The requests besides tools that deskrig's server answers (``deskrig.resources``,
#: ``deskrig.client_log``), with their params models: the stdio front forwards them.
MORE_REQUESTS: dict[str, type[types.RequestParams]] = {
    "resources/list": types.PaginatedRequestParams,
    "resources/templates/list": types.PaginatedRequestParams,
    "resources/read": types.ReadResourceRequestParams,
    "resources/subscribe": types.SubscribeRequestParams,
    "resources/unsubscribe": types.UnsubscribeRequestParams,
    "logging/setLevel": types.SetLevelRequestParams,
}

ListTools = Callable[
    [ServerRequestContext[Any, Any], types.PaginatedRequestParams | None], Awaitable[types.ListToolsResult]
]
CallTool = Callable[
    [ServerRequestContext[Any, Any], types.CallToolRequestParams], Awaitable[types.CallToolResult]
]


def mcp_server(on_list_tools: ListTools, on_call_tool: CallTool) -> Server[Any]:
    """deskrig's low-level MCP server over these tool handlers."""
    return Server(
        "deskrig",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
