"""Connect an MCP client to a rig: the one helper tests, the pytest plugin and scripts share."""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx2

if TYPE_CHECKING:
    from mcp import Client

#: The MCP SDK's own transport defaults: 30 s to connect, write or wait for the pool, and 5 min
#: to read, because a server may hold a response stream open that long.
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every HTTP client of this process shares (httpx2's default one, made once).

    httpx2 makes a context for each client, plain-HTTP rigs included, and loading the CA bundle
    into it costs about 27 ms of CPU: sixteen fresh connections at once spent 0.4 s of their one
    event loop on it before the first byte went out."""
    return httpx2.create_ssl_context()


def rig_http_client(token: str | None = None) -> httpx2.AsyncClient:
    """An HTTP client for a rig's MCP endpoint, sending ``token`` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT, verify=tls_context())


@contextlib.asynccontextmanager
async def connect(url: str, token: str | None = None) -> AsyncIterator[Client]:
    """A connected :class:`mcp.Client` for the rig at ``url`` (``http://host:port/mcp``).

    It speaks the session-based (initialize handshake) protocol: a rig scopes recordings, rate
    limits and the audit log by MCP session, which the stateless 2026-07-28 protocol does not have.
    """
    # Here, not at the top: the orchestrator shares :func:`tls_context` without the MCP SDK's import.
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        rig_http_client(token) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client
