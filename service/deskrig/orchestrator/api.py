"""The orchestrator's HTTP API (FastAPI), guarded like a rig: loopback Host names and a bearer token.

    POST   /sessions?wait=true           start a session (201 when ready; 202 with wait=false)
    GET    /sessions                     every session this orchestrator knows
    GET    /sessions/{id}                one session
    DELETE /sessions/{id}                stop it: finalize, copy the video and logs, remove the rig
    GET    /sessions/{id}/logs?tail=N    the rig's log (live, or the copy saved on stop)
    GET    /sessions/{id}/artifacts      the files in the session's host directory
    GET    /sessions/{id}/artifacts/{path}  one of them
    POST   /shutdown                     stop every session and the service
    GET    /healthz                      liveness (no token)
    GET    /dashboard                    the sessions, for people (deskrig.orchestrator.dashboard)

Errors have the shape every deskrig client knows: ``{"error": {code, message, details?, remediation}}``
(:func:`deskrig.error_responses.http_error`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse

from deskrig.error_responses import http_error, unexpected_error
from deskrig.errors import DeskrigError, invalid_argument
from deskrig.guard import GuardMiddleware, host_patterns
from deskrig.identity import DEFAULT_IDENTITY, TokenTable
from deskrig.orchestrator.artifacts import ArtifactListing, list_artifacts, resolve_artifact
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.dashboard import dashboard_router
from deskrig.orchestrator.models import SessionInfo, SessionSpec, SessionState
from deskrig.pages_auth import ORCHESTRATOR_PAGES, PageSessions


def create_api(
    orchestrator: Orchestrator,
    *,
    token: str,
    allowed_hosts: list[str] | None = None,
    on_shutdown: Callable[[], None] = lambda: None,
) -> FastAPI:
    app = FastAPI(title="deskrig orchestrator", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_exception_handler(Exception, unexpected_error)

    @app.exception_handler(DeskrigError)
    async def deskrig_error(_: Request, exc: DeskrigError) -> JSONResponse:
        return http_error(exc.info())

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        return http_error(invalid_argument(exc, "invalid request", "(request)").info())

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/sessions", response_model=SessionInfo)
    async def start_session(spec: SessionSpec, wait: bool = True) -> JSONResponse:
        info = await orchestrator.start(spec, wait=wait)
        status = 201 if info.state is SessionState.READY else 202
        return JSONResponse(info.model_dump(mode="json"), status_code=status)

    @app.get("/sessions")
    async def list_sessions() -> list[SessionInfo]:
        return orchestrator.list()

    @app.get("/sessions/{session_id}")
    async def get_session(session_id: str) -> SessionInfo:
        return orchestrator.get(session_id)

    @app.delete("/sessions/{session_id}")
    async def stop_session(session_id: str) -> SessionInfo:
        return await orchestrator.stop(session_id)

    @app.get("/sessions/{session_id}/logs")
    async def session_logs(session_id: str, tail: int | None = None) -> PlainTextResponse:
        return PlainTextResponse(await orchestrator.logs(session_id, tail))

    @app.get("/sessions/{session_id}/artifacts")
    async def session_artifacts(session_id: str) -> ArtifactListing:
        directory = Path(orchestrator.get(session_id).artifacts_dir)
        return ArtifactListing(
            session=session_id, artifacts_dir=str(directory), files=list_artifacts(directory)
        )

    @app.get("/sessions/{session_id}/artifacts/{path:path}")
    async def session_artifact(session_id: str, path: str) -> FileResponse:
        directory = Path(orchestrator.get(session_id).artifacts_dir)
        return FileResponse(resolve_artifact(directory, path))

    @app.post("/shutdown", status_code=202)
    async def shutdown() -> dict[str, str]:
        on_shutdown()
        return {"status": "shutting down"}

    app.include_router(dashboard_router(orchestrator))

    tokens = TokenTable([(DEFAULT_IDENTITY, token)])
    patterns = host_patterns(allowed_hosts or [])
    pages = PageSessions(ORCHESTRATOR_PAGES)
    app.add_middleware(GuardMiddleware, tokens=tokens, host_patterns=patterns, pages=pages)
    return app
