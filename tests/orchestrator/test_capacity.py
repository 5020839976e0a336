"""Capacity and timeouts on real rigs: the FIFO queue, its timeout, idle timeout, max duration."""

from __future__ import annotations

import time

import anyio
import docker
import pytest
from tests.orchestrator.helpers import call, containers, eventually

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.models import OrchestratorConfig, SessionSpec, SessionState

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


async def test_over_capacity_the_third_session_waits_then_runs_when_one_stops(
    rig_image: str, config: OrchestratorConfig, docker_client: docker.DockerClient
) -> None:
    config = config.model_copy(update={"max_sessions": 2})
    spec = SessionSpec(image=rig_image, record=False)
    async with Orchestrator(config) as orchestrator:
        first = await orchestrator.start(spec, wait=False)
        second = await orchestrator.start(spec, wait=False)
        third = await orchestrator.start(spec, wait=False)
        assert third.state is SessionState.QUEUED and third.queue_position == 1

        await eventually(
            "the first two ready",
            lambda: all(orchestrator.get(s.id).state is SessionState.READY for s in (first, second)),
        )
        waiting = orchestrator.get(third.id)
        assert waiting.state is SessionState.QUEUED and waiting.queue_position == 1
        assert len(containers(docker_client, orchestrator=orchestrator.id)) == 2

        await orchestrator.stop(first.id)
        ready = await orchestrator.wait(third.id)
        assert ready.state is SessionState.READY and ready.queue_position is None
        assert ready.mcp_url and ready.token
        await call(ready.mcp_url, ready.token, "list_windows", {})


async def test_queue_timeout_ends_the_request_with_its_error(
    rig_image: str, config: OrchestratorConfig
) -> None:
    config = config.model_copy(update={"max_sessions": 1})
    async with Orchestrator(config) as orchestrator:
        await orchestrator.start(SessionSpec(image=rig_image, record=False))
        started = time.monotonic()
        with pytest.raises(DeskrigError) as raised:
            await orchestrator.start(SessionSpec(image=rig_image, record=False, queue_timeout=1.0))
        waited = time.monotonic() - started
    assert raised.value.code is ErrorCode.QUEUE_TIMEOUT
    assert "no free rig slot within 1 s" in raised.value.message
    assert raised.value.details == {"max_sessions": 1, "queue_timeout": 1.0, "position": 1}
    assert 1.0 <= waited < 5.0
    assert raised.value.remediation and "max_sessions" in raised.value.remediation
    timed_out = [s for s in orchestrator.list() if s.state is SessionState.FAILED]
    assert len(timed_out) == 1 and timed_out[0].container is None


async def test_idle_timeout_stops_a_quiet_session_and_activity_postpones_it(
    rig_image: str, config: OrchestratorConfig, docker_client: docker.DockerClient
) -> None:
    async with Orchestrator(config) as orchestrator:
        info = await orchestrator.start(SessionSpec(image=rig_image, record=False, idle_timeout=3.0))
        assert info.mcp_url and info.token
        await anyio.sleep(2.0)  # part of the idle period passes, then activity resets it
        # Before the call: the rig dates its activity when the call arrives, and under load the
        # answer can come back well after that.
        active_at = time.time()
        await call(info.mcp_url, info.token, "list_windows", {})
        ended = await eventually(
            "the idle timeout",
            lambda: (s := orchestrator.get(info.id)).state is SessionState.STOPPED and s,
            15,
        )
        assert ended.ended_at and ended.ended_at - active_at >= 3.0
        assert ended.reason and ended.reason.startswith("idle timeout: no MCP activity for")
        assert containers(docker_client, session=info.id) == []


async def test_max_duration_stops_a_session(rig_image: str, config: OrchestratorConfig) -> None:
    async with Orchestrator(config) as orchestrator:
        info = await orchestrator.start(SessionSpec(image=rig_image, record=False, max_duration=2.0))
        ended = await eventually(
            "the deadline", lambda: (s := orchestrator.get(info.id)).state is SessionState.STOPPED and s, 15
        )
        assert ended.reason == "max duration reached (2 s)"
