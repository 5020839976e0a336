"""The runtime contract: what the session core relies on, run against every available runtime
(memory, docker, a single-node swarm; kubernetes with ``$KUBECONFIG``; see runtimes.py).

Start, ready, endpoint, labels, stop, reaping an orphan, a crashed app and the max-duration
timeout, each through the orchestrator as its users drive it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest
from tests.orchestrator.helpers import call, eventually, labels_of
from tests.orchestrator.runtimes import APP, RIG_IMAGE, Harness, available_runtimes, harness

from deskrig.errors import ErrorCode
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.models import OrchestratorConfig, SessionSpec, SessionState
from deskrig.orchestrator.rig_client import READYZ
from deskrig.orchestrator.runtime import (
    LABEL_EXPIRES,
    LABEL_LEASE,
    LABEL_ORCHESTRATOR,
    LABEL_SESSION,
    RigRequest,
    managed_labels,
)

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


@pytest.fixture(scope="module")
def engine() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    client.images.get(RIG_IMAGE)  # the shared image; these tests never build it
    yield client
    client.close()


@pytest.fixture(params=available_runtimes())
def under_test(request: pytest.FixtureRequest, engine: docker.DockerClient) -> Harness:
    return harness(request.param, engine)


def orchestrator(under_test: Harness, config: OrchestratorConfig) -> Orchestrator:
    return Orchestrator(under_test.config(config), under_test.runtime)


async def no_leftovers(under_test: Harness, session_id: str) -> None:
    await eventually(
        f"nothing left of session {session_id}", lambda: under_test.leftovers(session_id) == [], timeout=60
    )


async def test_start_ready_endpoint_labels_and_stop(under_test: Harness, config: OrchestratorConfig) -> None:
    async with orchestrator(under_test, config) as orch:
        assert orch.runtime.name == under_test.name
        info = await orch.start(SessionSpec(image=RIG_IMAGE, record=False))
        assert info.state is SessionState.READY and info.mcp_url and info.token
        endpoint = info.mcp_url.removesuffix("/mcp")
        async with httpx.AsyncClient() as http:
            assert (await http.get(endpoint + READYZ)).status_code == 200
        if under_test.real:
            windows = (await call(info.mcp_url, info.token, "list_windows", {})).structured_content
            assert "windows" in windows

        (handle,) = await orch.runtime.list_by_label(managed_labels(info.id))
        assert handle.endpoint == endpoint and handle.name == info.container
        assert handle.labels[LABEL_ORCHESTRATOR] == orch.id and handle.labels[LABEL_SESSION] == info.id
        assert float(handle.labels[LABEL_EXPIRES]) > time.time()
        assert Path(handle.labels[LABEL_LEASE]).name == f"{orch.id}.lock"
        assert (await orch.runtime.status(handle)).running

        stopped = await orch.stop(info.id)
        assert (stopped.state, stopped.reason) == (SessionState.STOPPED, "stopped by request")
        assert await orch.runtime.list_by_label(managed_labels(info.id)) == []
    await no_leftovers(under_test, info.id)


async def test_a_dead_orchestrators_rig_is_reaped_at_start_up(
    under_test: Harness, config: OrchestratorConfig
) -> None:
    orphan = "sorphan" + str(time.time_ns())[-6:]
    async with orchestrator(under_test, config) as orch:
        # A rig of an orchestrator on this host whose lease is gone: created, then "its owner died".
        request = RigRequest(orphan, RIG_IMAGE, None, {}, labels_of("odead", orphan))
        created = await orch.runtime.create(request)
        assert (await orch.runtime.list_by_label(managed_labels(orphan)))[0].id == created.id
        reaped = await orch.reaper.sweep()
        assert [(r.handle.session_id, r.reason) for r in reaped] == [
            (orphan, "orphan: its orchestrator odead is gone")
        ]
        assert await orch.runtime.list_by_label(managed_labels(orphan)) == []
    await no_leftovers(under_test, orphan)


async def test_a_crashed_app_fails_its_session_and_its_rig_goes(
    under_test: Harness, config: OrchestratorConfig
) -> None:
    async with orchestrator(under_test, config) as orch:
        info = await orch.start(SessionSpec(image=RIG_IMAGE, app=APP, record=False))
        assert info.state is SessionState.READY

        under_test.crash_app(info.id)

        failed = await eventually(
            "the session to fail",
            lambda: (s := orch.get(info.id)).state is SessionState.FAILED and s,
            timeout=60,
        )
        assert failed.error is not None and failed.error.code is ErrorCode.RIG_FAILED
        assert (failed.reason or "").startswith("the rig stopped unexpectedly: container exited with code ")
        await eventually("the session done", lambda: orch.get(info.id).ended_at is not None)
        assert await orch.runtime.list_by_label(managed_labels(info.id)) == []
    await no_leftovers(under_test, info.id)


async def test_max_duration_stops_the_session(under_test: Harness, config: OrchestratorConfig) -> None:
    async with orchestrator(under_test, config) as orch:
        info = await orch.start(SessionSpec(image=RIG_IMAGE, record=False, max_duration=2))
        assert info.expires_at is not None
        stopped = await eventually(
            "the max duration to stop it",
            lambda: (s := orch.get(info.id)).state is SessionState.STOPPED and s,
            timeout=60,
        )
        assert stopped.reason == "max duration reached (2 s)"
        assert await orch.runtime.list_by_label(managed_labels(info.id)) == []
    await no_leftovers(under_test, info.id)
