"""The CLI and the background service: start/ls/logs/artifacts/stop from separate commands, and
a restarted service settling what an orchestrator killed with SIGKILL left behind."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import docker
import httpx
import pytest
from tests.orchestrator.helpers import Cli, clicks, containers, kill_hard, turn_folders
from tests.polling import poll
from tests.server.rigproc import read_until_closed

from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.models import OrchestratorConfig, SessionSpec, SessionState
from deskrig.orchestrator.reaper import Lease
from deskrig.orchestrator.runtime import LABEL_LEASE
from deskrig.orchestrator.service import ServiceClient, read_state

pytestmark = pytest.mark.docker


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    cli = Cli(tmp_path)
    yield cli
    cli("orchestrator", "stop", check=False)


def test_cli_sessions_across_separate_commands(
    rig_image: str, cli: Cli, docker_client: docker.DockerClient
) -> None:
    started = cli("session", "start", "--image", rig_image, "--json")
    session = json.loads(started.stdout)
    assert set(session) == {"id", "mcp_url", "token", "artifacts_dir"}
    assert Path(session["artifacts_dir"]) == cli.artifacts_root.resolve() / session["id"]

    # The command has returned; the service it started keeps the session and its mirror going.
    state = read_state(cli.state_dir)
    assert state is not None and state.url.startswith("http://127.0.0.1:")
    assert (cli.state_dir / "orchestrator.json").stat().st_mode & 0o077 == 0
    assert httpx.get(state.url + "/sessions").status_code == 401
    anyio.run(clicks, session["mcp_url"], session["token"], [(120, 80)])

    listed = cli("session", "ls")
    assert session["id"] in listed.stdout and "ready" in listed.stdout and session["mcp_url"] in listed.stdout
    with ServiceClient(state.url, state.token) as api:
        poll("the turn mirrored", lambda: api.get(session["id"]).turns == 1)
    assert json.loads(cli("session", "ls", "--json").stdout)[0]["mirror"]["turns"] == 1
    assert "MCP over HTTP" in cli("session", "logs", session["id"]).stdout
    listing = json.loads(cli("session", "artifacts", session["id"], "--json").stdout)
    assert "turn-00001/action.json" in {item["path"] for item in listing["files"]}
    action = json.loads(cli("session", "artifacts", session["id"], "turn-00001/action.json").stdout)
    assert action["tool"] == "click"

    stopped = cli("session", "stop", session["id"])
    assert f"{session['id']} stopped" in stopped.stdout
    assert containers(docker_client, session=session["id"]) == []
    assert (Path(session["artifacts_dir"]) / "rig.log").exists()

    # A rig that cannot start: one line saying so, and where its log is (-v adds the details).
    failed = cli("session", "start", "--image", rig_image, "--app", "/bin/false", "-v", check=False)
    assert failed.returncode == 1 and failed.stdout == ""
    (line,) = (line for line in failed.stderr.splitlines() if line.startswith("deskrig: RIG_FAILED: "))
    failed_id = line.removeprefix("deskrig: RIG_FAILED: session ").split()[0]
    assert line.endswith(f"`deskrig session logs {failed_id}` shows the rig's log.")
    assert "deskrig: details: " in failed.stderr

    cli("orchestrator", "stop")
    assert read_state(cli.state_dir) is None
    assert cli("orchestrator", "status", check=False).returncode == 1


def test_a_sigkilled_orchestrators_sessions_are_readopted_or_failed_by_the_next(
    rig_image: str, cli: Cli, docker_client: docker.DockerClient
) -> None:
    first = cli.serve()
    live = json.loads(cli("session", "start", "--image", rig_image, "--name", "live", "--json").stdout)
    lost = json.loads(cli("session", "start", "--image", rig_image, "--no-record", "--json").stdout)
    anyio.run(clicks, live["mcp_url"], live["token"], [(120, 80)])
    with ServiceClient(first.url, first.token) as api:
        poll("the first turn mirrored", lambda: api.get(live["id"]).turns == 1)

    kill_hard(first)
    (dying,) = containers(docker_client, session=lost["id"])
    dying.kill()  # this rig dies while no orchestrator watches it

    second = cli.serve()
    assert second.orchestrator_id != first.orchestrator_id
    # Settled at start-up: the dead rig's session failed, with why; its container saved and removed.
    failed = json.loads((Path(lost["artifacts_dir"]) / "session.json").read_text())
    assert failed["state"] == "failed"
    assert failed["reason"] == "orchestrator restarted: its rig container had exited with code 137"
    assert failed["error"]["code"] == "RIG_FAILED" and failed["ended_at"].endswith("Z")
    assert containers(docker_client, session=lost["id"]) == []
    assert (Path(lost["artifacts_dir"]) / "rig.log").exists()

    # The live rig was re-adopted: listed, held under a lease no reaper takes for an orphan's ...
    status = json.loads(cli("orchestrator", "status", "--json").stdout)
    assert status["orchestrator_id"] == second.orchestrator_id and status["sessions"] == 1
    (adopted,) = json.loads(cli("session", "ls", "--json").stdout)
    assert (adopted["id"], adopted["state"], adopted["mcp_url"]) == (live["id"], "ready", live["mcp_url"])
    assert adopted["spec"]["name"] == "live" and "live" in cli("session", "ls").stdout
    (container,) = containers(docker_client, session=live["id"])
    assert Lease.held(Path(container.labels[LABEL_LEASE]))
    # ... and its recording carries on where the mirror had got to.
    anyio.run(clicks, live["mcp_url"], live["token"], [(130, 90)])
    with ServiceClient(second.url, second.token) as api:
        poll("the second turn mirrored", lambda: api.get(live["id"]).turns == 2)
    assert turn_folders(Path(live["artifacts_dir"])) == ["turn-00001", "turn-00002"]

    assert f"{live['id']} stopped" in cli("session", "stop", live["id"]).stdout
    assert containers(docker_client, session=live["id"]) == []
    record = json.loads((Path(live["artifacts_dir"]) / "session.json").read_text())
    assert (record["state"], record["reason"]) == ("stopped", "stopped by request")
    assert all(record[key].endswith("Z") for key in ("created_at", "ready_at", "ended_at"))


def test_an_orchestrator_that_does_not_adopt_fails_a_sigkilled_ones_sessions(
    rig_image: str, cli: Cli, docker_client: docker.DockerClient
) -> None:
    first = cli.serve()
    with ServiceClient(first.url, first.token) as api:
        ready = api.start(SessionSpec(image=rig_image, record=False))
        starting = api.start(SessionSpec(image=rig_image, record=False), wait=False)
        poll("its container created", lambda: api.get(starting.id).container is not None)
        assert api.get(starting.id).state is SessionState.STARTING
    kill_hard(first)

    # An in-process orchestrator (a pytest run's, say) does not adopt: its clients are its own.
    config = OrchestratorConfig(state_dir=cli.state_dir, artifacts_root=cli.artifacts_root)
    assert not config.adopt_rigs

    async def restart() -> None:
        async with Orchestrator(config) as second:
            assert second.list() == []

    anyio.run(restart)
    reasons = {
        info.id: json.loads((Path(info.artifacts_dir) / "session.json").read_text())["reason"]
        for info in (ready, starting)
    }
    assert reasons == {
        ready.id: "orchestrator restarted: this orchestrator does not re-adopt rigs (adopt_rigs is off), "
        "so its rig was removed",
        starting.id: "orchestrator restarted: the session was still starting when its orchestrator stopped",
    }
    assert containers(docker_client, session=ready.id) == containers(docker_client, session=starting.id) == []


def test_service_closes_connections_that_never_finish_their_headers(cli: Cli) -> None:
    cli("orchestrator", "serve", "--background")
    state = read_state(cli.state_dir)
    assert state is not None
    host, port = state.url.removeprefix("http://").rsplit(":", 1)
    slow = socket.create_connection((host, int(port)))
    slow.sendall(f"GET /healthz HTTP/1.1\r\nhost: {host}\r\n".encode())
    assert read_until_closed(slow, timeout=20).startswith(b"HTTP/1.1 408 ")
