"""The orchestrator's HTTP API answers every failure as a deskrig error (deskrig.error_responses),
from the guard in front of it to the routes: driven in-process over the in-memory runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from deskrig.errors import REMEDIATION, ErrorCode, ErrorInfo, http_error_info
from deskrig.orchestrator.api import create_api
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.memory_runtime import MemoryRuntime
from deskrig.orchestrator.models import OrchestratorConfig

pytestmark = pytest.mark.anyio

TOKEN = "api-test-token"


@pytest.fixture
async def api(config: OrchestratorConfig) -> AsyncIterator[httpx.AsyncClient]:
    runtime = MemoryRuntime()
    async with Orchestrator(config, runtime) as orchestrator:
        transport = httpx.ASGITransport(create_api(orchestrator, token=TOKEN))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers={"Authorization": f"Bearer {TOKEN}"}
        ) as client:
            yield client
    await runtime.close()


def error_of(response: httpx.Response) -> ErrorInfo:
    info = http_error_info(response.text)
    assert info is not None, response.text
    return info


async def test_an_unknown_session_is_session_not_found(api: httpx.AsyncClient) -> None:
    response = await api.get("/sessions/nope")
    assert response.status_code == 404
    error = error_of(response)
    assert (error.code, error.details) == (ErrorCode.SESSION_NOT_FOUND, {"session": "nope"})
    assert error.remediation == REMEDIATION[ErrorCode.SESSION_NOT_FOUND]


async def test_a_bad_request_names_each_field(api: httpx.AsyncClient) -> None:
    body = {"image": 5, "colour": "red", "backend": "wayland"}
    response = await api.post("/sessions", params={"wait": "maybe"}, json=body)
    assert response.status_code == 400
    error = error_of(response)
    assert error.code is ErrorCode.INVALID_ARGUMENT and error.message.startswith("invalid request: ")
    assert error.details is not None
    fields = {problem["field"] for problem in error.details["problems"]}
    assert fields == {"query.wait", "body.image", "body.colour", "body.backend"}


async def test_the_guards_refusals_are_deskrig_errors(api: httpx.AsyncClient) -> None:
    unauthenticated = await api.get("/sessions", headers={"Authorization": "Bearer wrong"})
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["www-authenticate"].startswith("Bearer")
    refused = error_of(unauthenticated)
    assert refused.code is ErrorCode.PERMISSION_DENIED and refused.remediation

    foreign = await api.get("/sessions", headers={"Host": "evil.example"})
    assert foreign.status_code == 421
    misdirected = error_of(foreign)
    assert misdirected.code is ErrorCode.PERMISSION_DENIED and misdirected.details == {"host": "evil.example"}
    assert misdirected.remediation and "allowed_hosts" in misdirected.remediation
