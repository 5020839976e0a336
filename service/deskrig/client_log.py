"""MCP logging: the rig's warnings (a dead app, a recorder error, a fallback taken) sent to the
clients that asked for them with ``logging/setLevel``, as ``notifications/message``.

A handler on the ``deskrig`` logger forwards every record that logger lets through (warnings
and errors; info and debug too when the rig runs with ``-v``) at or above each client's level.
Over stdio the notification is a protocol message like any other: nothing is printed to stdout.
Session clients only: the stateless 2026-07-28 protocol has no connection to send them on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from deskrig.recording.watch import connection_of
from deskrig.services import client_of

#: MCP levels, least severe first, and the Python level each starts at.
MCP_LEVELS: dict[types.LoggingLevel, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 5,
    "emergency": logging.CRITICAL + 10,
}


def mcp_level(levelno: int) -> types.LoggingLevel:
    """The most severe MCP level at or below a Python level."""
    chosen: types.LoggingLevel = "debug"
    for name, threshold in MCP_LEVELS.items():
        if levelno >= threshold:
            chosen = name
    return chosen


class ClientLog(logging.Handler):
    """Forwards the ``deskrig`` logger's records to the session clients that set a level."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        #: Each listening client (by client key): its session, the Python level it asked for and
        #: the loop it lives on.
        self._listeners: dict[str, tuple[ServerSession, int, asyncio.AbstractEventLoop]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def install(self, mcp: Server[Any]) -> None:
        mcp.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self.set_level)

    def _forget(self, client: str) -> None:
        """``client`` is gone; with no listener left, the handler leaves the logger."""
        self._listeners.pop(client, None)
        if not self._listeners:
            logging.getLogger("deskrig").removeHandler(self)

    async def set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        connection = connection_of(ctx)
        if connection is None or connection.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return types.EmptyResult()  # no connection outlives this request to send on
        client = client_of(ctx).key
        if client not in self._listeners:
            connection.exit_stack.callback(self._forget, client)
        self._listeners[client] = (ctx.session, MCP_LEVELS[params.level], asyncio.get_running_loop())
        logging.getLogger("deskrig").addHandler(self)  # once: a logger keeps a handler once
        return types.EmptyResult()

    def emit(self, record: logging.LogRecord) -> None:
        if not self._listeners or record.name.startswith("mcp"):
            return
        try:
            message = self.format(record)
        except Exception:  # a record that cannot be formatted is not worth a client's attention
            return
        data = {"message": message, "logger": record.name}
        level = mcp_level(record.levelno)
        for client, (session, threshold, loop) in list(self._listeners.items()):
            if record.levelno >= threshold:
                try:
                    loop.call_soon_threadsafe(self._send, session, level, record.name, data)
                except RuntimeError:  # its loop is closed: the client is gone
                    self._forget(client)

    def _send(self, session: ServerSession, level: types.LoggingLevel, logger: str, data: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._notify(session, level, logger, data))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify(
        self, session: ServerSession, level: types.LoggingLevel, logger: str, data: Any
    ) -> None:
        notification = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level=level, data=data, logger=logger)
        )
        with contextlib.suppress(Exception):  # the client is going; its connection's close drops it
            await session.send_notification(notification)
