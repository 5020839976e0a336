"""What idle Docker rigs cost the host: no health probe exec'd into them, and one engine listing
for every session's status instead of an inspect each."""

from __future__ import annotations

import functools

import docker
import pytest

from deskrig.bench.stats import at_once
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.docker_backend import DockerRuntime
from deskrig.orchestrator.models import OrchestratorConfig, SessionSpec
from deskrig.orchestrator.runtime import RigHandle, managed_labels

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

#: Long enough that no watch ticks during the test, and a listing serves it throughout.
WATCH_INTERVAL = 60.0


async def test_idle_rigs_are_not_probed_and_their_statuses_share_one_listing(
    rig_image: str, config: OrchestratorConfig
) -> None:
    """The image's HEALTHCHECK exec'd a probe into every rig every 2 s (about 30 ms of the host's
    CPU a second per idle rig); each session's watch inspected its container every second (about
    3 ms). Now the probe is off and statuses asked together cost one listing."""
    client = docker.from_env()
    engine_requests: list[str] = []
    client.api.hooks["response"].append(
        lambda response, **_: engine_requests.append(response.request.path_url)
    )
    config = config.model_copy(update={"watch_interval": WATCH_INTERVAL})
    runtime = DockerRuntime(config, client)
    try:
        async with Orchestrator(config, runtime) as orchestrator:
            infos = await at_once(
                [lambda: orchestrator.start(SessionSpec(image=rig_image, record=False))] * 2
            )
            handles: list[RigHandle] = []
            for info in infos:
                handles += await runtime.list_by_label(managed_labels(info.id))
                attrs = client.containers.get(info.container or "").attrs
                assert attrs["Config"]["Healthcheck"]["Test"] == ["NONE"]
                assert "Health" not in attrs["State"]  # no probe has run, or ever will

            engine_requests.clear()
            states = await at_once([functools.partial(runtime.status, handle) for handle in handles * 3])
            assert [state.running for state in states] == [True] * 6
            assert len(engine_requests) <= 1, engine_requests  # the listing, unless a recent one serves
            assert all(path.split("?")[0].endswith("/containers/json") for path in engine_requests), (
                engine_requests
            )
    finally:
        client.close()
