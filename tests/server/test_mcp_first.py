"""An MCP request goes from the guard straight to the MCP endpoint (deskrig.http.McpFirst): not
through FastAPI's routes, which it would otherwise try one by one first, on every call."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.routing import BaseRoute

from deskrig.bench.reliability_rig import INITIALIZE
from deskrig.config import SecurityPolicy, Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.http import MCP_PATH, Readiness, create_app
from deskrig.serving import build_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def app() -> Iterator[FastAPI]:
    server = build_server(ScriptedDesktop().open(), Settings(security=SecurityPolicy()))
    try:
        yield create_app(server, tokens=None, readiness=lambda: Readiness(ready=True, checks={}))
    finally:
        server.services.desktop.close()


def _recording_matches(routes: list[BaseRoute], tried: list[str]) -> None:
    """Note the path of every request a route is asked to match."""
    for route in routes:
        match = route.matches

        def noted(scope: Any, match: Any = match) -> Any:
            tried.append(scope["path"])
            return match(scope)

        route.matches = noted  # type: ignore[method-assign]


async def test_an_mcp_request_skips_the_routes_and_the_probes_do_not(app: FastAPI) -> None:
    tried: list[str] = []
    _recording_matches(app.router.routes, tried)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            answer = await client.post(
                MCP_PATH, json=INITIALIZE, headers={"Accept": "application/json, text/event-stream"}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["serverInfo"]["name"] == "deskrig"
            assert tried == []
            assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert tried and set(tried) == {"/healthz"}
