"""Noticing that an MCP client has gone, so its recording and its held input end with it.

mcp 2.x unwinds a connection's ``exit_stack`` when the connection closes: stdio EOF, an HTTP
session's DELETE, its idle timeout, or the server shutting down. This context-tier middleware
registers the recorder's ``client_closed`` and the desktop's ``cancel_input`` there, once per
connection, on the first tool call (by then an HTTP request carries its ``mcp-session-id``,
which the client id is made of).

Connections of the stateless 2026-07-28 protocol last one request each; they are not watched. A
recording started over that protocol ends with ``stop_recording``, after the rig's
``recording_idle_timeout`` without a call from its identity, or when the server stops; its input
stops when its request is cancelled or closed (``deskrig.tools.input``).
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from deskrig.recording.registry import RecordingRegistry
from deskrig.services import client_of

log = logging.getLogger(__name__)

_WATCHED = "deskrig.recording.watched"


class DisconnectWatch:
    """Ends a client's recording and stops its input when its connection closes."""

    def __init__(self, registry: RecordingRegistry) -> None:
        self.registry = registry

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            self._watch(ctx)
        return await call_next(ctx)

    def _watch(self, ctx: ServerRequestContext[Any, Any]) -> None:
        # The SDK keeps the connection private to the session object; without it (a future SDK),
        # recordings still end with stop_recording and the server.
        connection = getattr(ctx.session, "_connection", None)
        if connection is None:
            log.debug("no connection on the request context: client disconnects are not watched")
            return
        if connection.protocol_version in MODERN_PROTOCOL_VERSIONS or connection.state.get(_WATCHED):
            return
        connection.state[_WATCHED] = True
        client_id = client_of(ctx).key
        connection.exit_stack.push_async_callback(self.registry.client_closed, client_id)
        connection.exit_stack.callback(self.registry.services.desktop.cancel_input, client_id)
