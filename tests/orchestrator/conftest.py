"""Fixtures for the orchestrator tests: the rig image (built once per run), Docker, a config.

Every container test shares ONE image, ``deskrig/rig:latest`` (a bare desktop: no app, so rigs
start fast and stay light), built by the project's own ``scripts/build-images`` (which sets
Docker up first); an unchanged tree rebuilds nothing.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from deskrig.orchestrator.models import OrchestratorConfig

ROOT = Path(__file__).resolve().parents[2]
RIG_IMAGE = "deskrig/rig:latest"
#: The GTK example (compose service ``rig``), for the tests that need a window under sway.
GTK_IMAGE = "deskrig/example-gtk:latest"


def build_images(*services: str) -> None:
    """``scripts/build-images --tag latest SERVICE...``: a cache hit when nothing changed. The tag
    is said: the tests use ``latest``, whatever DESKRIG_TAG the caller has."""
    build = subprocess.run(
        [str(ROOT / "scripts" / "build-images"), "--tag", "latest", *services],
        env={**os.environ, "DESKRIG_PROGRESS": "quiet"},
        capture_output=True,
        text=True,
    )
    if build.returncode != 0:
        pytest.fail(f"scripts/build-images failed:\n{build.stderr[-3000:]}")


@pytest.fixture(scope="session")
def rig_image() -> str:
    build_images("rig-image")
    return RIG_IMAGE


@pytest.fixture(scope="session")
def gtk_image() -> str:
    build_images("rig-image", "rig")
    return GTK_IMAGE


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def config(tmp_path: Path) -> OrchestratorConfig:
    """Quick to react (watch every 0.2 s), no idle timeout unless a test asks for one."""
    return OrchestratorConfig(
        artifacts_root=tmp_path / "artifacts",
        state_dir=tmp_path / "state",
        max_sessions=3,
        watch_interval=0.2,
        idle_timeout=0,
        max_duration=600,
        stop_timeout=15,
    )
