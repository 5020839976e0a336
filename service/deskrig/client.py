"""Connect an MCP client to a rig: the one helper tests, the pytest plugin and scripts share."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

#: The MCP SDK's own transport defaults: 30 s to connect, write or wait for the pool, and 5 min
#: to read, because a server may hold a response stream open that long.
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def rig_http_client(token: str | None = None) -> httpx2.AsyncClient:
    """An HTTP client for a rig's MCP endpoint, sending ``token`` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT)


@contextlib.asynccontextmanager
async def connect(url: str, token: str | None = None) -> AsyncIterator[Client]:
    """A connected :class:`mcp.Client` for the rig at ``url`` (``http://host:port/mcp``).

    It speaks the session-based (initialize handshake) protocol: a rig scopes recordings, rate
    limits and the audit log by MCP session, which the stateless 2026-07-28 protocol does not have.
    """
    async with (
        rig_http_client(token) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client
