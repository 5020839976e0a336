"""Image benchmark: cold start (container create to ``/readyz`` 200), idle memory of one rig, and
image sizes. Runs hardened containers exactly as the orchestrator starts them.

``DESKRIG_BENCH_TAG`` names the images' tag (default ``latest``): a build under another tag is
measured without retagging the shared ones (the orchestrator and density suites' rigs too)."""

from __future__ import annotations

import os
import statistics
import sys
import time

import docker
import httpx2

from deskrig.client import tls_context
from deskrig.orchestrator.docker_backend import hardening
from deskrig.orchestrator.models import OrchestratorConfig

IMAGES = ("deskrig/rig", "deskrig/example-gtk", "deskrig/example-qt")
COLD_START_IMAGE = "deskrig/example-gtk"
COLD_STARTS = 5
#: Settle time before idle memory is read: start-up transients (imports, font caches) are over.
IDLE_SETTLE_S = 5.0
MIB = 1024 * 1024
#: Issue 12's targets: the rig image with both display stacks, create → /readyz on a quiet
#: machine, and one idle rig's memory as the engine counts it.
RIG_IMAGE = "deskrig/rig"
RIG_IMAGE_MB = 600
COLD_START_S = 1.5
IDLE_MEMORY_MIB = 110
#: Between two readiness probes: each costs the rig and the bench well under a millisecond.
READY_POLL_S = 0.01
READY_TIMEOUT_S = 120.0


def bench_tag() -> str:
    """The tag of the images the suites run: ``DESKRIG_BENCH_TAG``, else ``latest``."""
    return os.environ.get("DESKRIG_BENCH_TAG") or "latest"


def _host_port(container: docker.models.containers.Container) -> int:
    container.reload()
    return int(container.attrs["NetworkSettings"]["Ports"]["8765/tcp"][0]["HostPort"])


def wait_ready(url: str, timeout: float = READY_TIMEOUT_S) -> bool:
    """Probe ``url`` (a rig's /readyz) until it answers 200 (True) or ``timeout`` passes (False).

    One HTTP client for every probe: a client per probe made a TLS context each time (about 27 ms
    of CPU), so the bench's own probes took half a core of the two beside the rig they timed."""
    deadline = time.perf_counter() + timeout
    with httpx2.Client(timeout=1, verify=tls_context()) as http:
        while True:
            try:
                if http.get(url).status_code == 200:
                    return True
            except httpx2.HTTPError:  # not listening yet (the engine's proxy resets the connection)
                pass
            if time.perf_counter() >= deadline:
                return False
            time.sleep(READY_POLL_S)


def _cold_start(client: docker.DockerClient, image: str) -> tuple[float, int]:
    """Seconds from create to /readyz 200, and the container's idle memory in bytes."""
    started = time.perf_counter()
    container = client.containers.run(
        image,
        detach=True,
        # The published port is random, so the Host header is 127.0.0.1:<that port>.
        environment={"DESKRIG_TOKEN": "bench", "DESKRIG_ALLOWED_HOSTS": "127.0.0.1,localhost"},
        ports={"8765/tcp": ("127.0.0.1", None)},
        **hardening(OrchestratorConfig()),
    )
    try:
        if not wait_ready(f"http://127.0.0.1:{_host_port(container)}/readyz"):
            raise RuntimeError(f"{image} not ready in {READY_TIMEOUT_S:g} s: {container.logs(tail=20)!r}")
        ready_s = time.perf_counter() - started
        time.sleep(IDLE_SETTLE_S)
        stats = container.stats(stream=False)["memory_stats"]
        # What the kernel cannot reclaim: usage less the page cache of files it could drop.
        idle = int(stats["usage"]) - int(stats.get("stats", {}).get("inactive_file", 0))
        return ready_s, idle
    finally:
        container.remove(force=True)


def run(runs: int) -> None:
    client = docker.from_env()
    tag = bench_tag()
    out = sys.stdout
    out.write("\n### Rig images\n\n| measure | value | target | met |\n|---|---:|---:|:-:|\n")
    for name in IMAGES:
        try:
            size = client.images.get(f"{name}:{tag}").attrs["Size"] / 1e6
        except docker.errors.ImageNotFound:  # e.g. only the rig and the GTK example built under TAG
            out.write(f"| image size {name}:{tag} | not built | | |\n")
            continue
        target = f"≤ {RIG_IMAGE_MB} MB" if name == RIG_IMAGE else ""
        met = ("yes" if size <= RIG_IMAGE_MB else "NO") if name == RIG_IMAGE else ""
        out.write(f"| image size {name}:{tag} | {size:.0f} MB | {target} | {met} |\n")
    cold_start_image = f"{COLD_START_IMAGE}:{tag}"
    load_before = os.getloadavg()[0]
    samples = [_cold_start(client, cold_start_image) for _ in range(COLD_STARTS)]
    ready = statistics.median(s for s, _ in samples)
    memory = statistics.median(m for _, m in samples) / MIB
    # Each start and the load average around them: "a quiet machine" is the target's condition.
    starts = " ".join(f"{s:.2f}" for s, _ in samples)
    out.write(
        f"| cold start {cold_start_image}, p50 of {COLD_STARTS} ({starts} s; load {load_before:.2f} → "
        f"{os.getloadavg()[0]:.2f}) | {ready:.2f} s | ≤ {COLD_START_S} s (quiet machine)"
        f" | {'yes' if ready <= COLD_START_S else 'NO'} |\n"
    )
    out.write(
        f"| idle memory, whole container | {memory:.0f} MiB | ≤ {IDLE_MEMORY_MIB} MiB"
        f" | {'yes' if memory <= IDLE_MEMORY_MIB else 'NO'} |\n"
    )
    out.flush()
