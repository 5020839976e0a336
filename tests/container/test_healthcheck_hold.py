"""The rig image's healthcheck is cheap when idle and as prompt as before: the first ready answer
of a container's boot is healthy at once (compose's `depends_on: condition: service_healthy` still
waits for readiness, and no longer), later probes hold, asking /readyz, and fail as soon as it
does. On the real engine, with this tree's healthcheck script and HEALTHCHECK line laid over the
GTK example image (``HEALTH_IMAGE``, removed after), so the shared images are never rebuilt."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from tests.container.conftest import DOCKER_POLL_S, GTK_IMAGE, REPO, RIG_IMAGE, ComposeStack, docker, inspect
from tests.polling import poll

pytestmark = pytest.mark.docker

HEALTH_IMAGE = "deskrig/example-gtk:healthcheck-test"
#: A /readyz inside the container on another port, 200 while /tmp/ready-flag exists, else 503.
FAKE_READYZ = """
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if os.path.exists("/tmp/ready-flag") else 503)
        self.end_headers()
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", 9999), H).serve_forever()
"""


@pytest.fixture(scope="module")
def health_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    context = tmp_path_factory.mktemp("health-image")
    (context / "healthcheck.sh").write_bytes((REPO / "images/rig/healthcheck.sh").read_bytes())
    (context / "healthcheck.sh").chmod(0o755)
    (line,) = [
        line
        for line in (REPO / "images/rig/Dockerfile").read_text().splitlines()
        if line.startswith("HEALTHCHECK")
    ]
    (context / "Dockerfile").write_text(
        f"FROM {GTK_IMAGE}\nCOPY healthcheck.sh /usr/local/bin/deskrig-healthcheck\n{line}\n"
    )
    built = subprocess.run(
        ["docker", "build", "-q", "-t", HEALTH_IMAGE, str(context)],
        env={**os.environ, "DOCKER_BUILDKIT": "0"},  # one COPY: the classic builder is enough
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    yield HEALTH_IMAGE
    docker("image", "rm", HEALTH_IMAGE)


def _when(stamp: str) -> float:
    """Docker's RFC 3339 nanosecond timestamp as epoch seconds."""
    head, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + float(f"0.{fraction[:6] or 0}")


def _probes(container: str) -> list[dict[str, Any]]:
    return list((inspect(container)["State"].get("Health") or {}).get("Log") or [])


def test_compose_waits_for_the_ready_rig_and_then_its_probes_hold(health_image: str, tmp_path: Path) -> None:
    override = tmp_path / "override.yaml"
    override.write_text(
        json.dumps(
            {
                "services": {
                    "rig": {"image": health_image},
                    "waiter": {  # what a test-runner service would be
                        "image": RIG_IMAGE,
                        "entrypoint": ["sleep", "600"],
                        "read_only": True,
                        "healthcheck": {"disable": True},
                        "depends_on": {"rig": {"condition": "service_healthy"}},
                    },
                }
            }
        )
    )
    stack = ComposeStack(tmp_path)

    def container(service: str) -> str:
        (found,) = stack.compose("-f", str(override), "ps", "-a", "-q", service).stdout.split()
        return found

    try:
        up = stack.compose("-f", str(override), "up", "-d", "--no-build", "waiter")
        assert up.returncode == 0, up.stderr
        rig, waiter = container("rig"), container("waiter")
        first_ready = next(p for p in _probes(rig) if p["ExitCode"] == 0)
        # The waiter started once the rig was healthy, and within a probe interval or so of it.
        waiter_started = _when(inspect(waiter)["State"]["StartedAt"])
        assert 0 <= waiter_started - _when(first_ready["End"]) < 10
        # The next probe holds: still running well past the 2 s interval, the rig still healthy.
        poll(
            "a probe to have held for 10 s",
            lambda: (
                time.time() - _when(first_ready["End"]) > 10
                and [p for p in _probes(rig) if p["ExitCode"] == 0] == [first_ready]
                and inspect(rig)["State"]["Health"]["Status"] == "healthy"
            ),
            timeout=30,
            interval=DOCKER_POLL_S,
        )
    finally:
        stack.compose("-f", str(override), "down", "-v", "-t", "5")


def test_a_holding_probe_fails_as_soon_as_readyz_does_and_a_restart_answers_at_once(
    health_image: str,
) -> None:
    # No healthcheck of Docker's (only this test's probes), and a /tmp that outlives a restart.
    started = docker("run", "-d", "--no-healthcheck", health_image)
    assert started.returncode == 0, started.stderr
    container = started.stdout.strip()
    probe = ["docker", "exec", "-e", "DESKRIG_PORT=9999", container, "deskrig-healthcheck"]
    try:
        assert docker("exec", "-d", container, "python3", "-c", FAKE_READYZ).returncode == 0
        assert docker("exec", container, "touch", "/tmp/ready-flag").returncode == 0
        poll("the first ready probe", lambda: subprocess.run(probe, timeout=30).returncode == 0)
        holding = subprocess.Popen(probe)
        poll(
            "the next probe to run",
            lambda: "deskrig-healthcheck" in docker("top", container).stdout and holding.poll() is None,
        )
        assert docker("exec", container, "rm", "/tmp/ready-flag").returncode == 0
        failed_at = time.monotonic()
        assert holding.wait(timeout=30) == 1
        assert time.monotonic() - failed_at < 10  # one /readyz every 5 s
        # A restart is a new boot (its /tmp kept the marker): its first ready answer returns at once.
        assert docker("restart", "-t", "5", container).returncode == 0
        assert docker("exec", "-d", container, "python3", "-c", FAKE_READYZ).returncode == 0
        assert docker("exec", container, "touch", "/tmp/ready-flag").returncode == 0
        answered_at = time.monotonic()
        poll(
            "the first ready probe after the restart",
            lambda: subprocess.run(probe, timeout=30).returncode == 0,
        )
        assert time.monotonic() - answered_at < 10
    finally:
        docker("rm", "-f", container)
