"""The orchestrator's dashboard: its sessions for people, behind the orchestrator's own token.

    GET /dashboard                              the page (:mod:`deskrig.orchestrator.dashboard_page`)
    GET /dashboard/sessions                     the rows it shows, JSON, polled by the page each second
    GET /dashboard/sessions/{id}/live           303 to the rig's live screen, its token in the fragment
    GET /dashboard/sessions/{id}/view           303 to the rig's trajectory viewer, likewise
    GET /dashboard/sessions/{id}/artifacts/     the session's files, as links
    GET /dashboard/sessions/{id}/artifacts/{path}  one of them

A browser signs in as :mod:`deskrig.pages_auth` describes (``/dashboard#token=...``). The rows
carry no rig token: the links go through the redirects above, whose ``Location`` hands the rig's
token to the browser in a fragment (never sent on, never in a Referer), so a page that can read the
rows (or an artifact's HTML served from this origin) still cannot read a token.
"""

from __future__ import annotations

import html
import time
from pathlib import Path
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from pydantic import BaseModel

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.artifacts import list_artifacts, resolve_artifact
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.dashboard_page import DASHBOARD_PAGE
from deskrig.orchestrator.models import SessionInfo, SessionState

#: The rig pages a session row links to.
RIG_PAGE_NAMES = ("live", "view")


class DashboardRow(BaseModel):
    """One session as the dashboard shows it."""

    id: str
    name: str | None
    state: SessionState
    running: bool
    #: Seconds since it was asked for, up to now or to its end.
    age_seconds: float
    app: str
    backend: str | None
    turns: int
    errors: list[str]
    #: Links (paths on the orchestrator); the rig pages only while the rig answers.
    live: str | None
    view: str | None
    artifacts: str


def _errors(info: SessionInfo) -> list[str]:
    found = [f"{info.error.code.value}: {info.error.message}"] if info.error is not None else []
    if info.state is SessionState.FAILED and info.reason and not found:
        found.append(info.reason)
    return found + info.mirror.errors


def dashboard_row(info: SessionInfo, now: float) -> DashboardRow:
    base = f"/dashboard/sessions/{quote(info.id)}"
    answers = info.state is SessionState.READY and info.mcp_url is not None
    return DashboardRow(
        id=info.id,
        name=info.spec.name,
        state=info.state,
        running=not info.state.ended,
        age_seconds=round(max(0.0, (info.ended_at or now) - info.created_at), 1),
        app=info.spec.app or info.spec.image,
        backend=info.spec.backend,
        turns=info.turns,
        errors=_errors(info),
        live=f"{base}/live" if answers else None,
        view=f"{base}/view" if answers else None,
        artifacts=f"{base}/artifacts/",
    )


def _not_answering(info: SessionInfo) -> DeskrigError:
    return DeskrigError(
        ErrorCode.INVALID_ARGUMENT,
        f"session {info.id} is {info.state.value}: its rig does not answer",
        details={"session": info.id, "state": info.state.value},
        remediation="The live screen and the viewer exist while the session is ready; its artifacts stay.",
    )


def dashboard_router(orchestrator: Orchestrator) -> APIRouter:
    router = APIRouter(prefix="/dashboard")

    @router.get("")
    async def page() -> HTMLResponse:
        return HTMLResponse(DASHBOARD_PAGE)

    @router.get("/sessions")
    async def rows() -> list[DashboardRow]:
        now = time.time()
        return [dashboard_row(info, now) for info in orchestrator.list()]

    @router.get("/sessions/{session_id}/{page_name}")
    async def rig_page(session_id: str, page_name: str) -> RedirectResponse:
        info = orchestrator.get(session_id)
        if page_name not in RIG_PAGE_NAMES:
            raise DeskrigError(
                ErrorCode.INVALID_PATH,
                f"no rig page {page_name!r}",
                details={"page": page_name, "pages": list(RIG_PAGE_NAMES)},
            )
        if info.state is not SessionState.READY or info.mcp_url is None or info.token is None:
            raise _not_answering(info)
        rig = info.mcp_url.removesuffix("/mcp")
        return RedirectResponse(f"{rig}/{page_name}#token={quote(info.token, safe='')}", status_code=303)

    @router.get("/sessions/{session_id}/artifacts/")
    async def artifacts(session_id: str) -> HTMLResponse:
        info = orchestrator.get(session_id)
        links = "".join(
            f'<li><a href="{quote(f.path)}">{html.escape(f.path)}</a> <small>{f.size} bytes</small></li>'
            for f in list_artifacts(Path(info.artifacts_dir))
        )
        title = html.escape(f"{info.spec.name or info.id}: artifacts")
        return HTMLResponse(
            f'<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
            f"<title>{title}</title><h1>{title}</h1><p>{html.escape(info.artifacts_dir)}</p>"
            f"<ul>{links or '<li>no files yet</li>'}</ul>"
        )

    @router.get("/sessions/{session_id}/artifacts/{path:path}")
    async def artifact(session_id: str, path: str) -> FileResponse:
        directory = Path(orchestrator.get(session_id).artifacts_dir)
        return FileResponse(resolve_artifact(directory, path))

    return router
