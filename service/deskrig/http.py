"""The HTTP face of a rig: MCP over Streamable HTTP at ``/mcp``, plus ``/healthz`` and ``/readyz``,
the recording feed (:mod:`deskrig.feed`) and the live screen (:mod:`deskrig.live`).

Security, outermost first:

1. Host check (DNS-rebinding protection): only loopback names (on any port: a published port
   such as ``docker run -p 127.0.0.1:9000:8765`` differs from the bound one) and the configured
   ``allowed_hosts`` may appear in the ``Host`` header; anything else gets 421 before any routing.
2. Bearer token on everything but the two probes, compared in constant time against every
   configured token; 401 otherwise. The token's name is the request's identity (see
   ``deskrig.identity``), left in the ASGI scope for the MCP layer. ``no_auth`` turns tokens off
   (every client is ``anonymous``) and is only accepted on a loopback bind. The probes answer
   anyone, but ``/readyz`` shows its details (paths, pids, diagnostics) only with a token.
3. The pages for people (``/live``, ``/view``) also take a browser's page-session cookie, got by
   exchanging the token once (:mod:`deskrig.pages_auth`), for GET only: it watches, never drives.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel
from starlette.types import ASGIApp, Receive, Scope, Send

from deskrig.config import Settings
from deskrig.desktop.input_limits import MAX_CLIPBOARD_BYTES
from deskrig.error_responses import mcp_request_refused, unexpected_error
from deskrig.errors import ErrorCode, ErrorInfo
from deskrig.feed import recording_router
from deskrig.file_transfer import files_router
from deskrig.guard import AUTHORIZED, GuardMiddleware, host_patterns
from deskrig.identity import TokenTable
from deskrig.live import live_router
from deskrig.pages_auth import RIG_PAGES, PageSessions
from deskrig.server import DeskrigServer
from deskrig.view_page import view_router


class Readiness(BaseModel):
    """What /readyz reports. ``ready`` is the verdict; ``checks`` says which part is up or down;
    ``details`` (only shown with the token) says where and how."""

    ready: bool
    checks: dict[str, bool]
    details: dict[str, Any] = {}


def _is_stateless(scope: Scope) -> bool:
    """A 2026-07-28-era request: the SDK's own rule, any MCP-Protocol-Version header that is not
    a handshake-era version."""
    version = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-protocol-version"), None)
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


def max_request_body_bytes(settings: Settings) -> int:
    """The largest MCP request the rig reads: the largest payload a tool takes (an upload_file of
    max_file_bytes, a set_clipboard of MAX_CLIPBOARD_BYTES) in base64, with room for the JSON
    around it. The SDK's own limit (4 MiB) answered a 5 MB set_clipboard with a bare HTTP 413."""
    largest = max(settings.max_file_bytes, MAX_CLIPBOARD_BYTES)
    return 4 * -(-largest // 3) + 64 * 1024


def _over_the_limit(scope: Scope, limit: int) -> JSONResponse | None:
    """The structured refusal of a request that says it is larger than ``limit`` bytes (the SDK's
    own check answers a bare 413, which MCP clients report as an unexplained error)."""
    length = next((v for k, v in scope["headers"] if k == b"content-length"), b"")
    if not length.isdigit() or int(length) <= limit:
        return None
    error = ErrorInfo(
        code=ErrorCode.INVALID_ARGUMENT,
        message=f"the request of {int(length)} bytes is over the rig's limit of {limit}",
        details={"size": int(length), "max_bytes": limit},
        remediation="Move a large file with PUT or GET /files?path=... on the rig's HTTP port.",
    )
    return mcp_request_refused(error, 413)


#: Where MCP is served.
MCP_PATH = "/mcp"


class McpFirst:
    """Requests for :data:`MCP_PATH` straight to the MCP endpoint, everything else on to FastAPI's
    routing.

    FastAPI tries its routes (the probes, /status, /files, /live, /view) one by one before the
    mount that serves MCP, and sets up a dependency exit stack that no MCP request uses: a fifth of
    the server's time for a small tool call. Placed inside the guard (host check, token) and
    FastAPI's outermost error handler, so an MCP request is checked, and an unexpected failure
    answered, as before."""

    def __init__(self, app: ASGIApp, *, endpoint: ASGIApp) -> None:
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == MCP_PATH:
            await self.endpoint(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def create_app(
    server: DeskrigServer,
    *,
    tokens: TokenTable | None,
    allowed_hosts: list[str] | None = None,
    readiness: Callable[[], Readiness],
    bind_host: str = "127.0.0.1",
    stopping: threading.Event | None = None,
) -> FastAPI:
    """The rig's ASGI app. ``tokens=None`` means no auth (loopback only; checked by the caller);
    ``stopping``: set when the server begins to stop, which ends the live screen's streams."""
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
    body_limit = max_request_body_bytes(server.services.settings)
    mcp_app = server.mcp.streamable_http_app(
        json_response=True,
        streamable_http_path=MCP_PATH,
        transport_security=security,
        host=bind_host,
        max_request_body_size=body_limit,
    )
    session_manager = server.mcp.session_manager
    stateless_manager = StreamableHTTPSessionManager(
        app=server.mcp, json_response=False, security_settings=security, max_request_body_size=body_limit
    )

    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        refusal = _over_the_limit(scope, body_limit) if scope["type"] == "http" else None
        if refusal is not None:
            await refusal(scope, receive, send)
        elif scope["type"] == "http" and scope["path"] == MCP_PATH and _is_stateless(scope):
            await stateless_manager.handle_request(scope, receive, send)
        else:
            await mcp_app(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with session_manager.run(), stateless_manager.run():
            yield

    app = FastAPI(title="deskrig rig", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.add_exception_handler(Exception, unexpected_error)

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
    app.include_router(files_router(server))  # streamed upload/download of large files
    app.include_router(
        live_router(server, stopping or threading.Event())
    )  # /live: the screen as it changes, for people
    app.include_router(view_router(server))  # /view: the current recording's trajectory viewer
    app.mount("/", mcp_endpoint)  # what McpFirst does not take first (such as /mcp/)
    app.add_middleware(McpFirst, endpoint=mcp_endpoint)
    app.add_middleware(GuardMiddleware, tokens=tokens, host_patterns=patterns, pages=PageSessions(RIG_PAGES))
    return app
