"""Helpers shared by the orchestrator tests: polling and inspection, the command line in a
subprocess, and user test modules run with the pytest plugin."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.abc
import docker
import httpx
import kubernetes_validate
from docker.models.containers import Container
from tests.orchestrator.runtimes import listed_containers
from tests.polling import poll

from deskrig.client import connect
from deskrig.orchestrator.reaper import host_id
from deskrig.orchestrator.runtime import (
    LABEL_LEASE,
    LABEL_MANAGED,
    LABEL_ORCHESTRATOR,
    LABEL_SESSION,
    managed_labels,
    rig_labels,
)
from deskrig.orchestrator.service import ServiceState, read_state

T = TypeVar("T")
#: The Kubernetes version whose schemas every object the Kubernetes runtime renders must match.
K8S_VERSION = "1.37.0"


def validate(obj: dict[str, Any]) -> None:
    """``obj`` against the Kubernetes schemas, strict: an unknown or misspelt field fails too."""
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


async def eventually(what: str, check: Callable[[], T | None], timeout: float = 30.0) -> T:
    """``check()`` until truthy (polled every 50 ms); fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
        await anyio.sleep(0.05)


def labels_of(
    owner: str,
    session: str,
    *,
    lease: Path | None = None,
    host: str | None = None,
    expires_at: float | None = None,
) -> dict[str, str]:
    """A rig's labels as ``owner``'s orchestrator writes them (no lease file unless one is given)."""
    return rig_labels(
        orchestrator_id=owner,
        session_id=session,
        expires_at=expires_at,
        host=host or host_id(),
        lease=lease or Path("/nonexistent/lease.lock"),
    )


def containers(client: docker.DockerClient, **labels: str) -> list[Container]:
    """Containers (running or not) carrying the given deskrig labels: orchestrator=, session=."""
    names = {"orchestrator": LABEL_ORCHESTRATOR, "session": LABEL_SESSION}
    wanted = {**managed_labels(), **{names[key]: value for key, value in labels.items()}}
    filters = [f"{key}={value}" for key, value in wanted.items()]
    return listed_containers(client, {"label": filters})


def turn_folders(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("turn-*") if p.is_dir())


async def call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> Any:
    async with connect(url, token) as client:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result
        return result


async def clicks(url: str, token: str, points: list[tuple[int, int]]) -> None:
    """One click per point, over one MCP connection: one turn folder each."""
    async with connect(url, token) as client:
        for x, y in points:
            result = await client.call_tool("click", {"x": x, "y": y})
            assert not result.is_error, result


class CuttableProxy:
    """A TCP proxy to a rig whose connections a test can cut, and which can refuse new ones."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.refusing = False
        self.port = 0
        self._open: list[anyio.abc.ByteStream] = []

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        task_status.started()
        await listener.serve(self._handle)

    async def _handle(self, client: anyio.abc.SocketStream) -> None:
        if self.refusing:
            await client.aclose()
            return
        upstream = await anyio.connect_tcp("127.0.0.1", self.target_port)
        self._open += [client, upstream]

        async def pump(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
            try:
                async for chunk in source:
                    await sink.send(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass
            finally:
                await sink.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump, client, upstream)
            tg.start_soon(pump, upstream, client)

    async def cut(self) -> None:
        """Drop every open connection, as a network blip would."""
        streams, self._open = self._open, []
        for stream in streams:
            await stream.aclose()


class Cli:
    """``deskrig`` commands in subprocesses, with a state directory and artifacts root of their own."""

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

    def serve(self, *flags: str) -> ServiceState:
        """Start the service in the background (with ``flags``); where it runs."""
        self("orchestrator", "serve", "--background", *flags)
        state = read_state(self.state_dir)
        assert state is not None
        return state


def kill_hard(service: ServiceState) -> None:
    os.kill(service.pid, signal.SIGKILL)
    poll("the service to die", lambda: not httpx_alive(service.url))


def httpx_alive(url: str) -> bool:
    try:
        httpx.get(url + "/healthz", timeout=1)
    except httpx.HTTPError:
        return False
    return True


#: A user's test module for the pytest plugin (run by :func:`run_user_tests`).
USER_TESTS = """
import anyio
import pytest

SHARED = []


async def click(rig, x, y):
    async with rig.client() as client:
        result = await client.call_tool("click", {"x": x, "y": y})
        assert not result.is_error


def test_passes(deskrig_rig):
    anyio.run(click, deskrig_rig, 10, 10)
    assert deskrig_rig.mcp_url.startswith("http://127.0.0.1:")


def test_fails(deskrig_rig):
    anyio.run(click, deskrig_rig, 20, 20)
    assert False, "deliberately"


@pytest.mark.deskrig(scope="session", video=False)
def test_shared_first(deskrig_rig):
    SHARED.append(deskrig_rig.id)


@pytest.mark.deskrig(scope="session", video=False)
def test_shared_second(deskrig_rig):
    SHARED.append(deskrig_rig.id)
    assert SHARED[0] == SHARED[1]
"""


#: Each test asks the plugin for the session spec it would start, and checks its backend.
BACKEND_TESTS = """
import pytest

from deskrig.pytest_fixtures import PluginOptions


def backend(request):
    spec, _ = PluginOptions.from_config(request.config).request(request.node)
    return spec.backend


def test_from_the_option(request):
    assert backend(request) == "sway"


@pytest.mark.deskrig(backend="x11")
def test_the_marker_wins(request):
    assert backend(request) == "x11"


@pytest.mark.deskrig(backend="wayland")
def test_a_bad_marker_backend(request):
    backend(request)
"""


def run_user_tests(
    tmp_path: Path, source: str, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess on ``source`` (as test_user.py), with the installed plugin."""
    (tmp_path / "test_user.py").write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_user.py", *args],
        cwd=tmp_path,
        env={**os.environ, "DESKRIG_STATE_DIR": str(tmp_path / "state")},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def deskrig(tmp_path: Path, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """``deskrig *args`` in a subprocess, its state under ``tmp_path``, ``env`` added."""
    environ = {**os.environ, "DESKRIG_STATE_DIR": str(tmp_path / "state"), **env}
    return subprocess.run(
        [sys.executable, "-m", "deskrig.cli", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def services_of(client: docker.DockerClient, **labels: str) -> list[dict[str, Any]]:
    """Deskrig's services (with ``labels``), by one list call (see runtimes.container_names)."""
    wanted = {LABEL_MANAGED: "1", **labels}
    found: list[dict[str, Any]] = client.api.services(
        filters={"label": [f"{k}={v}" for k, v in wanted.items()]}
    )
    return found


def leftovers_under(client: docker.DockerClient, state_dir: Path) -> list[str]:
    """Services, task containers and secrets of the orchestrators whose leases were in ``state_dir``."""
    services = [s["Spec"]["Name"] for s in services_of(client) if under(s["Spec"]["Labels"], state_dir)]
    tasks = [
        entry["Names"][0]
        for entry in client.api.containers(all=True, filters={"label": LABEL_LEASE})
        if under(entry["Labels"], state_dir)
    ]
    secrets = [
        s["Spec"]["Name"]
        for s in client.api.secrets(filters={"label": LABEL_LEASE})
        if under(s["Spec"]["Labels"], state_dir)
    ]
    return services + tasks + secrets


def under(labels: dict[str, str], state_dir: Path) -> bool:
    return labels.get(LABEL_LEASE, "").startswith(str(state_dir))
