"""A swarm token secret left without its service (its orchestrator died between creating the two)
is found and removed by the reaper, on the test engine's swarm; a live owner's secret stays."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest
from tests.orchestrator.helpers import labels_of
from tests.orchestrator.runtimes import ensure_swarm

from deskrig.orchestrator.models import OrchestratorConfig
from deskrig.orchestrator.reaper import Lease, Reaper
from deskrig.orchestrator.runtime import LABEL_SESSION, RigRequest
from deskrig.orchestrator.swarm_backend import SwarmRuntime, token_secret

pytestmark = [pytest.mark.docker]


def session_secrets(client: docker.DockerClient, session_id: str) -> list[str]:
    return [s["ID"] for s in client.api.secrets(filters={"label": f"{LABEL_SESSION}={session_id}"})]


@pytest.fixture
def make_secret(docker_client: docker.DockerClient) -> Iterator[Callable[[dict[str, str]], str]]:
    """Creates a session's token secret as the swarm runtime does (and removes what is left)."""
    made: list[str] = []
    ensure_swarm(docker_client)

    def make(labels: dict[str, str]) -> str:
        session_id = labels[LABEL_SESSION]
        request = RigRequest(session_id, "unused", None, {"DESKRIG_TOKEN": "t0ken"}, labels)
        spec = token_secret(request)
        assert spec is not None
        docker_client.secrets.create(**spec)
        made.append(session_id)
        return session_id

    yield make
    for session_id in made:
        for secret_id in session_secrets(docker_client, session_id):
            docker_client.api.remove_secret(secret_id)


@pytest.mark.anyio
async def test_the_reaper_removes_a_token_secret_whose_service_never_came(
    docker_client: docker.DockerClient,
    config: OrchestratorConfig,
    tmp_path: Path,
    make_secret: Callable[[dict[str, str]], str],
) -> None:
    living = Lease(tmp_path / "state", "olifecycle-living")
    living.acquire()
    tag = secrets.token_hex(3)
    try:
        dead_owners = make_secret(labels_of("olifecycle-dead", f"slifecycle{tag}d"))
        live_owners = make_secret(
            labels_of("olifecycle-living", f"slifecycle{tag}l", lease=living.path.resolve())
        )
        runtime = SwarmRuntime(config.model_copy(update={"runtime": "swarm"}), docker_client)
        reaped = await Reaper(runtime, "olifecycle-reaper", set).sweep()
        assert [r.handle.session_id for r in reaped if "lifecycle" in r.handle.session_id] == [dead_owners]
        assert session_secrets(docker_client, dead_owners) == []
        assert len(session_secrets(docker_client, live_owners)) == 1
    finally:
        living.release()
