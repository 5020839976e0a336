"""The orchestrator's one client for a rig's own HTTP endpoints (served by ``deskrig.http``).

Every path the orchestrator calls on a rig is spelled here, once: readiness, activity, the
recording's finalize, its feed and its files. Callers bring their own ``httpx2.AsyncClient`` (its
timeouts and connection pool are theirs) and get responses or plain values back; what a status
code means stays with them.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from urllib.parse import quote

import httpx2

READYZ = "/readyz"
STATUS = "/status"
MCP = "/mcp"
FINALIZE = "/recording/finalize"
EVENTS = "/recording/events"
FILES = "/recording/files/"


def mcp_url(endpoint: str) -> str:
    """Where an agent reaches the rig's MCP server."""
    return endpoint.rstrip("/") + MCP


class RigClient:
    """One rig's HTTP face at ``endpoint``, authenticated with its bearer ``token``."""

    def __init__(self, http: httpx2.AsyncClient, endpoint: str, token: str) -> None:
        self.http = http
        self.endpoint = endpoint.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}

    def url(self, path: str) -> str:
        return self.endpoint + path

    async def readyz(self) -> httpx2.Response:
        """``GET /readyz``: 200 once display, window manager and app are up."""
        return await self.http.get(self.url(READYZ), headers=self._headers)

    async def last_activity(self) -> float | None:
        """When the rig last served an MCP request (epoch seconds), or None when it cannot say."""
        try:
            response = await self.http.get(self.url(STATUS), headers=self._headers)
            if response.status_code == 200:
                return float(response.json()["last_activity"])
        except (httpx2.HTTPError, ValueError, KeyError, TypeError):
            pass
        return None

    async def finalize(self, *, timeout: float) -> httpx2.Response:
        """``POST /recording/finalize``: close the recording (the rig writes the mp4)."""
        return await self.http.post(self.url(FINALIZE), headers=self._headers, timeout=timeout)

    def events(self, after: int | None) -> AbstractAsyncContextManager[httpx2.Response]:
        """The recording feed (server-sent events), resumed after seq ``after`` when given."""
        if after is None:
            return self.http.stream("GET", self.url(EVENTS), headers=self._headers)
        return self.http.stream(
            "GET",
            self.url(EVENTS),
            params={"after": str(after)},
            headers={**self._headers, "Last-Event-ID": str(after)},
        )

    def file_url(self, path: str) -> str:
        return self.url(FILES + quote(path, safe="/"))

    def file(self, path: str) -> AbstractAsyncContextManager[httpx2.Response]:
        """One recorded file, streamed (``path`` relative to the recording)."""
        return self.http.stream("GET", self.file_url(path), headers=self._headers)
