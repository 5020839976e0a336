"""The CLI and the background service: start/ls/logs/artifacts/stop from separate commands, and
the reaper cleaning up after an orchestrator killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import docker
import httpx
import pytest
from tests.orchestrator.helpers import clicks, containers
from tests.server.rigproc import poll, read_until_closed

from deskrig.orchestrator.service import ServiceClient, read_state

pytestmark = pytest.mark.docker


class Cli:
    def __init__(self, tmp_path: Path) -> None:
        self.state_dir = tmp_path / "state"
        self.artifacts_root = tmp_path / "artifacts"
        self.env = {
            **os.environ,
            "DESKRIG_STATE_DIR": str(self.state_dir),
            "DESKRIG_ARTIFACTS_ROOT": str(self.artifacts_root),
        }

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "deskrig.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if check:
            assert done.returncode == 0, f"deskrig {' '.join(args)}: {done.returncode}\n{done.stderr}"
        return done


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

    cli("orchestrator", "stop")
    assert read_state(cli.state_dir) is None
    assert cli("orchestrator", "status", check=False).returncode == 1


def test_sigkilled_orchestrator_leftovers_are_reaped_by_the_next(
    rig_image: str, cli: Cli, docker_client: docker.DockerClient
) -> None:
    cli("orchestrator", "serve", "--background")
    first = read_state(cli.state_dir)
    assert first is not None
    session = json.loads(cli("session", "start", "--image", rig_image, "--no-record", "--json").stdout)

    os.kill(first.pid, signal.SIGKILL)
    poll("the service to die", lambda: not httpx_alive(first.url))
    (leftover,) = containers(docker_client, session=session["id"])
    assert leftover.status == "running"

    cli("orchestrator", "serve", "--background")
    second = read_state(cli.state_dir)
    assert second is not None and second.orchestrator_id != first.orchestrator_id
    poll("the leftover reaped", lambda: containers(docker_client, session=session["id"]) == [], 30)


def test_service_closes_connections_that_never_finish_their_headers(cli: Cli) -> None:
    cli("orchestrator", "serve", "--background")
    state = read_state(cli.state_dir)
    assert state is not None
    host, port = state.url.removeprefix("http://").rsplit(":", 1)
    slow = socket.create_connection((host, int(port)))
    slow.sendall(f"GET /healthz HTTP/1.1\r\nhost: {host}\r\n".encode())
    assert read_until_closed(slow, timeout=20).startswith(b"HTTP/1.1 408 ")


def httpx_alive(url: str) -> bool:
    try:
        httpx.get(url + "/healthz", timeout=1)
    except httpx.HTTPError:
        return False
    return True
