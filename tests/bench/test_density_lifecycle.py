"""`scripts/bench density` does not hang and does not leak: a connect or call past its deadline
counts as over the target (against a real socket that never answers); SIGINT/SIGTERM of the
bench as a real process removes its rigs from the real Docker engine and exits 128 + the signal;
an error in a step removes them too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import docker
import pytest
from tests.polling import poll

from deskrig.bench import density
from deskrig.bench.density import OVER, Connections, Spread, timed_fresh_call
from deskrig.orchestrator.models import SessionInfo, SessionSpec, SessionState
from deskrig.orchestrator.runtime import LABEL_LEASE


async def _silent_rig(*, task_status: anyio.abc.TaskStatus[int]) -> None:
    """A TCP port that accepts connections and never answers, as a hung rig's would."""
    accepted: list[anyio.abc.SocketStream] = []

    async def hold(stream: anyio.abc.SocketStream) -> None:
        accepted.append(stream)
        await anyio.sleep_forever()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    task_status.started(listener.extra(anyio.abc.SocketAttribute.local_port))
    await listener.serve(hold)


def test_a_connect_or_call_past_its_deadline_counts_as_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(density, "CALL_DEADLINE_S", 0.5)

    async def run() -> tuple[object, float, float]:
        async with anyio.create_task_group() as tg:
            port = await tg.start(_silent_rig)
            info = SessionInfo(
                id="slifecycle",
                state=SessionState.READY,
                spec=SessionSpec(),
                created_at=time.time(),
                artifacts_dir="/nonexistent",
                mcp_url=f"http://127.0.0.1:{port}/mcp",
                token="t0ken",
            )
            started = time.monotonic()
            async with anyio.create_task_group() as connection_tasks:
                connections = Connections(connection_tasks)
                client = await connections.open(info)
                connections.close()
            fresh = await timed_fresh_call(info)
            tg.cancel_scope.cancel()
        return client, fresh, time.monotonic() - started

    client, fresh, took = anyio.run(run)
    assert client is None and fresh == OVER
    assert took < 5  # two deadlines of 0.5 s, not a hang
    step_cell = Spread([12.0, OVER])
    assert str(step_cell) == "over / over" and step_cell.max > density.ANSWER_TARGET_MS


def _bench_rigs(client: docker.DockerClient, tmp_path: Path) -> list[str]:
    """The bench's rig containers: their lease labels are under its temporary directory."""
    return [
        c["Names"][0]
        for c in client.api.containers(all=True, filters={"label": LABEL_LEASE})
        if c["Labels"][LABEL_LEASE].startswith(str(tmp_path))
    ]


@pytest.mark.docker
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_removes_the_fleets_rigs_and_exits(tmp_path: Path, signum: signal.Signals) -> None:
    client = docker.from_env()
    output = tmp_path / "bench.out"
    with output.open("wb") as out:
        bench = subprocess.Popen(
            [sys.executable, "-m", "deskrig.bench", "density", "--max-rigs", "2"],
            env={**os.environ, "TMPDIR": str(tmp_path)},  # the bench's state dir, hence its lease labels
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        poll("the bench's 2 rigs", lambda: len(_bench_rigs(client, tmp_path)) == 2, timeout=120)
        bench.send_signal(signum)
        assert bench.wait(timeout=90) == 128 + signum, output.read_text()
        assert _bench_rigs(client, tmp_path) == [], output.read_text()
        assert f"({signum.name}: stopping the fleet's rigs)" in output.read_text()
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for name in _bench_rigs(client, tmp_path):
            client.api.remove_container(name, force=True)
        client.close()


@pytest.mark.docker
def test_an_error_mid_step_removes_the_fleets_rigs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    client = docker.from_env()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the bench's state dir, hence its lease labels
    seen: list[list[str]] = []

    def failing_measure(container_names: list[str], window_s: float) -> density.IdleUse:
        seen.append(_bench_rigs(client, tmp_path))
        raise RuntimeError("lifecycle: a reading failed")

    monkeypatch.setattr(density, "measure_idle", failing_measure)
    monkeypatch.setattr(density, "SETTLE_S", 0.0)
    try:
        with pytest.raises(ExceptionGroup) as raised:
            anyio.run(density.run_fleet, 1, density.bare_image(), lambda step: None)
        assert raised.group_contains(RuntimeError, match="a reading failed", depth=None)
        assert len(seen) == 1 and len(seen[0]) == 1  # the rig ran when the step failed
        assert _bench_rigs(client, tmp_path) == []
    finally:
        for name in _bench_rigs(client, tmp_path):
            client.api.remove_container(name, force=True)
        client.close()
