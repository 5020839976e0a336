"""The pytest plugin, black-box: a pytest run in a subprocess, using the installed entry point."""

from __future__ import annotations

import re
from pathlib import Path

import docker
import pytest
from tests.orchestrator.helpers import BACKEND_TESTS, USER_TESTS, run_user_tests, turn_folders
from tests.orchestrator.runtimes import listed_containers

from deskrig.orchestrator.runtime import LABEL_LEASE, LABEL_MANAGED

#: One test on a real rig under sway: its display is sway's headless output, its window the app's.
SWAY_RIG_TEST = """
import anyio


async def desktop(rig):
    async with rig.client() as client:
        displays = (await client.call_tool("list_displays", {})).structured_content["displays"]
        windows = (await client.call_tool("list_windows", {})).structured_content["windows"]
        return [d["name"] for d in displays], [w["title"] for w in windows]


def test_the_rig_runs_sway(deskrig_rig):
    assert deskrig_rig.session.spec.backend == "sway"
    displays, titles = anyio.run(desktop, deskrig_rig)
    assert displays == ["HEADLESS-1"] and "deskrig GTK example" in titles
"""


@pytest.mark.parametrize("given_by", ["flag", "ini"])
def test_backend_option_and_marker_reach_the_session_spec(tmp_path: Path, given_by: str) -> None:
    if given_by == "ini":
        (tmp_path / "pytest.ini").write_text("[pytest]\ndeskrig_backend = sway\n")
        args: list[str] = []
    else:
        args = ["--deskrig-backend", "sway"]
    run = run_user_tests(tmp_path, BACKEND_TESTS, *args, timeout=60)
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "1 failed, 2 passed" in out
    assert "app=(image default) backend=sway scope=function" in out
    assert (
        "test_user.py::test_a_bad_marker_backend: deskrig marker: backend: Input should be 'x11' or 'sway'"
        in out
    )


def test_a_bad_backend_option_is_a_usage_error(tmp_path: Path) -> None:
    run = run_user_tests(tmp_path, BACKEND_TESTS, "--deskrig-backend", "wayland", timeout=60)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "--deskrig-backend wants one of x11, sway, got 'wayland'" in run.stderr


@pytest.mark.docker
def test_backend_option_starts_the_rig_under_sway(gtk_image: str, tmp_path: Path) -> None:
    run = run_user_tests(tmp_path, SWAY_RIG_TEST, "--deskrig-image", gtk_image, "--deskrig-backend", "sway")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


@pytest.mark.docker
def test_plugin_removes_passing_rigs_and_keeps_failing_ones_artifacts(
    rig_image: str, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    artifacts = tmp_path / "artifacts"
    state_dir = tmp_path / "state"
    run = run_user_tests(
        tmp_path, USER_TESTS, "--deskrig-image", rig_image, "--deskrig-artifacts", str(artifacts)
    )
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "1 failed, 3 passed" in out
    assert (
        f"deskrig: image={rig_image} app=(image default) backend=(image default) scope=function video=True"
        in out
    )

    kept = re.search(r"turn folders, video and rig\.log are kept in (\S+)", out)
    assert kept, out
    directory = Path(kept.group(1))
    assert directory.parent == artifacts.resolve()
    assert turn_folders(directory) == ["turn-00001"]
    assert (directory / "recording.mp4").stat().st_size > 0
    assert (directory / "rig.log").exists()
    summary = out.split("deskrig artifacts")[-1]
    assert "test_user.py::test_fails" in summary
    assert f"report: {directory / 'report.html'}" in summary
    assert '"turn-00001"' in (directory / "report.html").read_text()
    assert [p.name for p in artifacts.iterdir()] == [directory.name]  # passing tests' dirs are gone

    leftovers = [
        c
        for c in listed_containers(docker_client, {"label": f"{LABEL_MANAGED}=1"})
        if c.labels.get(LABEL_LEASE, "").startswith(str(state_dir))
    ]
    assert leftovers == []
