"""A rig that cannot start exits at once with a one-line reason, instead of hanging unhealthy."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from tests.container.conftest import GTK_SERVICE, RIG_IMAGE, ComposeStack, docker, wait_exited

pytestmark = pytest.mark.docker

HARDENED = ["--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]


def test_bad_size_fails_compose_up_fast(rig_images: None, tmp_path: Path) -> None:
    stack = ComposeStack(tmp_path, extra_env={"DESKRIG_SIZE": "banana"})
    try:
        started = time.monotonic()
        result = stack.compose("up", "-d", "--wait", "--wait-timeout", "120", "rig")
        assert result.returncode != 0
        assert time.monotonic() - started < 60, "compose waited for a health check that cannot pass"
        state = wait_exited(stack.container())
        assert state["ExitCode"] != 0
        assert state["Health"]["Status"] != "healthy"
        assert "INVALID_ARGUMENT: invalid screen size 'banana'" in stack.logs()
    finally:
        stack.down()


@pytest.mark.parametrize("backend", list(GTK_SERVICE))
@pytest.mark.parametrize("given_by", ["cmd", "env"])
def test_missing_app_exits_with_its_name(rig_images: None, given_by: str, backend: str) -> None:
    name = f"deskrig-test-noapp-{uuid.uuid4().hex[:8]}"
    argv = [
        "run",
        "-d",
        "--name",
        name,
        *HARDENED,
        "-e",
        "DESKRIG_TOKEN=t",
        "-e",
        f"DESKRIG_BACKEND={backend}",
    ]
    if given_by == "env":
        argv += ["-e", "DESKRIG_APP=no-such-app --flag", RIG_IMAGE]
    else:
        argv += [RIG_IMAGE, "no-such-app", "--flag"]
    try:
        assert docker(*argv).returncode == 0
        state = wait_exited(name)
        assert state["ExitCode"] != 0
        logs = docker("logs", name)
        assert "cannot start the app 'no-such-app'" in logs.stdout + logs.stderr
    finally:
        docker("rm", "-f", name)
