"""What the built images are: non-root, health-checked, no build tools, no build secrets."""

from __future__ import annotations

import pytest
from tests.container.conftest import GTK_IMAGE, RIG_IMAGE, docker

pytestmark = pytest.mark.docker

IMAGES = [RIG_IMAGE, GTK_IMAGE, "deskrig/example-qt:latest"]


@pytest.mark.parametrize("image", IMAGES)
def test_image_runs_as_rig_with_a_healthcheck(rig_images: None, image: str) -> None:
    config = docker("image", "inspect", image, "--format", "{{json .Config}}")
    assert config.returncode == 0, config.stderr
    assert '"User":"rig"' in config.stdout
    assert '"Healthcheck":{"Test":["CMD","deskrig-healthcheck"]' in config.stdout


@pytest.mark.parametrize("image", IMAGES)
def test_no_build_secret_in_the_image_history(rig_images: None, image: str) -> None:
    history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", image)
    assert history.returncode == 0, history.stderr
    assert "EXTRA_CA_CERT" not in history.stdout and "extra_ca" not in history.stdout


def test_final_image_has_no_build_tools_or_leftovers(rig_images: None) -> None:
    # Prints whatever should not be there: compilers, pip (system or venv), curl, build temp files.
    probe = docker(
        "run", "--rm", "--entrypoint", "sh", RIG_IMAGE, "-c",
        "for t in gcc cc make pip pip3 curl; do command -v $t; done;"
        " ls /opt/deskrig/bin | grep '^pip'; find /tmp /run/secrets -mindepth 1 2>/dev/null; true",
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == []
