"""What deskrig's MCP server shows before any tool runs: its name, version, instructions, the
cache hints of its listings, its handlers.

Light on purpose (the MCP SDK and nothing of deskrig's own that is heavy): the stdio front in
``deskrig.serving`` answers ``initialize`` with it while the server proper is still being imported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.caching import CacheableMethod, CacheHint
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

#: How long a client may reuse a listing that never changes in a server's life (SEP-2549's
#: ``ttlMs``, which clients honour on the 2026-07-28 protocol): an agent's host that lists the
#: tools before every turn then lists them over the wire once in five minutes. Not longer: a client
#: keeps its listing by the server's address, and a rig replaced at the same address (a new image,
#: another tool profile) is listed anew within this.
STABLE_LISTING_TTL_MS = 5 * 60 * 1000

#: The cacheable results that are the same for every caller for the server's whole life: the tools
#: (one profile a server), the resource templates and the server's description. Resources and
#: their contents are left immediately stale and private (the SDK's default): the turns are each
#: client's own and change with every call.
CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    method: CacheHint(ttl_ms=STABLE_LISTING_TTL_MS, scope="public")
    for method in ("tools/list", "resources/templates/list", "server/discover")
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
        cache_hints=CACHE_HINTS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
