"""The pytest plugin, black-box: a pytest run in a subprocess, using the installed entry point."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import docker
import pytest
from tests.orchestrator.helpers import turn_folders

from deskrig.orchestrator.runtime import LABEL_LEASE, LABEL_MANAGED

pytestmark = pytest.mark.docker

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


def test_plugin_removes_passing_rigs_and_keeps_failing_ones_artifacts(
    rig_image: str, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    artifacts = tmp_path / "artifacts"
    state_dir = tmp_path / "state"
    run = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
            "test_user.py", "--deskrig-image", rig_image, "--deskrig-artifacts", str(artifacts),
        ],
        cwd=tmp_path,
        env={**os.environ, "DESKRIG_STATE_DIR": str(state_dir)},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "1 failed, 3 passed" in out
    assert f"deskrig: image={rig_image} app=(image default) scope=function video=True" in out

    kept = re.search(r"turn folders, video and rig\.log are kept in (\S+)", out)
    assert kept, out
    directory = Path(kept.group(1))
    assert directory.parent == artifacts.resolve()
    assert turn_folders(directory) == ["turn-00001"]
    assert (directory / "recording.mp4").stat().st_size > 0
    assert (directory / "rig.log").exists()
    assert "test_user.py::test_fails" in out.split("deskrig artifacts")[-1]
    assert [p.name for p in artifacts.iterdir()] == [directory.name]  # passing tests' dirs are gone

    leftovers = [
        c
        for c in docker_client.containers.list(all=True, filters={"label": f"{LABEL_MANAGED}=1"})
        if c.labels.get(LABEL_LEASE, "").startswith(str(state_dir))
    ]
    assert leftovers == []
