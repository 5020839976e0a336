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
from contextlib import contextmanager
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
#: compose.yaml's rig services: their profile (None: the default service) and the variable
#: holding their published port.
SERVICES: dict[str, tuple[str | None, str]] = {
    "rig": (None, "DESKRIG_PORT"),
    "example-qt": ("qt", "DESKRIG_QT_PORT"),
    "example-sway": ("sway", "DESKRIG_SWAY_PORT"),
}
#: Every profile, so that listing and taking down a stack sees all of its services.
ALL_PROFILES = [arg for profile, _ in SERVICES.values() if profile for arg in ("--profile", profile)]
#: The service running the GTK example under each desktop backend.
GTK_SERVICE = {"x11": "rig", "sway": "example-sway"}


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
    """Docker engine, compose plugin and all three images, ready (built or reused) once per run,
    as ``latest`` (the tag the tests use, whatever DESKRIG_TAG the caller has)."""
    log = tmp_path_factory.mktemp("build") / "build-images.log"
    env = os.environ | {"DESKRIG_PROGRESS": "plain"}
    with log.open("w") as out:
        result = subprocess.run(
            [str(REPO / "scripts" / "build-images"), "--tag", "latest"],
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
    """One compose project from the repository's compose.yaml, isolated from .env and other runs.

    ``service`` is the one ``up()``, ``url``, ``container()`` and ``logs()`` mean when not told."""

    workdir: Path
    service: str = "rig"
    project: str = field(default_factory=lambda: f"deskrig-test-{uuid.uuid4().hex[:8]}")
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    ports: dict[str, int] = field(default_factory=lambda: {service: free_port() for service in SERVICES})
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.artifacts = self.workdir / "artifacts"
        self.artifacts.mkdir(parents=True, exist_ok=True)
        # An empty env file: a developer's .env must not leak into the tests.
        self.env_file = self.workdir / "empty.env"
        self.env_file.write_text("")

    @property
    def port(self) -> int:
        return self.ports[self.service]

    @property
    def url(self) -> str:
        return self.url_of(self.service)

    def url_of(self, service: str) -> str:
        return f"http://127.0.0.1:{self.ports[service]}/mcp"

    def env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("DESKRIG_", "COMPOSE_"))}
        ports = {SERVICES[service][1]: str(port) for service, port in self.ports.items()}
        return (
            base
            | ports
            | {"DESKRIG_TOKEN": self.token, "DESKRIG_ARTIFACTS": str(self.artifacts)}
            | self.extra_env
        )

    def compose(self, *args: str, timeout: float = UP_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        argv = ["docker", "compose", "-p", self.project, "-f", str(COMPOSE_FILE)]
        argv += ["--env-file", str(self.env_file), *args]
        return run(argv, env=self.env(), timeout=timeout)

    def up(self, service: str | None = None) -> None:
        """``up -d --wait`` of one service (default: the stack's) in its profile."""
        service = service or self.service
        profile = SERVICES[service][0]
        profiles = ["--profile", profile] if profile else []
        result = self.compose(*profiles, "up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), service)
        if result.returncode != 0:
            logs = self.compose(*profiles, "logs", "--tail", "30").stdout
            raise AssertionError(f"compose up failed:\n{result.stderr}\n--- logs ---\n{logs}")

    def container(self, service: str | None = None) -> str:
        service = service or self.service
        result = self.compose(*ALL_PROFILES, "ps", "-a", "-q", service)
        ids = result.stdout.split()
        assert len(ids) == 1, (service, result.stdout, result.stderr)
        return ids[0]

    def logs(self, service: str | None = None) -> str:
        result = self.compose(*ALL_PROFILES, "logs", "--no-color", service or self.service)
        return result.stdout + result.stderr

    def down(self) -> None:
        self.compose(*ALL_PROFILES, "down", "-v", "--remove-orphans", "-t", "5")


@contextmanager
def running_stack(
    tmp_path_factory: pytest.TempPathFactory, service: str, **env: str
) -> Iterator[ComposeStack]:
    """`docker compose up -d --wait` of ``service`` in a project of its own; down afterwards."""
    stack = ComposeStack(tmp_path_factory.mktemp(f"compose-{service}"), service=service, extra_env=env)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


@pytest.fixture(scope="module")
def gtk_stack(rig_images: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeStack]:
    """The default service (the GTK example under X11), shared by a module."""
    with running_stack(tmp_path_factory, "rig") as stack:
        yield stack


@pytest.fixture(scope="module", params=list(GTK_SERVICE))
def backend_stack(
    request: pytest.FixtureRequest, rig_images: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComposeStack]:
    """The GTK example under each backend (``request.param``): the x11 one is ``gtk_stack``, the
    sway one the `sway` profile's service, each up once per module."""
    if request.param == "x11":
        yield request.getfixturevalue("gtk_stack")
        return
    with running_stack(tmp_path_factory, GTK_SERVICE[request.param]) as stack:
        yield stack


def wait_exited(container: str, timeout: float = 60.0) -> dict[str, Any]:
    """The container's State once it has stopped running; fails if it keeps running."""
    return poll(
        f"container {container[:12]} to exit",
        lambda: (state := inspect(container)["State"])["Status"] == "exited" and state,
        timeout=timeout,
        interval=DOCKER_POLL_S,
    )
