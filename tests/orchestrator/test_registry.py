"""The registry prefix, and ``deskrig images push`` into a real registry: Debian's
``docker-registry`` (the CNCF distribution registry), run here on a free loopback port with its own
config and storage under the test's temporary directory, and stopped after.

The shared ``deskrig/*:latest`` images are only read (not through the ``rig_image`` fixture, which
would rebuild them from this tree): the test pushes under a tag of its own and removes only the
local names it created.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx2
import pytest
from docker.errors import ImageNotFound
from tests.orchestrator.conftest import RIG_IMAGE
from tests.orchestrator.helpers import deskrig
from tests.polling import poll

from deskrig.errors import ConfigError
from deskrig.orchestrator.images import image_reference, split_tag
from deskrig.orchestrator.models import OrchestratorConfig

#: Pushing the ~600 MB rig image into the registry on a loaded 2-core machine.
PUSH_TIMEOUT = 600.0


@pytest.mark.parametrize(
    ("image", "registry", "reference"),
    [
        ("deskrig/rig:latest", None, "deskrig/rig:latest"),
        ("deskrig/rig:latest", "localhost:5000", "localhost:5000/deskrig/rig:latest"),
        ("deskrig/rig", "reg.example", "reg.example/deskrig/rig"),
        ("ubuntu:24.04", "10.0.0.5:5000", "10.0.0.5:5000/ubuntu:24.04"),
        ("ghcr.io/team/app:1", "localhost:5000", "ghcr.io/team/app:1"),  # names its registry already
        ("localhost:6000/app", "localhost:5000", "localhost:6000/app"),
    ],
)
def test_image_reference(image: str, registry: str | None, reference: str) -> None:
    assert image_reference(image, registry) == reference


@pytest.mark.parametrize("registry", ["http://reg:5000", "reg:5000/path", "reg:port", "-reg", "re g"])
def test_a_bad_registry_is_refused(registry: str) -> None:
    with pytest.raises(ConfigError):
        image_reference("deskrig/rig:latest", registry)
    with pytest.raises(ConfigError):
        OrchestratorConfig(registry=registry)


@pytest.mark.parametrize(
    ("image", "split"),
    [
        ("deskrig/rig:latest", ("deskrig/rig", "latest")),
        ("deskrig/rig", ("deskrig/rig", "latest")),
        ("localhost:5000/deskrig/rig", ("localhost:5000/deskrig/rig", "latest")),
        ("localhost:5000/deskrig/rig:t1", ("localhost:5000/deskrig/rig", "t1")),
    ],
)
def test_split_tag(image: str, split: tuple[str, str]) -> None:
    assert split_tag(image) == split


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running registry's HOST:PORT (loopback: the engine pushes to it without TLS)."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.fail("docker-registry is not installed: run scripts/setup (APT_PACKAGES)")
    root = tmp_path_factory.mktemp("registry")
    address = f"127.0.0.1:{_free_port()}"
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'storage'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: {address}}}\n"
    )
    with (root / "registry.log").open("wb") as log:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    try:

        def answers() -> bool:
            assert proc.poll() is None, (root / "registry.log").read_text()
            try:
                return httpx2.get(f"http://{address}/v2/", timeout=2).status_code == 200
            except httpx2.HTTPError:
                return False

        poll("the registry to answer /v2/", answers)
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _tags(registry: str, repository: str) -> list[str]:
    response = httpx2.get(f"http://{registry}/v2/{repository}/tags/list", timeout=10)
    return list(response.json().get("tags") or []) if response.status_code == 200 else []


@pytest.mark.docker
@pytest.mark.slow
def test_images_push_into_a_real_registry_and_pull_back(
    tmp_path: Path, registry: str, docker_client: docker.DockerClient
) -> None:
    tag = f"k8s-test-{secrets.token_hex(3)}"
    pushed_name = f"{registry}/deskrig/rig:{tag}"
    try:
        push = ["images", "push", "--registry", registry, "--tag", tag, "--json", RIG_IMAGE]
        done = deskrig(tmp_path, *push, timeout=PUSH_TIMEOUT)
        assert done.returncode == 0, done.stderr
        (pushed,) = json.loads(done.stdout)
        assert pushed["source"] == RIG_IMAGE
        assert pushed["reference"] == pushed_name
        assert pushed["digest"].startswith("sha256:")
        # The registry's own API lists it.
        assert tag in _tags(registry, "deskrig/rig")
        manifest = httpx2.get(
            f"http://{registry}/v2/deskrig/rig/manifests/{tag}",
            headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
            timeout=10,
        )
        assert manifest.headers["Docker-Content-Digest"] == pushed["digest"]
        # Pulled back (after dropping the local name the push made), it is the same image.
        docker_client.images.remove(pushed_name)
        pulled = docker_client.images.pull(f"{registry}/deskrig/rig", tag=tag)
        assert pulled.id == docker_client.images.get(RIG_IMAGE).id
    finally:
        with contextlib.suppress(ImageNotFound):
            docker_client.images.remove(pushed_name)  # only the name this test made


@pytest.mark.docker
def test_images_push_refuses_a_missing_image_and_pushes_nothing(
    tmp_path: Path, registry: str, docker_client: docker.DockerClient
) -> None:
    tag = f"k8s-test-{secrets.token_hex(3)}"
    done = deskrig(
        tmp_path, "images", "push", "--registry", registry, "--tag", tag, RIG_IMAGE, "deskrig/no-such:latest"
    )
    assert done.returncode != 0
    assert "no local image deskrig/no-such:latest" in done.stderr
    assert tag not in _tags(registry, "deskrig/rig")  # checked before anything is pushed
    with pytest.raises(ImageNotFound):
        docker_client.images.get(f"{registry}/deskrig/rig:{tag}")


def test_images_push_needs_a_registry(tmp_path: Path) -> None:
    done = deskrig(tmp_path, "images", "push")
    assert done.returncode != 0
    assert "--registry" in done.stderr


@pytest.mark.docker
@pytest.mark.anyio
async def test_the_docker_runtime_pulls_through_the_registry(config: OrchestratorConfig) -> None:
    """With a registry set, the Docker runtime runs the prefixed image (here: one it cannot pull)."""
    from deskrig.errors import DeskrigError, ErrorCode
    from deskrig.orchestrator.docker_backend import DockerRuntime
    from deskrig.orchestrator.runtime import RigRequest

    registry = f"127.0.0.1:{_free_port()}"  # nothing listens there
    runtime = DockerRuntime(config.model_copy(update={"registry": registry}))
    try:
        with pytest.raises(DeskrigError) as raised:
            await runtime.create(RigRequest("sreg1", RIG_IMAGE, None, {}, {}))
    finally:
        await runtime.close()
    assert raised.value.code is ErrorCode.RIG_FAILED
    assert raised.value.details == {"image": f"{registry}/{RIG_IMAGE}"}


@pytest.mark.parametrize("given_by", ["flag", "variable"])
def test_serve_refuses_a_bad_registry(tmp_path: Path, given_by: str) -> None:
    flag = ["--registry", "http://reg"] if given_by == "flag" else []
    env = {"DESKRIG_REGISTRY": "http://reg"} if given_by == "variable" else {}
    done = deskrig(tmp_path, "orchestrator", "serve", *flag, **env)
    assert done.returncode != 0
    assert "INVALID_ARGUMENT" in done.stderr and "is not HOST or HOST:PORT" in done.stderr
    assert not (tmp_path / "state" / "orchestrator.json").exists()


def test_a_background_service_gets_the_registry() -> None:
    from deskrig.cli import build_parser
    from deskrig.orchestrator.cli_service import _serve_args

    args = build_parser().parse_args(["orchestrator", "serve", "--background", "--registry", "reg:5000"])
    passed = _serve_args(args)
    assert passed[passed.index("--registry") + 1] == "reg:5000"


@pytest.mark.parametrize("given_by", ["flag", "variable"])
def test_session_start_starts_its_service_with_the_registry(
    monkeypatch: pytest.MonkeyPatch, given_by: str, tmp_path: Path
) -> None:
    from deskrig.cli import build_parser
    from deskrig.errors import DeskrigError, ErrorCode
    from deskrig.orchestrator import service
    from deskrig.orchestrator.cli import run

    started: list[list[str]] = []

    def ensure_service(
        state_dir: Path, serve_args: list[str] | None = None, *, runtime: str | None = None
    ) -> service.ServiceClient:
        started.append(list(serve_args or []))
        raise DeskrigError(ErrorCode.RUNTIME_UNAVAILABLE, "stop here")

    monkeypatch.setattr(service, "ensure_service", ensure_service)
    monkeypatch.setenv("DESKRIG_STATE_DIR", str(tmp_path))
    if given_by == "variable":
        monkeypatch.setenv("DESKRIG_REGISTRY", "reg:5000")
    args = build_parser().parse_args(
        ["session", "start", *(["--registry", "reg:5000"] if given_by == "flag" else [])]
    )
    assert run(args) != 0
    assert started == [["--registry", "reg:5000"]]
