"""Noticing that an MCP client has gone, so its recording and its held input end with it.

mcp 2.x unwinds a connection's ``exit_stack`` when the connection closes: stdio EOF, an HTTP
session's DELETE, its idle timeout, or the server shutting down. This context-tier middleware
registers the recorder's ``client_closed``, the desktop's ``cancel_input`` and the release of the
keys and buttons it holds (``deskrig.desktop.held``) there, once per
connection, on the first tool call (by then an HTTP request carries its ``mcp-session-id``,
which the client id is made of).

Connections of the stateless 2026-07-28 protocol last one request each; they are not watched. A
recording started over that protocol ends with ``stop_recording``, after the rig's
``recording_idle_timeout`` without a call from its identity, or when the server stops; its input
stops when its request is cancelled or closed (``deskrig.tools.input_device``), and what it holds
is released after ``held_input_idle_timeout`` without a call from it.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from typing import Any, Protocol

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from deskrig.desktop import Desktop
from deskrig.recording.registry import RecordingRegistry
from deskrig.services import client_of

log = logging.getLogger(__name__)

_WATCHED = "deskrig.recording.watched"


class Connection(Protocol):
    """What deskrig uses of the SDK's connection object."""

    protocol_version: str
    #: Per-connection scratch space.
    state: dict[str, Any]
    #: Unwound when the connection closes.
    exit_stack: AsyncExitStack


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The MCP connection a request came in on, or None.

    The one use of a private attribute of the MCP SDK in deskrig: mcp 2.x offers no public way to
    run code when a connection closes, and its connection (with the ``exit_stack`` it unwinds then,
    and a per-connection ``state``) is private to the session object. A future SDK without it gets
    None: recordings then still end with stop_recording, their idle timeout and the server.
    """
    return getattr(ctx.session, "_connection", None)


class DisconnectWatch:
    """Ends a client's recording and stops its input when its connection closes."""

    def __init__(self, registry: RecordingRegistry, desktop: Desktop) -> None:
        self.registry = registry
        self.desktop = desktop

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        self._watch(ctx)
        client_id = client_of(ctx).key
        self.desktop.held.touch(client_id)
        try:
            return await call_next(ctx)
        finally:  # a long call (wait_for) is not idleness either
            self.desktop.held.touch(client_id)

    def _watch(self, ctx: ServerRequestContext[Any, Any]) -> None:
        connection = connection_of(ctx)
        if connection is None:
            log.debug("no connection on the request context: client disconnects are not watched")
            return
        if connection.protocol_version in MODERN_PROTOCOL_VERSIONS or connection.state.get(_WATCHED):
            return
        connection.state[_WATCHED] = True
        client_id = client_of(ctx).key
        connection.exit_stack.push_async_callback(self.registry.client_closed, client_id)
        # Unwound last in, first out: its input is cancelled, then what it held is released.
        connection.exit_stack.push_async_callback(
            anyio.to_thread.run_sync, self.desktop.held.release, client_id
        )
        connection.exit_stack.callback(self.desktop.cancel_input, client_id)
        self.desktop.held.watch(client_id)
