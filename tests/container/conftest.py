"""Container tests: the images and compose.yaml on a real Docker engine.

The engine, the compose plugin and the images are made ready once per run (``scripts/build-images``
runs ``scripts/docker-setup`` and reuses the build cache); every compose stack here is its own
project with a free port, a fresh token and a temporary artifacts dir, and is taken down after.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult
from tests.polling import poll

from deskrig.client import connect

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "compose.yaml"
RIG_IMAGE = "deskrig/rig:latest"
GTK_IMAGE = "deskrig/example-gtk:latest"
BUILD_TIMEOUT_S = 3600
UP_TIMEOUT_S = 180
#: How long a running stack gets to show a change, and how often to ask Docker (each ask costs).
STACK_TIMEOUT_S = 60.0
DOCKER_POLL_S = 0.25


def run(
    argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run(["docker", *args], timeout=timeout)


def inspect(container: str) -> dict[str, Any]:
    result = docker("inspect", container)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)[0]  # type: ignore[no-any-return]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def call_tool(url: str, token: str, tool: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
    """One MCP tool call over Streamable HTTP with the bearer token, from a fresh client."""

    async def go() -> CallToolResult:
        async with connect(url, token) as client:
            return await client.call_tool(tool, arguments or {})

    return anyio.run(go)


@pytest.fixture(scope="session")
def rig_images(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Docker engine, compose plugin and all three images, ready (built or reused) once per run."""
    log = tmp_path_factory.mktemp("build") / "build-images.log"
    env = os.environ | {"DESKRIG_PROGRESS": "plain"}
    with log.open("w") as out:
        result = subprocess.run(
            [str(REPO / "scripts" / "build-images")],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    if result.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        pytest.fail(f"scripts/build-images failed ({result.returncode}); last lines of {log}:\n{tail}")


@dataclass
class ComposeStack:
    """One compose project from the repository's compose.yaml, isolated from .env and other runs."""

    workdir: Path
    project: str = field(default_factory=lambda: f"deskrig-test-{uuid.uuid4().hex[:8]}")
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    port: int = field(default_factory=free_port)
    qt_port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.artifacts = self.workdir / "artifacts"
        self.artifacts.mkdir(parents=True, exist_ok=True)
        # An empty env file: a developer's .env must not leak into the tests.
        self.env_file = self.workdir / "empty.env"
        self.env_file.write_text("")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("DESKRIG_", "COMPOSE_"))}
        return (
            base
            | {
                "DESKRIG_TOKEN": self.token,
                "DESKRIG_PORT": str(self.port),
                "DESKRIG_QT_PORT": str(self.qt_port),
                "DESKRIG_ARTIFACTS": str(self.artifacts),
            }
            | self.extra_env
        )

    def compose(self, *args: str, timeout: float = UP_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        argv = ["docker", "compose", "-p", self.project, "-f", str(COMPOSE_FILE)]
        argv += ["--env-file", str(self.env_file), *args]
        return run(argv, env=self.env(), timeout=timeout)

    def up(self, *services: str, profile: str | None = None) -> None:
        profiles = ["--profile", profile] if profile else []
        result = self.compose(*profiles, "up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), *services)
        if result.returncode != 0:
            logs = self.compose(*profiles, "logs", "--tail", "30").stdout
            raise AssertionError(f"compose up failed:\n{result.stderr}\n--- logs ---\n{logs}")

    def container(self, service: str = "rig") -> str:
        result = self.compose("--profile", "qt", "ps", "-a", "-q", service)
        ids = result.stdout.split()
        assert len(ids) == 1, (service, result.stdout, result.stderr)
        return ids[0]

    def logs(self, service: str = "rig") -> str:
        result = self.compose("--profile", "qt", "logs", "--no-color", service)
        return result.stdout + result.stderr

    def down(self) -> None:
        self.compose("--profile", "qt", "down", "-v", "--remove-orphans", "-t", "5")


@pytest.fixture(scope="module")
def gtk_stack(rig_images: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeStack]:
    """`docker compose up -d --wait` of the default service (the GTK example), shared by a module."""
    stack = ComposeStack(tmp_path_factory.mktemp("compose"))
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


def wait_exited(container: str, timeout: float = 60.0) -> dict[str, Any]:
    """The container's State once it has stopped running; fails if it keeps running."""
    return poll(
        f"container {container[:12]} to exit",
        lambda: (state := inspect(container)["State"])["Status"] == "exited" and state,
        timeout=timeout,
        interval=DOCKER_POLL_S,
    )
