"""``deskrig orchestrator serve`` as a real process, stopped by a signal: it stops every session
(copying the turns it can), removes its rigs on the real engine (Docker containers; swarm
services, their task containers and token secrets) and exits 0; a signal once a stop is under way
(asked by a signal or ``POST /shutdown``) exits at once."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest
from tests.orchestrator.helpers import Cli, clicks, containers, leftovers_under, turn_folders
from tests.orchestrator.runtimes import RIG_IMAGE, ensure_swarm
from tests.polling import poll

from deskrig.orchestrator.models import SessionInfo, SessionSpec, SessionState
from deskrig.orchestrator.runtime import LABEL_LEASE
from deskrig.orchestrator.service import ServiceClient, ServiceState, read_state
from deskrig.orchestrator.state import read_session_record

pytestmark = [pytest.mark.docker]

#: What a stop of two fresh sessions may take on a loaded machine (finalize, copy, remove).
SHUTDOWN_BOUND_S = 90.0


class Serving:
    """One ``orchestrator serve`` process in the foreground, its output in ``log``."""

    def __init__(self, cli: Cli, runtime: str) -> None:
        self.log = cli.state_dir.parent / "serve.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "deskrig.cli", "orchestrator", "serve", "--runtime", runtime],
                env=cli.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.state: ServiceState = poll(
            "the service to write its state", lambda: self._answering(cli.state_dir)
        )

    def _answering(self, state_dir: Path) -> ServiceState | None:
        assert self.proc.poll() is None, self.log.read_text()
        state = read_state(state_dir)
        if state is None or state.pid != self.proc.pid:
            return None
        with ServiceClient(state.url, state.token) as api:
            return state if api.alive() else None

    def api(self) -> ServiceClient:
        return ServiceClient(self.state.url, self.state.token)


@pytest.fixture
def cli(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Cli]:
    """A state directory of this test's own; whatever its orchestrators leave is removed after."""
    cli = Cli(tmp_path)
    cli.env["DESKRIG_PLACEMENT_CONSTRAINTS"] = ensure_swarm(docker_client)  # swarm rigs stay here
    yield cli
    remove_leftovers(docker_client, cli.state_dir)


@pytest.fixture
def serve(cli: Cli) -> Iterator[Callable[[str], Serving]]:
    """Starts ``orchestrator serve --runtime RUNTIME``; one still running at the end is killed."""
    started: list[Serving] = []

    def start(runtime: str) -> Serving:
        started.append(Serving(cli, runtime))
        return started[-1]

    yield start
    for serving in started:
        if serving.proc.poll() is None:
            serving.proc.kill()
            serving.proc.wait()


def remove_leftovers(client: docker.DockerClient, state_dir: Path) -> None:
    def under(labels: dict[str, str] | None) -> bool:
        return (labels or {}).get(LABEL_LEASE, "").startswith(str(state_dir))

    for service in client.api.services(filters={"label": LABEL_LEASE}):
        if under(service["Spec"].get("Labels")):
            client.api.remove_service(service["ID"])
    for container in client.api.containers(all=True, filters={"label": LABEL_LEASE}):
        if under(container["Labels"]):
            client.api.remove_container(container["Id"], force=True)
    for secret in client.api.secrets(filters={"label": LABEL_LEASE}):
        if under(secret["Spec"].get("Labels")):
            poll("the secret's service gone", lambda s=secret: _removed_secret(client, s["ID"]))


def _removed_secret(client: docker.DockerClient, secret_id: str) -> bool:
    try:
        client.api.remove_secret(secret_id)
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError:
        return False  # still in use by a service being removed
    return True


@pytest.mark.parametrize(
    ("runtime", "signum"),
    [("docker", signal.SIGTERM), ("docker", signal.SIGINT), ("swarm", signal.SIGTERM)],
    ids=["docker-SIGTERM", "docker-SIGINT", "swarm-SIGTERM"],
)
def test_a_signal_stops_every_session_removes_the_rigs_and_exits_0(
    docker_client: docker.DockerClient,
    cli: Cli,
    serve: Callable[[str], Serving],
    runtime: str,
    signum: signal.Signals,
) -> None:
    serving = serve(runtime)
    with serving.api() as api:
        ready = api.start(SessionSpec(image=RIG_IMAGE, name="lifecycle"))
        assert ready.mcp_url and ready.token
        anyio.run(clicks, ready.mcp_url, ready.token, [(120, 80), (130, 90)])
        starting = api.start(SessionSpec(image=RIG_IMAGE, name="lifecycle"), wait=False)

    serving.proc.send_signal(signum)
    assert serving.proc.wait(timeout=SHUTDOWN_BOUND_S) == 0, serving.log.read_text()

    assert len(turn_folders(Path(ready.artifacts_dir))) == 2  # copied before the rig went
    for session in (ready, starting):
        record = read_session_record(Path(session.artifacts_dir))
        assert (record.state, record.reason) == (SessionState.STOPPED, "the orchestrator shut down")
    assert read_state(cli.state_dir) is None
    # Swarm removes a service's task container after the service: it may take a moment.
    poll("no rig left", lambda: leftovers_under(docker_client, cli.state_dir) == [], timeout=60)


def paused_rig(
    docker_client: docker.DockerClient, serve: Callable[[str], Serving]
) -> tuple[Serving, SessionInfo, Any]:
    """A docker orchestrator serving one session whose rig is paused: it answers nothing, so
    finalizing its recording waits out stop_timeout (20 s)."""
    serving = serve("docker")
    with serving.api() as api:
        session = api.start(SessionSpec(image=RIG_IMAGE, name="lifecycle"))
    (rig,) = containers(docker_client, session=session.id)
    rig.pause()
    return serving, session, rig


def ask_stop_by_signal(serving: Serving) -> None:
    serving.proc.send_signal(signal.SIGTERM)


def ask_stop_by_post(serving: Serving) -> None:
    with serving.api() as api:
        api.shutdown()


@pytest.mark.parametrize(
    ("ask_stop", "asked_by"),
    [(ask_stop_by_signal, "SIGTERM"), (ask_stop_by_post, "POST /shutdown")],
    ids=["after-SIGTERM", "after-POST-shutdown"],
)
def test_a_signal_once_a_stop_is_under_way_exits_at_once(
    docker_client: docker.DockerClient,
    cli: Cli,
    serve: Callable[[str], Serving],
    ask_stop: Callable[[Serving], None],
    asked_by: str,
) -> None:
    """A second signal means "now"; so does a first one after ``POST /shutdown`` (`orchestrator
    stop`, then `docker stop`): the stop under way is the first. It counted as the first, and the
    service went on stopping its sessions."""
    serving, _, rig = paused_rig(docker_client, serve)

    ask_stop(serving)
    poll("the shutdown to begin", lambda: "stopping its sessions" in serving.log.read_text())
    serving.proc.send_signal(signal.SIGTERM)
    assert serving.proc.wait(timeout=10) == 128 + signal.SIGTERM
    assert f"SIGTERM while stopping (asked by {asked_by}): exiting now" in serving.log.read_text()
    assert read_state(cli.state_dir) is None
    rig.unpause()


def test_a_hung_rig_holds_the_stop_up_to_the_stop_timeout_then_goes(
    docker_client: docker.DockerClient, cli: Cli, serve: Callable[[str], Serving]
) -> None:
    serving, session, _ = paused_rig(docker_client, serve)

    serving.proc.send_signal(signal.SIGTERM)
    assert serving.proc.wait(timeout=SHUTDOWN_BOUND_S) == 0, serving.log.read_text()
    assert containers(docker_client, session=session.id) == []
    record = read_session_record(Path(session.artifacts_dir))
    assert record.state is SessionState.STOPPED
    assert record.mirror.errors == ["finalize: the recording was not finished and copied within 20 s"]
