"""scripts/swarm-lab: the two-node swarm on this machine that the cluster benchmark runs on."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from tests.polling import poll

pytestmark = [pytest.mark.docker]

LAB = Path(__file__).resolve().parents[2] / "scripts" / "swarm-lab"
#: Made by scripts/docker-setup and named without a registry, as a locally built rig image is;
#: small, so the lab pushes it to its registry and the worker pulls it quickly.
IMAGE = "deskrig/debian-base:bookworm"
#: The worker's address (scripts/swarm-lab's LAB_IP).
WORKER_ADDRESS = "10.77.0.2"


def lab(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LAB, command],
        env=os.environ | {"DESKRIG_LAB_IMAGES": IMAGE},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def worker() -> Iterator[str]:
    """The lab, up with :data:`IMAGE` on both nodes, for one test: the worker's node id."""
    try:
        up = lab("up")
        assert up.returncode == 0, up.stdout + up.stderr
        client = docker.from_env()
        (node,) = [n for n in client.nodes.list() if n.attrs["Status"].get("Addr") == WORKER_ADDRESS]
        client.close()
        yield str(node.id)
    finally:
        down = lab("down")
        assert down.returncode == 0, down.stdout + down.stderr


def test_a_task_on_the_worker_runs_without_waiting_on_names_off_the_machine(worker: str) -> None:
    """The worker's engine asks Docker Hub for an image named without a registry before it runs its
    own copy. On the host that lookup fails at once; in the lab's namespace it waited 20 s for a
    nameserver it has no route to (5 s with a refused one), and so did every rig placed there."""
    client = docker.from_env()
    service = client.services.create(
        IMAGE, ["sleep", "300"], name=f"deskrig-lab-probe-{os.getpid()}", constraints=[f"node.id=={worker}"]
    )
    try:
        started = time.monotonic()
        poll(
            "the task on the lab's worker to run",
            lambda: any(task["Status"]["State"] == "running" for task in service.tasks()),
            timeout=4,
        )
        print(f"running on the worker after {time.monotonic() - started:.2f} s")
    finally:
        service.remove()
        client.close()
