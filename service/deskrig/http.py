"""The HTTP face of a rig: MCP over Streamable HTTP at ``/mcp``, plus ``/healthz`` and ``/readyz``.

Security, outermost first:

1. Host check (DNS-rebinding protection): only loopback names (on any port: a published port
   such as ``docker run -p 127.0.0.1:9000:8765`` differs from the bound one) and the configured
   ``allowed_hosts`` may appear in the ``Host`` header; anything else gets 421 before any routing.
2. Bearer token on everything but the two probes, compared in constant time against every
   configured token; 401 otherwise. The token's name is the request's identity (see
   ``deskrig.identity``), left in the ASGI scope for the MCP layer. ``no_auth`` turns tokens off
   (every client is ``anonymous``) and is only accepted on a loopback bind. The probes answer
   anyone, but ``/readyz`` shows its details (paths, pids, diagnostics) only with a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import h11
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from deskrig.config import DEFAULT_HEADER_TIMEOUT
from deskrig.identity import ANONYMOUS_IDENTITY, SCOPE_KEY, TokenTable
from deskrig.recording.feed import recording_router
from deskrig.server import DeskrigServer

#: Paths reachable without a token: liveness and readiness probes (Docker HEALTHCHECK, k8s).
PUBLIC_PATHS = frozenset({"/healthz", "/readyz"})
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: Seconds an idle keep-alive connection stays open (see :func:`uvicorn_config`).
KEEP_ALIVE_TIMEOUT = 30
#: Key in the ASGI scope's ``state``: whether the request carried the token (or needs none).
AUTHORIZED = "deskrig_authorized"


class Readiness(BaseModel):
    """What /readyz reports. ``ready`` is the verdict; ``checks`` says which part is up or down;
    ``details`` (only shown with the token) says where and how."""

    ready: bool
    checks: dict[str, bool]
    details: dict[str, Any] = {}


def host_patterns(allowed_hosts: list[str]) -> list[str]:
    """Host header values accepted: loopback names on any port, plus the configured ones as given.

    A name that resolves to loopback cannot carry a DNS-rebinding attack, whatever the port (and
    behind a port mapping the client's port is not ours). A configured entry without a port
    (``rig1``) accepts any port (``rig1:*``).
    """
    patterns = [f"{name}:*" for name in LOOPBACK_NAMES] + list(LOOPBACK_NAMES)
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


def _is_stateless(scope: Scope) -> bool:
    """A 2026-07-28-era request: the SDK's own rule, any MCP-Protocol-Version header that is not
    a handshake-era version."""
    version = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-protocol-version"), None)
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


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
        if self.tokens is not None:
            scheme, _, credential = headers.get("authorization", "").partition(" ")
            identity = self.tokens.identify(credential.strip()) if scheme.lower() == "bearer" else None
        if identity is None and scope["path"] not in PUBLIC_PATHS:
            await _reject(
                send,
                401,
                "PERMISSION_DENIED",
                "missing or wrong bearer token",
                {"www-authenticate": 'Bearer realm="deskrig"'},
            )
            return
        if identity is not None:
            scope[SCOPE_KEY] = identity
        scope.setdefault("state", {})[AUTHORIZED] = identity is not None
        await self.app(scope, receive, send)


async def _reject(send: Send, status: int, code: str, message: str, extra_headers: dict[str, str]) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in extra_headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's headers.

    uvicorn only times out idle keep-alive connections: a client that sends nothing, or a request
    head a byte at a time, holds a connection (and its memory) for ever. Here the head must be
    complete within ``header_timeout`` seconds of the connection opening or of the request's first
    byte; otherwise a partial head gets ``408 Request Timeout`` and the connection is closed.
    A request body and the response are not bounded by this.
    """

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # a whole request head has arrived
            self._disarm()
        elif self._deadline is None:  # the first bytes of a request after a keep-alive pause
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._deadline = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        partial, _ = self.conn.trailing_data
        if partial:
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
            )
        self.transport.close()


class _ShutdownCancellationFilter(logging.Filter):
    """Drops uvicorn's "Exception in ASGI application" for a request it cancelled at the end of its
    graceful shutdown (an MCP session's open GET stream, a call blocked on a dead display): that
    cancellation is the shutdown working, and its traceback would read like a crash in the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


_SHUTDOWN_FILTER = _ShutdownCancellationFilter()


def uvicorn_config(
    app: ASGIApp, *, header_timeout: float = DEFAULT_HEADER_TIMEOUT, **options: Any
) -> uvicorn.Config:
    """The uvicorn settings every deskrig HTTP server shares, plus ``options``.

    The header deadline above, and a keep-alive timeout well beyond clients' idle expiry (httpx,
    under the MCP SDK: 5 s, uvicorn's own default too): with equal timeouts a server under load
    closed an idle connection just as its client reused it, and the request died with a reset
    (``ReadError``). Now the client always drops an idle connection first.
    """
    logging.getLogger("uvicorn.error").addFilter(_SHUTDOWN_FILTER)  # idempotent: a set of filters
    protocol = type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout": header_timeout})
    return uvicorn.Config(
        app,
        http=protocol,
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT,
        log_level="warning",
        access_log=False,
        **options,
    )


def create_app(
    server: DeskrigServer,
    *,
    tokens: TokenTable | None,
    allowed_hosts: list[str] | None = None,
    readiness: Callable[[], Readiness],
    bind_host: str = "127.0.0.1",
) -> FastAPI:
    """The rig's ASGI app. ``tokens=None`` means no auth (loopback only; checked by the caller)."""
    patterns = host_patterns(allowed_hosts or [])
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=patterns,
        allowed_origins=[f"http://{p}" for p in patterns] + [f"https://{p}" for p in patterns],
    )
    # Handshake-era sessions get plain JSON replies: an SSE stream per call costs about 5 ms, and
    # their progress notifications ride the session's standalone GET stream instead (see
    # deskrig.server.call_info). Stateless (2026-07-28) calls have no such stream, so they are served
    # by a second manager in SSE mode, which the SDK answers as plain JSON unless the call
    # reports progress or runs long; it also cancels the call when its client closes the request.
    mcp_app = server.mcp.streamable_http_app(
        json_response=True, streamable_http_path="/mcp", transport_security=security, host=bind_host
    )
    session_manager = server.mcp.session_manager
    stateless_manager = StreamableHTTPSessionManager(
        app=server.mcp, json_response=False, security_settings=security
    )

    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/mcp" and _is_stateless(scope):
            await stateless_manager.handle_request(scope, receive, send)
        else:
            await mcp_app(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with session_manager.run(), stateless_manager.run():
            yield

    app = FastAPI(title="deskrig rig", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """Liveness: the server process answers."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        """Readiness: display, window manager and app are all up; the details need the token."""
        report = readiness()
        hidden = None if request.scope.get("state", {}).get(AUTHORIZED) else {"details"}
        return JSONResponse(
            report.model_dump(mode="json", exclude=hidden), status_code=200 if report.ready else 503
        )

    app.include_router(recording_router(server))  # /status and the boot recording's feed
    app.mount("/", mcp_endpoint)
    app.add_middleware(GuardMiddleware, tokens=tokens, host_patterns=patterns)
    return app
