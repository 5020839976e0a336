"""What the built images are: non-root, health-checked, no build tools, no build secrets, no
setuid/setgid programs, no file capabilities; served as a plain `docker run` under either backend."""

from __future__ import annotations

import secrets

import httpx
import pytest
from tests.container.conftest import GTK_IMAGE, GTK_SERVICE, RIG_IMAGE, docker, free_port, poll
from tests.server.rigproc import INITIALIZE

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


def test_rig_image_leaves_out_what_no_rig_uses_and_stays_small(rig_images: None) -> None:
    # images/rig/dpkg-excludes: Mesa's GL + LLVM, ghostscript, Intel's media plugins; numpy left
    # with simplejpeg. The README's size table and its 600 MB target depend on these staying out.
    probe = docker(
        "run", "--rm", "--entrypoint", "sh", RIG_IMAGE, "-c",
        "ls -d /usr/lib/x86_64-linux-gnu/dri/* /usr/lib/x86_64-linux-gnu/libLLVM* /usr/lib/x86_64-linux-gnu/libgs.so*"
        " /usr/lib/x86_64-linux-gnu/mfx/* /opt/deskrig/lib/python3*/site-packages/numpy 2>/dev/null;"
        " ls /usr/lib/x86_64-linux-gnu/libturbojpeg.so.0",
    )  # fmt: skip
    assert probe.stdout.split() == ["/usr/lib/x86_64-linux-gnu/libturbojpeg.so.0"], probe.stdout
    size = docker("image", "inspect", RIG_IMAGE, "--format", "{{.Size}}")
    assert size.returncode == 0, size.stderr
    assert int(size.stdout) <= 600 * 1000 * 1000, f"{RIG_IMAGE} is {int(size.stdout) / 1e6:.0f} MB"


@pytest.mark.parametrize("image", IMAGES)
def test_no_setuid_or_setgid_file(rig_images: None, image: str) -> None:
    find = ["find", "/", "-xdev", "-type", "f", "-perm", "/6000"]  # as root: every directory
    probe = docker("run", "--rm", "--user", "0", "--entrypoint", find[0], image, *find[1:])
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == []


#: Run as root by the image's python3: every file on the image's filesystem carrying file
#: capabilities (the security.capability attribute), one path a line.
CAPABILITY_PROBE = """
import os
for top, dirs, files in os.walk("/"):
    if top == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]  # the kernel's, not the image's
    for name in files:
        path = os.path.join(top, name)
        try:
            if not os.path.islink(path) and "security.capability" in os.listxattr(path):
                print(path)
        except OSError:
            pass
"""


@pytest.mark.parametrize("image", IMAGES)
def test_no_file_with_capabilities(rig_images: None, image: str) -> None:
    probe = docker("run", "--rm", "--user", "0", "--entrypoint", "python3", image, "-c", CAPABILITY_PROBE)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == []


@pytest.mark.parametrize("backend", list(GTK_SERVICE))
def test_plain_docker_run_answers_on_its_published_port(rig_images: None, backend: str) -> None:
    """`docker run -p 127.0.0.1:PORT:8765`: clients send Host 127.0.0.1:PORT, not the bound 8765
    (every request got 421 while Docker said healthy)."""
    port, token = free_port(), secrets.token_urlsafe(16)
    started = docker(
        "run", "-d", "--rm", "-p", f"127.0.0.1:{port}:8765",
        "-e", f"DESKRIG_TOKEN={token}", "-e", f"DESKRIG_BACKEND={backend}", GTK_IMAGE,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    container = started.stdout.strip()
    try:
        base = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            try:
                return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        poll("the rig's /readyz", ready, timeout=90)
        headers = {
            "authorization": f"Bearer {token}",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        response = httpx.post(f"{base}/mcp", json=INITIALIZE, headers=headers, timeout=10)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["serverInfo"]["name"] == "deskrig"
    finally:
        docker("rm", "-f", container)
