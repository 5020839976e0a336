"""Connect an MCP client to a rig: the one helper tests, the pytest plugin and scripts share."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


@contextlib.asynccontextmanager
async def connect(url: str, token: str | None = None) -> AsyncIterator[Client]:
    """A connected :class:`mcp.Client` for the rig at ``url`` (``http://host:port/mcp``).

    It speaks the session-based (initialize handshake) protocol: a rig scopes recordings, rate
    limits and the audit log by MCP session, which the stateless 2026-07-28 protocol does not have.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client
