"""The HTTP guard shared by a rig's HTTP face and the orchestrator's API: a Host check
(DNS-rebinding protection), then bearer auth, as a plain ASGI middleware.

It sits below both (see pyproject.toml's ``[tool.importlinter]``): the orchestrator uses it without
importing the rig's MCP server.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from deskrig.identity import ANONYMOUS_IDENTITY, SCOPE_KEY, TokenTable

#: Paths reachable without a token: liveness and readiness probes (Docker HEALTHCHECK, k8s).
PUBLIC_PATHS = frozenset({"/healthz", "/readyz"})
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def host_patterns(port: int, allowed_hosts: list[str]) -> list[str]:
    """Host header values accepted: loopback on the bound port, plus the configured ones as given.

    A configured entry without a port (``rig1``) accepts any port (``rig1:*``).
    """
    patterns = [f"{name}:{port}" for name in LOOPBACK_NAMES] + list(LOOPBACK_NAMES)
    for entry in allowed_hosts:
        patterns.append(entry if ":" in entry.lstrip("[") or entry.endswith("]") else f"{entry}:*")
        if ":" not in entry:
            patterns.append(entry)
    return patterns


def host_allowed(host: str, patterns: list[str]) -> bool:
    for pattern in patterns:
        if pattern.endswith(":*"):
            if host == pattern[:-2] or host.startswith(pattern[:-1]):
                return True
        elif host == pattern:
            return True
    return False


class GuardMiddleware:
    """Host check, then bearer auth, as a plain ASGI middleware so streaming responses pass untouched."""

    def __init__(self, app: ASGIApp, *, tokens: TokenTable | None, host_patterns: list[str]) -> None:
        self.app = app
        self.tokens = tokens
        self.host_patterns = host_patterns

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if not host_allowed(host, self.host_patterns):
            await _reject(send, 421, "MISDIRECTED_REQUEST", f"Host {host!r} is not allowed for this rig", {})
            return
        identity: str | None = ANONYMOUS_IDENTITY
        if self.tokens is not None and scope["path"] not in PUBLIC_PATHS:
            scheme, _, credential = headers.get("authorization", "").partition(" ")
            identity = self.tokens.identify(credential.strip()) if scheme.lower() == "bearer" else None
            if identity is None:
                await _reject(
                    send,
                    401,
                    "PERMISSION_DENIED",
                    "missing or wrong bearer token",
                    {"www-authenticate": 'Bearer realm="deskrig"'},
                )
                return
        scope[SCOPE_KEY] = identity
        await self.app(scope, receive, send)


async def _reject(send: Send, status: int, code: str, message: str, extra_headers: dict[str, str]) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in extra_headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
