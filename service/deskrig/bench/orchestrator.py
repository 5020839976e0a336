"""Orchestrator benchmark on the real Docker engine, with the local rig images.

- Request to ready: ``Orchestrator.start`` until the rig's ``/readyz`` answers 200, one session at a
  time (p50/p95 of 10).
- Sessions per minute, back to back: start, one ``list_windows``, stop (finalize, logs, remove).
  Both on the plain Docker runtime and, side by side, on the swarm runtime (one service per rig)
  when the engine is a swarm manager (``docker swarm init --advertise-addr 127.0.0.1`` makes a
  single-node swarm of it).
- On a swarm of two or more nodes (``scripts/swarm-lab up``): 32 sessions (``DESKRIG_BENCH_CLUSTER_RIGS``)
  requested together, spread over the nodes, all reaching ready, each click's turn mirrored, and
  how many ran on each node (from each service's task). Bare rigs: the lab's worker has that image.
- Concurrency: 16 idle rigs at once, each answering ``list_windows`` within 1 s: the first step
  of the density suite (:mod:`deskrig.bench.density`, which steps on to 64 and beyond when named).

The rigs run the GTK example app (``deskrig/example-gtk:latest``) when that image exists, else a
bare desktop (``deskrig/rig:latest``). Build them with ``scripts/build-images``; ``DESKRIG_BENCH_TAG``
runs images built under another tag instead.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter

import anyio
import docker

from deskrig.bench import density
from deskrig.bench.density import bare_image, orchestrator_config, timed_fresh_call
from deskrig.bench.stats import Timing, at_once
from deskrig.client import connect
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.models import RuntimeName, SessionSpec

#: Sessions at once on a cluster of two or more swarm nodes (scripts/swarm-lab makes one).
CLUSTER_RIGS = 32


def _runtimes() -> list[RuntimeName]:
    """Docker, and swarm when the engine is a swarm manager."""
    client = docker.from_env()
    try:
        manager = bool(client.info().get("Swarm", {}).get("ControlAvailable"))
    finally:
        client.close()
    return ["docker", "swarm"] if manager else ["docker"]


async def _ready_and_rate(image: str, samples: int, runtime: RuntimeName) -> tuple[Timing, float]:
    ready_ms = []
    with tempfile.TemporaryDirectory() as tmp:
        async with Orchestrator(orchestrator_config(tmp, 2, runtime)) as orchestrator:
            cycle_started = time.perf_counter()
            for _ in range(samples):
                started = time.perf_counter()
                info = await orchestrator.start(SessionSpec(image=image))
                ready_ms.append((time.perf_counter() - started) * 1000)
                await timed_fresh_call(info)
                await orchestrator.stop(info.id)
            per_minute = samples / (time.perf_counter() - cycle_started) * 60
    return Timing("request -> ready", ready_ms), per_minute


def _row(measure: str, value: str, target: str = "", met: bool | None = None) -> None:
    verdict = "" if met is None else ("yes" if met else "NO")
    sys.stdout.write(f"| {measure} | {value} | {target} | {verdict} |\n")
    sys.stdout.flush()


def compare_runtimes(image: str, samples: int) -> None:
    """Request -> ready and sessions per minute, one row each with every runtime side by side."""
    runtimes = _runtimes()
    results = [anyio.run(_ready_and_rate, image, samples, runtime) for runtime in runtimes]
    names = " / ".join(runtimes)
    _row(
        f"request -> ready p50 (of {samples}), {names}",
        " / ".join(f"{r.p50 / 1000:.2f} s" for r, _ in results),
    )
    _row(
        f"request -> ready p95 (of {samples}), {names}",
        " / ".join(f"{r.p95 / 1000:.2f} s" for r, _ in results),
    )
    _row(
        f"sessions per minute, back to back (start, list_windows, stop), {names}",
        " / ".join(f"{per_minute:.1f}" for _, per_minute in results),
    )


def _active_nodes() -> dict[str, str]:
    """The swarm's ready, active nodes (id -> address); empty when the engine is no manager."""
    client = docker.from_env()
    try:
        if not client.info().get("Swarm", {}).get("ControlAvailable"):
            return {}
        nodes = [n.attrs for n in client.nodes.list()]
    finally:
        client.close()
    return {
        n["ID"]: n["Status"].get("Addr", "")
        for n in nodes
        if n["Status"].get("State") == "ready" and n["Spec"].get("Availability") == "active"
    }


async def _cluster_spread(count: int) -> tuple[float, Counter[str], list[int]]:
    """``count`` sessions requested at once on the swarm, spread over its nodes: seconds until all
    are ready, sessions per node (from each service's task), and the turns each mirrored of one
    click."""
    client = docker.from_env()
    with tempfile.TemporaryDirectory() as tmp:
        config = orchestrator_config(tmp, count, "swarm").model_copy(
            update={"placement_preferences": ["spread=node.id"]}
        )
        async with Orchestrator(config) as orchestrator:
            started = time.perf_counter()
            spec = SessionSpec(image=bare_image())
            infos = await at_once([lambda: orchestrator.start(spec)] * count)
            all_ready = time.perf_counter() - started
            spread = Counter(client.services.get(info.container).tasks()[0]["NodeID"] for info in infos)
            for info in infos:
                async with connect(info.mcp_url or "", info.token) as mcp:
                    assert not (await mcp.call_tool("click", {"x": 10, "y": 10})).is_error
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(orchestrator.get(i.id).turns < 1 for i in infos):
                await anyio.sleep(0.2)
            turns = [orchestrator.get(info.id).turns for info in infos]
    client.close()
    return all_ready, spread, turns


def cluster_spread(count: int) -> None:
    """The two-node lab's row (``scripts/swarm-lab up``): all ready, the node spread, turns mirrored."""
    nodes = _active_nodes()
    if len(nodes) < 2:
        _row(f"{count} sessions over a swarm's nodes", "skipped: fewer than 2 active swarm nodes")
        return
    all_ready, spread, turns = anyio.run(_cluster_spread, count)
    shown = ", ".join(f"{nodes.get(node, node)}: {n}" for node, n in spread.most_common())
    _row(f"{count} sessions requested together on {len(nodes)} swarm nodes: all ready", f"{all_ready:.1f} s")
    _row("node spread (node address: sessions)", shown)
    _row("sessions whose click's turn reached the host", f"{sum(t >= 1 for t in turns)} of {count}")


def run(runs: int) -> None:
    image = density.image()
    samples = min(runs, 10)
    sys.stdout.write(f"\n### Orchestrator ({image}, {os.cpu_count()} CPUs)\n\n")
    sys.stdout.write("| measure | value | target | met |\n|---|---:|---:|:-:|\n")

    compare_runtimes(image, samples)
    cluster_spread(int(os.environ.get("DESKRIG_BENCH_CLUSTER_RIGS", CLUSTER_RIGS)))

    density.run(density.FRESH_TARGET_RIGS)
