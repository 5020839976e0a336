"""An unexpected failure behind either HTTP face (the rig's, the orchestrator's) reaches the client
as an INTERNAL_ERROR body, like every other error (deskrig.error_responses), never as plain text."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from deskrig.config import SecurityPolicy, Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.errors import REMEDIATION, ErrorCode, http_error_info
from deskrig.http import Readiness, create_app
from deskrig.orchestrator.api import create_api
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.memory_runtime import MemoryRuntime
from deskrig.orchestrator.models import OrchestratorConfig
from deskrig.serving import build_server

pytestmark = pytest.mark.anyio


def _broken() -> Readiness:
    raise RuntimeError("a bug")


@asynccontextmanager
async def rig_app(tmp_path: Path) -> AsyncIterator[tuple[FastAPI, str]]:
    """The rig's app, whose readiness check has a bug."""
    server = build_server(ScriptedDesktop().open(), Settings(security=SecurityPolicy()))
    try:
        yield create_app(server, tokens=None, readiness=_broken), "/readyz"
    finally:
        server.services.desktop.close()


@asynccontextmanager
async def orchestrator_app(tmp_path: Path) -> AsyncIterator[tuple[FastAPI, str]]:
    """The orchestrator's API, whose session list has a bug."""
    config = OrchestratorConfig(artifacts_root=tmp_path / "artifacts", state_dir=tmp_path / "state")
    runtime = MemoryRuntime()
    async with Orchestrator(config, runtime) as orchestrator:
        orchestrator.list = _broken  # type: ignore[method-assign,assignment]
        yield create_api(orchestrator, token="t"), "/sessions"
    await runtime.close()


@pytest.mark.parametrize("app_of", [rig_app, orchestrator_app], ids=["rig", "orchestrator"])
async def test_an_unexpected_exception_is_an_internal_error_body(
    app_of: Callable[[Path], AbstractAsyncContextManager[tuple[FastAPI, str]]], tmp_path: Path
) -> None:
    async with app_of(tmp_path) as (app, path):
        transport = httpx.ASGITransport(app, raise_app_exceptions=False)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers={"Authorization": "Bearer t"}
        ) as client:
            response = await client.get(path)
    assert response.status_code == 500
    error = http_error_info(response.text)
    assert error is not None, response.text
    assert (error.code, error.message) == (ErrorCode.INTERNAL_ERROR, "internal error (RuntimeError)")
    assert error.remediation == REMEDIATION[ErrorCode.INTERNAL_ERROR]
    assert "a bug" not in response.text  # the traceback and message stay in the server's log
