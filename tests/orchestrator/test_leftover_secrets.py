"""A swarm token secret left without its service (its orchestrator died between creating the two)
is found and removed by the reaper, on the test engine's swarm: at once when its orchestrator on
this host is dead, whoever made it once older than the grace; a live owner's secret stays, and
one a service mounts always does."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest
from docker.types import SecretReference, ServiceMode
from tests.orchestrator.conftest import RIG_IMAGE
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


@pytest.mark.anyio
async def test_a_token_secret_made_elsewhere_goes_once_older_than_the_grace_unless_mounted(
    docker_client: docker.DockerClient,
    config: OrchestratorConfig,
    make_secret: Callable[[dict[str, str]], str],
) -> None:
    """Made by an orchestrator on another host, with no expiry: nothing here can tell that its
    maker is dead, so only its age can; a secret some service mounts is in use, whatever its age
    and whoever's service that is (the engine would refuse to remove it)."""
    tag = secrets.token_hex(3)
    elsewhere = make_secret(labels_of("oleftover-elsewhere", f"selsewhere{tag}", host="another-host"))
    mounted = make_secret(labels_of("oleftover-elsewhere", f"smounted{tag}", host="another-host"))
    (mounted_id,) = session_secrets(docker_client, mounted)
    service = docker_client.services.create(  # not a rig: no labels, no task (zero replicas)
        RIG_IMAGE,
        name=f"deskrig-test-mounts-{tag}",
        mode=ServiceMode("replicated", replicas=0),
        secrets=[SecretReference(mounted_id, f"deskrig-{mounted}-tokens")],
    )
    try:
        runtime = SwarmRuntime(config.model_copy(update={"runtime": "swarm"}), docker_client)

        async def reaped(**options: float) -> set[str]:
            swept = await Reaper(runtime, "oleftover-reaper", set, **options).sweep()
            return {r.handle.session_id for r in swept} & {elsewhere, mounted}

        assert await reaped() == set()  # younger than the grace
        assert await reaped(leftover_grace=0) == {elsewhere}
        assert session_secrets(docker_client, elsewhere) == []
        assert session_secrets(docker_client, mounted) == [mounted_id]
    finally:
        service.remove()
