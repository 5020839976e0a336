"""The session core's queue, timeouts, crash paths, reaper and restart, over the in-memory runtime.

No Docker engine: each rig is a scripted record answering its HTTP endpoints on a loopback port
(see deskrig.orchestrator.memory_runtime). The real-engine versions of these paths stay in
test_sessions.py, test_capacity.py and test_service.py.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from tests.orchestrator.helpers import eventually, labels_of

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.memory_runtime import HANGS, MemoryRuntime, RigScript
from deskrig.orchestrator.models import OrchestratorConfig, SessionInfo, SessionSpec, SessionState
from deskrig.orchestrator.reaper import Lease, Reaper
from deskrig.orchestrator.runtime import (
    LABEL_EXPIRES,
    LABEL_ORCHESTRATOR,
    LABEL_SESSION,
)
from deskrig.orchestrator.state import Journal, JournalEntry, write_session_record

pytestmark = pytest.mark.anyio

SPEC = SessionSpec(image="deskrig/rig:memory", record=False)


@pytest.fixture
def fast(config: OrchestratorConfig) -> OrchestratorConfig:
    return config.model_copy(update={"watch_interval": 0.05, "ready_timeout": 5.0, "queue_timeout": 5.0})


@pytest.fixture
async def runtime() -> AsyncIterator[MemoryRuntime]:
    runtime = MemoryRuntime()
    yield runtime
    await runtime.close()


async def ended(orch: Orchestrator, session_id: str) -> SessionInfo:
    return await eventually(
        f"session {session_id} to end", lambda: (info := orch.get(session_id)).state.ended and info, 5.0
    )


async def test_queue_is_fifo_and_bounded_by_capacity(
    fast: OrchestratorConfig, runtime: MemoryRuntime
) -> None:
    async with Orchestrator(fast.model_copy(update={"max_sessions": 1}), runtime) as orch:
        first = await orch.start(SPEC)
        second = await orch.start(SPEC, wait=False)
        third = await orch.start(SPEC, wait=False)
        assert (orch.get(second.id).queue_position, orch.get(third.id).queue_position) == (1, 2)
        assert len(runtime.rigs) == 1
        await orch.stop(first.id)
        assert (await orch.wait(second.id)).state is SessionState.READY
        assert orch.get(third.id).queue_position == 1
        await orch.stop(second.id)
        assert (await orch.wait(third.id)).state is SessionState.READY
        assert [request.session_id for request in runtime.created] == [first.id, second.id, third.id]


async def test_queue_timeout_says_where_it_waited(fast: OrchestratorConfig, runtime: MemoryRuntime) -> None:
    config = fast.model_copy(update={"max_sessions": 1, "queue_timeout": 0.3})
    async with Orchestrator(config, runtime) as orch:
        await orch.start(SPEC)
        with pytest.raises(DeskrigError) as caught:
            await orch.start(SPEC)
        assert caught.value.code is ErrorCode.QUEUE_TIMEOUT
        assert caught.value.details == {"max_sessions": 1, "queue_timeout": 0.3, "position": 1}
        assert len(runtime.created) == 1


async def test_start_timeout_reports_what_it_observed_and_the_logs(
    fast: OrchestratorConfig, runtime: MemoryRuntime
) -> None:
    runtime.script_next(HANGS)
    async with Orchestrator(fast.model_copy(update={"ready_timeout": 0.4}), runtime) as orch:
        with pytest.raises(DeskrigError) as caught:
            await orch.start(SPEC)
        error = caught.value
        assert error.code is ErrorCode.RIG_FAILED
        assert "timed out after 0.4 s" in error.message
        assert error.details["observed"].startswith("GET /readyz: HTTP 503")
        assert error.details["logs"] == ["rig: display up", "rig: app started"]
        info = orch.list()[0]
        assert info.state is SessionState.FAILED
        assert runtime.rigs == {} and runtime.destroyed == [info.container]
        assert "rig: app started" in (Path(info.artifacts_dir) / "rig.log").read_text()


async def test_a_rig_that_cannot_be_created_fails_its_session(
    fast: OrchestratorConfig, runtime: MemoryRuntime
) -> None:
    runtime.script_next(RigScript(fail_to_start="no such image"))
    async with Orchestrator(fast, runtime) as orch:
        with pytest.raises(DeskrigError, match="no such image"):
            await orch.start(SPEC)
        assert (await orch.start(SPEC)).state is SessionState.READY  # the slot was given back


async def test_a_crashed_rig_fails_its_session_with_reason_and_logs(
    fast: OrchestratorConfig, runtime: MemoryRuntime
) -> None:
    async with Orchestrator(fast, runtime) as orch:
        started = await orch.start(SPEC)
        runtime.exit(started.id, code=3)
        info = await ended(orch, started.id)
        assert info.state is SessionState.FAILED
        assert info.reason == (
            "the rig stopped unexpectedly: container exited with code 3; "
            "its last log line: rig: the app exited with code 3"
        )
        assert info.error is not None and info.error.details is not None
        assert info.error.details["exit_code"] == 3
        assert info.error.details["logs"][-1] == "rig: the app exited with code 3"
        assert "exited with code 3" in (Path(info.artifacts_dir) / "rig.log").read_text()
        assert runtime.rigs == {}


async def test_an_engine_hiccup_is_not_a_crash(fast: OrchestratorConfig, runtime: MemoryRuntime) -> None:
    async with Orchestrator(fast, runtime) as orch:
        info = await orch.start(SPEC)
        runtime.engine_outage(0.3)
        await anyio.sleep(0.5)  # several watch rounds see RUNTIME_UNAVAILABLE, within ENGINE_GRACE
        assert orch.get(info.id).state is SessionState.READY
        await orch.stop(info.id)
        assert orch.get(info.id).state is SessionState.STOPPED


async def test_a_vanished_rig_fails_its_session(fast: OrchestratorConfig, runtime: MemoryRuntime) -> None:
    async with Orchestrator(fast, runtime) as orch:
        started = await orch.start(SPEC)
        runtime.vanish(started.id)
        info = await ended(orch, started.id)
        assert info.state is SessionState.FAILED
        assert info.reason == (
            "the rig stopped unexpectedly: container gone (removed from outside); "
            "its last log line: rig: app started"
        )


async def test_stopping_a_recorded_session_finalizes_and_drains_the_feed(
    fast: OrchestratorConfig, runtime: MemoryRuntime
) -> None:
    async with Orchestrator(fast, runtime) as orch:
        info = await orch.start(SPEC.model_copy(update={"record": True}))
        info = await orch.stop(info.id)
    assert (info.state, info.mirror and info.mirror.errors) == (SessionState.STOPPED, [])
    calls = [(method, path) for method, rig, path in runtime.requests if rig == info.container]
    assert ("GET", "/recording/events") in calls
    assert ("POST", "/recording/finalize") in calls


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ({"idle_timeout": 0.3}, "idle timeout: no MCP activity for 0 s (limit 0.3 s)"),
        ({"max_duration": 0.3}, "max duration reached (0.3 s)"),
    ],
)
async def test_idle_and_max_duration_stop_the_session(
    fast: OrchestratorConfig, runtime: MemoryRuntime, limits: dict[str, float], reason: str
) -> None:
    async with Orchestrator(fast.model_copy(update=limits), runtime) as orch:
        info = await ended(orch, (await orch.start(SPEC)).id)
        assert (info.state, info.reason) == (SessionState.STOPPED, reason)
        assert runtime.rigs == {}


async def test_recent_activity_keeps_a_session_past_its_idle_timeout(
    fast: OrchestratorConfig, runtime: MemoryRuntime
) -> None:
    runtime.script_next(RigScript(active_at=3600))  # /status says: just used
    async with Orchestrator(fast.model_copy(update={"idle_timeout": 0.2}), runtime) as orch:
        info = await orch.start(SPEC)
        await anyio.sleep(0.6)
        assert orch.get(info.id).state is SessionState.READY


async def test_reaper_removes_orphans_by_label_only(tmp_path: Path, runtime: MemoryRuntime) -> None:
    live_lease = Lease(tmp_path, "alive")
    live_lease.acquire()
    try:
        kept = [
            runtime.seed(labels_of("me", "live")),
            runtime.seed(labels_of("alive", "theirs", lease=live_lease.path)),
            runtime.seed(labels_of("elsewhere", "remote", host="another-host")),
            runtime.seed({LABEL_ORCHESTRATOR: "me", LABEL_SESSION: "unmanaged"}),
            runtime.seed({}),
        ]
        orphans = [
            runtime.seed(labels_of("me", "finished")),
            runtime.seed(labels_of("dead", "abandoned")),
            runtime.seed({**labels_of("alive", "late", lease=live_lease.path), LABEL_EXPIRES: "1"}),
        ]
        reaped = await Reaper(runtime, "me", lambda: {"live"}).sweep()
    finally:
        live_lease.release()
    assert [r.handle for r in reaped] == orphans
    assert sorted(rig.handle.name for rig in runtime.rigs.values()) == sorted(h.name for h in kept)


async def _dead_orchestrators_session(config: OrchestratorConfig, runtime: MemoryRuntime) -> str:
    """What a SIGKILLed orchestrator leaves: its journal, a ready session.json, its rig running."""
    dead = "odead"
    journal = Journal(config.state_dir, dead)
    directory = config.artifacts_root / "sdead"
    directory.mkdir(parents=True)
    lease = Lease(config.state_dir, dead)
    handle = runtime.seed(labels_of(dead, "sdead", lease=lease.path), token="dead-token")
    journal.record(JournalEntry(session_id="sdead", artifacts_dir=str(directory), token="dead-token"))
    write_session_record(
        SessionInfo(
            id="sdead",
            state=SessionState.READY,
            spec=SPEC,
            created_at=0,
            artifacts_dir=str(directory),
            container=handle.name,
        )
    )
    return handle.name


@pytest.mark.parametrize("adopt", [True, False])
async def test_restart_adopts_a_serving_rig_or_fails_its_session(
    fast: OrchestratorConfig, runtime: MemoryRuntime, adopt: bool
) -> None:
    rig = await _dead_orchestrators_session(fast, runtime)
    async with Orchestrator(fast.model_copy(update={"adopt_rigs": adopt}), runtime) as orch:
        if adopt:
            info = orch.get("sdead")
            assert (info.state, info.container) == (SessionState.READY, rig)
            assert runtime.destroyed == []  # neither recovery nor the reaper's sweep took it
        else:
            info = SessionInfo.model_validate_json(
                (fast.artifacts_root / "sdead" / "session.json").read_bytes()
            )
            assert info.state is SessionState.FAILED
            assert info.reason is not None and "adopt_rigs is off" in info.reason
            assert runtime.destroyed == [rig]
    assert os.listdir(fast.state_dir / "leases") == []
