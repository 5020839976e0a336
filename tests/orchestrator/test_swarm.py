"""The swarm runtime on a single-node swarm on the test engine: its services' hardening, resources
and placement, the CLI and the pytest plugin with ``--runtime swarm``, and a SIGKILLed service's
swarm sessions settled by the next (the rest of the runtime contract: test_runtime_contract.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import anyio
import docker
import pytest
from tests.orchestrator.helpers import (
    USER_TESTS,
    Cli,
    clicks,
    eventually,
    kill_hard,
    leftovers_under,
    run_user_tests,
    services_of,
    turn_folders,
)
from tests.orchestrator.runtimes import RIG_IMAGE, ensure_swarm, listed_containers
from tests.polling import poll

from deskrig.errors import ErrorCode
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.models import OrchestratorConfig, SessionSpec
from deskrig.orchestrator.reaper import Lease
from deskrig.orchestrator.runtime import LABEL_LEASE, LABEL_MANAGED, LABEL_ORCHESTRATOR, LABEL_SESSION
from deskrig.orchestrator.service import ServiceClient

pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def swarm() -> Iterator[docker.DockerClient]:
    """The test engine as a swarm manager, with the shared rig image (never built here)."""
    client = docker.from_env()
    client.images.get(RIG_IMAGE)
    ensure_swarm(client)
    yield client
    client.close()


@pytest.fixture
def this_node(swarm: docker.DockerClient) -> str:
    """The placement constraint that keeps a test's rigs on this engine, where it inspects them."""
    return ensure_swarm(swarm)


@pytest.fixture
def swarm_config(config: OrchestratorConfig, this_node: str) -> OrchestratorConfig:
    return config.model_copy(update={"runtime": "swarm", "placement_constraints": [this_node]})


def active_nodes(client: docker.DockerClient) -> int:
    return sum(
        node["Status"]["State"] == "ready" and node["Spec"]["Availability"] == "active"
        for node in client.api.nodes()
    )


def secrets_of(client: docker.DockerClient, session_id: str) -> list[str]:
    """The ids of the session's secrets."""
    return [secret["ID"] for secret in client.api.secrets(filters={"label": f"{LABEL_SESSION}={session_id}"})]


@pytest.mark.anyio
async def test_a_swarm_rig_is_one_hardened_service_with_reservations_limits_and_labels(
    swarm: docker.DockerClient, swarm_config: OrchestratorConfig
) -> None:
    async with Orchestrator(swarm_config) as orchestrator:
        assert orchestrator.capacity == swarm_config.max_sessions * active_nodes(swarm)
        info = await orchestrator.start(SessionSpec(image=RIG_IMAGE))
        (service,) = services_of(swarm, **{LABEL_SESSION: info.id})
        spec = service["Spec"]
        task = spec["TaskTemplate"]
        container = task["ContainerSpec"]
        assert spec["Mode"] == {"Replicated": {"Replicas": 1}}
        assert task["RestartPolicy"]["Condition"] == "none"
        assert task["Placement"]["Constraints"] == swarm_config.placement_constraints
        assert container["User"] == "1000:1000" and container["ReadOnly"] is True
        assert container["CapabilityDrop"] == ["ALL"]
        assert container["Healthcheck"]["Test"] == ["NONE"]
        assert [m["Target"] for m in container["Mounts"]] == ["/tmp"]
        assert "Command" not in container  # the image's entrypoint, the rig, stays
        # Its token is a secret only the rig user reads (the rig refuses a secret's default 0444),
        # not a variable that `docker service inspect` shows.
        (secret,) = container["Secrets"]
        assert secret["File"] == {"Name": "deskrig-tokens", "UID": "1000", "GID": "1000", "Mode": 0o400}
        assert not any(var.startswith("DESKRIG_TOKEN=") for var in container["Env"])
        assert info.token and info.token not in json.dumps(spec)
        assert secrets_of(swarm, info.id) == [secret["SecretID"]]
        assert task["Resources"]["Limits"] == {"MemoryBytes": 2 * 1024**3, "Pids": 1024}
        assert task["Resources"]["Reservations"] == {"NanoCPUs": 100_000_000, "MemoryBytes": 256 * 1024**2}
        assert spec["EndpointSpec"]["Ports"][0]["PublishMode"] == "host"
        assert spec["Labels"][LABEL_ORCHESTRATOR] == orchestrator.id

        # The task's container, as the node runs it.
        (running,) = listed_containers(swarm, {"label": f"{LABEL_SESSION}={info.id}"}, stopped_too=False)
        host = running.attrs["HostConfig"]
        assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"] and host["Privileged"] is False
        assert host["PidsLimit"] == 1024 and host["Memory"] == 2 * 1024**3
        assert LABEL_MANAGED not in running.labels  # the docker runtime's reaper leaves it alone

        # Recording works on its one writable tmpfs, and reaches the host over the feed.
        assert info.mcp_url and info.token
        await clicks(info.mcp_url, info.token, [(40, 40)])
        directory = Path(info.artifacts_dir)
        await eventually("the turn on the host", lambda: turn_folders(directory) == ["turn-00001"])
        await orchestrator.stop(info.id)
        assert services_of(swarm, **{LABEL_SESSION: info.id}) == []
        assert secrets_of(swarm, info.id) == []
        # Its container has stopped too (the swarm stops it a second or two after the service
        # goes, and removes it soon after): a stopped session's slot does not free while its rig runs.
        assert listed_containers(swarm, {"label": f"{LABEL_SESSION}={info.id}"}, stopped_too=False) == []


@pytest.mark.anyio
async def test_a_rig_no_node_may_run_fails_and_its_service_goes(
    swarm: docker.DockerClient, swarm_config: OrchestratorConfig
) -> None:
    config = swarm_config.model_copy(
        update={"placement_constraints": ["node.labels.deskrig-nowhere==yes"], "ready_timeout": 3.0}
    )
    async with Orchestrator(config) as orchestrator:
        with pytest.raises(Exception) as raised:
            await orchestrator.start(SessionSpec(image=RIG_IMAGE, record=False))
        assert getattr(raised.value, "code", None) is ErrorCode.RIG_FAILED
        assert "not placed within 3 s: task pending" in str(raised.value)
        await eventually(
            "its service removed", lambda: services_of(swarm, **{LABEL_ORCHESTRATOR: orchestrator.id}) == []
        )


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    cli = Cli(tmp_path)
    yield cli
    cli("orchestrator", "stop", check=False)


def test_a_sigkilled_swarm_services_sessions_are_readopted_or_failed_and_nothing_leaks(
    swarm: docker.DockerClient, cli: Cli, this_node: str
) -> None:
    cli.env["DESKRIG_PLACEMENT_CONSTRAINTS"] = this_node  # the rig it kills must be on this engine
    first = cli.serve("--runtime", "swarm")
    assert first.runtime == "swarm"
    start = ("session", "start", "--image", RIG_IMAGE, "--runtime", "swarm", "--json")
    live = json.loads(cli(*start, "--name", "live").stdout)
    lost = json.loads(cli(*start, "--no-record").stdout)
    anyio.run(clicks, live["mcp_url"], live["token"], [(120, 80)])
    with ServiceClient(first.url, first.token) as api:
        poll("the first turn mirrored", lambda: api.get(live["id"]).turns == 1)

    kill_hard(first)
    (dying,) = listed_containers(swarm, {"label": f"{LABEL_SESSION}={lost['id']}"}, stopped_too=False)
    dying.kill()  # this rig dies while no orchestrator watches it

    second = cli.serve("--runtime", "swarm")
    failed = json.loads((Path(lost["artifacts_dir"]) / "session.json").read_text())
    assert (failed["state"], failed["reason"]) == (
        "failed",
        "orchestrator restarted: its rig container had exited with code 137",
    )
    assert services_of(swarm, **{LABEL_SESSION: lost["id"]}) == []

    (adopted,) = json.loads(cli("session", "ls", "--json").stdout)
    assert (adopted["id"], adopted["state"], adopted["mcp_url"]) == (live["id"], "ready", live["mcp_url"])
    (service,) = services_of(swarm, **{LABEL_SESSION: live["id"]})
    assert Lease.held(Path(service["Spec"]["Labels"][LABEL_LEASE]))
    anyio.run(clicks, live["mcp_url"], live["token"], [(130, 90)])
    with ServiceClient(second.url, second.token) as api:
        poll("the second turn mirrored", lambda: api.get(live["id"]).turns == 2)

    # A session on another runtime is refused by this service, rather than started on swarm.
    refused = cli("session", "start", "--image", RIG_IMAGE, "--runtime", "docker", check=False)
    assert refused.returncode == 2  # the flag does not fit
    assert "runs the swarm runtime, not docker" in refused.stderr

    cli("orchestrator", "stop")
    poll(
        "no services or task containers left", lambda: leftovers_under(swarm, cli.state_dir) == [], timeout=60
    )
    record = json.loads((Path(live["artifacts_dir"]) / "session.json").read_text())
    assert record["state"] == "stopped"


def test_the_pytest_plugin_runs_its_rigs_on_swarm(swarm: docker.DockerClient, tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    run = run_user_tests(
        tmp_path,
        USER_TESTS,
        "--deskrig-image",
        RIG_IMAGE,
        "--deskrig-artifacts",
        str(artifacts),
        "--deskrig-runtime",
        "swarm",
    )
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "1 failed, 3 passed" in out and "runtime=swarm" in out
    kept = re.search(r"turn folders, video and rig\.log are kept in (\S+)", out)
    assert kept, out
    directory = Path(kept.group(1))
    assert turn_folders(directory) == ["turn-00001"]
    assert (directory / "recording.mp4").stat().st_size > 0
    assert [p.name for p in artifacts.iterdir()] == [directory.name]
    poll("no services left", lambda: leftovers_under(swarm, tmp_path / "state") == [], timeout=60)
