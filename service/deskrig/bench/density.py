"""Density on the real Docker engine: how many idle rigs this machine holds, each answering
``list_windows`` within 1 s over an open connection, and what an idle rig burns.

The count of idle rigs steps up under one orchestrator (16, 32, 48, 64, then on by 16 while every
rig still answers in time, up to ``--max-rigs``; fewer than 16 is one step of that many). Each
step starts the rigs it adds all at once, connects to each and calls ``list_windows`` once (what a
first call starts has started), lets them settle, then reads over a quiet window (nobody calls):

- each rig container's CPU and memory, as the engine's cgroup counts them (``docker stats``);
- this process's CPU (the orchestrator watching its sessions and mirroring their feeds, and the
  open MCP connections), per rig;
- the machine's busy share of all its CPUs (``/proc/stat``, other users' work included) and its
  load average;
- inside the first rig, each process's CPU and wake-ups (Xvfb, the app, the deskrig server, D-Bus,
  AT-SPI, the window manager), from ``/proc`` when the engine runs on this kernel.

Then it times ``list_windows``: on every rig one at a time over the open connections (the target),
on all at once over them, and on all at once over fresh connections (connect and initialize
included). The knee is the largest count at which every rig answered within 1 s.

Every connect and call has a deadline (:data:`CALL_DEADLINE_S`): one that misses it counts as
over the target ("over" in the table), so a step that stalls is reported, not hung. On SIGINT or
SIGTERM, and on any error, the fleet's rigs are stopped and then removed by their orchestrator
label, whatever the orchestrator managed; a signal then exits with status 128 + its number.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import secrets
import signal
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import docker
from anyio.abc import TaskGroup
from mcp import Client

from deskrig.bench.images import bench_tag
from deskrig.bench.stats import at_once
from deskrig.client import connect
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.models import OrchestratorConfig, RuntimeName, SessionInfo, SessionSpec
from deskrig.orchestrator.runtime import LABEL_ORCHESTRATOR
from deskrig.orchestrator.runtimes import make_runtime
from deskrig.signals import STOP_SIGNALS

GTK_IMAGE = "deskrig/example-gtk"
BARE_IMAGE = "deskrig/rig"
ANSWER_TARGET_MS = 1000.0
#: Issue 12's density target, and its fresh-connection target's count.
RIGS_TARGET = 64
FRESH_TARGET_RIGS = 16
STEP = 16
MAX_RIGS = 128
#: After the step's first calls, before the quiet window.
SETTLE_S = 5.0
QUIET_WINDOW_S = 10.0
#: N rigs booting on two cores queue for start-up slots (max_starting); the last waits a while.
READY_TIMEOUT = 600.0
#: A connect or a call not done by then counts as over the target.
CALL_DEADLINE_S = 30.0
#: The sample of a connect or call that missed its deadline.
OVER = math.inf
#: Memory left to the machine beyond what the next step's rigs are expected to take.
MEMORY_HEADROOM_MIB = 2048.0


def bare_image() -> str:
    """The bare rig under the bench's tag (:func:`~deskrig.bench.images.bench_tag`)."""
    return f"{BARE_IMAGE}:{bench_tag()}"


def image() -> str:
    """The GTK example when it is built under the bench's tag, else the bare rig."""
    gtk = f"{GTK_IMAGE}:{bench_tag()}"
    client = docker.from_env()
    try:
        client.images.get(gtk)
        return gtk
    except docker.errors.ImageNotFound:
        return bare_image()
    finally:
        client.close()


def next_count(current: int, held: bool, max_rigs: int) -> int | None:
    """The step after ``current`` rigs (0 before the first): on by :data:`STEP` up to the target
    whatever happens, beyond it only while every rig answered in time; never past ``max_rigs``."""
    if current >= max_rigs or (current >= RIGS_TARGET and not held):
        return None
    return min(current + STEP, max_rigs)


def knee(held_at: dict[int, bool]) -> int:
    """The largest count at which every rig answered in time (0: none)."""
    return max((count for count, held in held_at.items() if held), default=0)


@dataclass(frozen=True)
class Spread:
    """Samples in milliseconds: their median and their worst."""

    samples_ms: list[float]

    @property
    def p50(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def max(self) -> float:
        return max(self.samples_ms)

    def __str__(self) -> str:
        return f"{_ms(self.p50)} / {_ms(self.max)}"


def _ms(value: float) -> str:
    return "over" if value == OVER else f"{value:.0f}"


@dataclass(frozen=True)
class ProcessUse:
    cpu_ms_per_s: float
    wakeups_per_s: float


@dataclass(frozen=True)
class IdleUse:
    """What the rigs and the host burnt over the quiet window."""

    rig_cpu_ms_per_s: list[float]
    rig_memory_mib: list[float]
    this_process_ms_per_s: float
    machine_busy: float  # share of all CPUs, 0..1
    load_1min: float
    #: Per process name inside the first rig (empty when its processes are not on this kernel).
    first_rig: dict[str, ProcessUse] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    rigs: int
    added_ready_s: float
    idle: IdleUse
    one_at_a_time: Spread
    all_at_once: Spread
    fresh_all_at_once: Spread

    @property
    def held(self) -> bool:
        """Every rig answered within 1 s, asked one at a time over its open connection."""
        return self.one_at_a_time.max <= ANSWER_TARGET_MS

    @property
    def held_all_at_once(self) -> bool:
        return self.all_at_once.max <= ANSWER_TARGET_MS


# --- reading what idle rigs burn ---------------------------------------------------------------


def _container_use(stats: dict[str, Any]) -> tuple[int, float]:
    """CPU nanoseconds so far and memory MiB now, as ``docker stats`` shows it (without the page
    cache: cgroup v1 names it total_inactive_file, v2 inactive_file)."""
    memory = stats["memory_stats"]
    cache = memory.get("stats", {})
    inactive = cache.get("total_inactive_file", cache.get("inactive_file", 0))
    return int(stats["cpu_stats"]["cpu_usage"]["total_usage"]), (memory["usage"] - inactive) / 2**20


def _machine_busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _thread_times(pids: dict[str, list[int]]) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (process name, thread): CPU nanoseconds and wake-ups so far (the first and third
    fields of the thread's schedstat)."""
    times: dict[tuple[str, str], tuple[int, int]] = {}
    for name, group in pids.items():
        for pid in group:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a process that just ended
                for task in Path(f"/proc/{pid}/task").iterdir():
                    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                        ran, _waited, slices = (task / "schedstat").read_text().split()
                        times[(name, task.name)] = (int(ran), int(slices))
    return times


def _per_process(
    before: dict[tuple[str, str], tuple[int, int]],
    after: dict[tuple[str, str], tuple[int, int]],
    window_s: float,
) -> dict[str, ProcessUse]:
    """What each process name's threads did between the samples: threads that ended meanwhile
    are left out (their counts went with them), threads that began count from zero."""
    cpu: dict[str, int] = defaultdict(int)
    wakeups: dict[str, int] = defaultdict(int)
    for (name, thread), (ran, slices) in after.items():
        ran_before, slices_before = before.get((name, thread), (0, 0))
        cpu[name] += ran - ran_before
        wakeups[name] += slices - slices_before
    names = {name for name, _thread in before} | set(cpu)
    return {name: ProcessUse(cpu[name] / 1e6 / window_s, wakeups[name] / window_s) for name in names}


def _rig_processes(container: Any) -> dict[str, list[int]]:
    """Host pids by process name inside ``container``; empty when they are not on this kernel
    (a remote engine), so the split is left out."""
    by_name: dict[str, list[int]] = defaultdict(list)
    for pid, name in container.top(ps_args="-o pid,comm")["Processes"]:
        by_name[name].append(int(pid))
    if not all(Path(f"/proc/{pid}").exists() for group in by_name.values() for pid in group):
        return {}
    return dict(by_name)


@dataclass(frozen=True)
class _Sample:
    #: Per rig container: when it was read, its CPU nanoseconds so far, its memory MiB now.
    rigs: list[tuple[float, int, float]]
    machine_jiffies: tuple[int, int]
    first_rig_threads: dict[tuple[str, str], tuple[int, int]]


def measure_idle(container_names: list[str], window_s: float) -> IdleUse:
    """Sample everything, wait ``window_s`` with nobody calling, sample again (blocking)."""
    client = docker.from_env()
    try:
        containers = [client.containers.get(name) for name in container_names]
        split = _rig_processes(containers[0])

        def sample() -> _Sample:
            rigs = []
            for container in containers:
                cpu_ns, memory = _container_use(container.stats(stream=False, one_shot=True))
                rigs.append((time.monotonic(), cpu_ns, memory))
            return _Sample(rigs, _machine_busy_jiffies(), _thread_times(split))

        before = sample()
        this_started = time.process_time()
        time.sleep(window_s)
        this_ended = time.process_time()
        after = sample()
    finally:
        client.close()
    rig_cpu = [
        (cpu_after - cpu_before) / 1e6 / (t_after - t_before)
        for (t_before, cpu_before, _), (t_after, cpu_after, _) in zip(before.rigs, after.rigs, strict=True)
    ]
    busy = after.machine_jiffies[0] - before.machine_jiffies[0]
    total = after.machine_jiffies[1] - before.machine_jiffies[1]
    return IdleUse(
        rig_cpu_ms_per_s=rig_cpu,
        rig_memory_mib=[memory for _, _, memory in after.rigs],
        this_process_ms_per_s=(this_ended - this_started) * 1000 / window_s / len(containers),
        machine_busy=busy / total if total else 0.0,
        load_1min=os.getloadavg()[0],
        first_rig=_per_process(before.first_rig_threads, after.first_rig_threads, window_s),
    )


def _memory_available_mib() -> float | None:
    """MemAvailable of this machine (where the engine's rigs are, when the engine is local)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return None


# --- timing list_windows -----------------------------------------------------------------------


async def _timed_call(client: Client | None) -> float:
    """Milliseconds for one list_windows over an open connection; :data:`OVER` when it missed its
    deadline, or the rig has no connection (its connect missed it)."""
    if client is None:
        return OVER
    started = time.perf_counter()
    with anyio.move_on_after(CALL_DEADLINE_S):
        result = await client.call_tool("list_windows", {})
        assert not result.is_error, result
        return (time.perf_counter() - started) * 1000
    return OVER


async def timed_fresh_call(info: SessionInfo) -> float:
    """Milliseconds for one list_windows over a fresh connection (connect and initialize included);
    :data:`OVER` when that missed its deadline."""
    assert info.mcp_url and info.token
    started = time.perf_counter()
    with anyio.move_on_after(CALL_DEADLINE_S):
        async with connect(info.mcp_url, info.token) as client:
            result = await client.call_tool("list_windows", {})
        assert not result.is_error, result
        return (time.perf_counter() - started) * 1000
    return OVER


# --- the steps ---------------------------------------------------------------------------------


def orchestrator_config(tmp: str, max_sessions: int, runtime: RuntimeName = "docker") -> OrchestratorConfig:
    """A bench's orchestrator: state and artifacts under ``tmp``, no idle timeout, time to boot bursts."""
    return OrchestratorConfig(
        runtime=runtime,
        artifacts_root=Path(tmp) / "artifacts",
        state_dir=Path(tmp) / "state",
        max_sessions=max_sessions,
        idle_timeout=0,
        ready_timeout=READY_TIMEOUT,
    )


class Connections:
    """MCP connections to rigs, each held open by a task of ``task_group`` until :meth:`close`."""

    def __init__(self, task_group: TaskGroup) -> None:
        self._task_group = task_group
        self._closing = anyio.Event()

    def close(self) -> None:
        """Close every connection (their tasks end)."""
        self._closing.set()

    async def open(self, info: SessionInfo) -> Client | None:
        """A connection to the rig, open until :meth:`close`; None if it missed the deadline."""
        assert info.mcp_url and info.token
        url, token = info.mcp_url, info.token
        opened: list[Client] = []
        settled = anyio.Event()

        async def hold() -> None:
            # The deadline's scope encloses the connection's own task group, so it may only end
            # with it: once connected, the deadline is lifted instead.
            with anyio.move_on_after(CALL_DEADLINE_S) as deadline:
                async with connect(url, token) as client:
                    deadline.deadline = math.inf
                    opened.append(client)
                    settled.set()
                    await self._closing.wait()
            settled.set()

        self._task_group.start_soon(hold)
        await settled.wait()
        return opened[0] if opened else None


class Fleet:
    """The idle rigs of one run, under one orchestrator, each with an open MCP connection (None
    for a rig whose connect missed its deadline)."""

    def __init__(self, orchestrator: Orchestrator, connections: Connections, image: str) -> None:
        self._orchestrator = orchestrator
        self._connections = connections
        self._image = image
        self.infos: list[SessionInfo] = []
        self.clients: list[Client | None] = []

    async def grow_to(self, count: int) -> Step:
        added = count - len(self.infos)
        started = time.perf_counter()
        spec = SessionSpec(image=self._image, name="density")
        infos = await at_once([lambda: self._orchestrator.start(spec)] * added)
        added_ready_s = time.perf_counter() - started
        for info in infos:
            client = await self._connections.open(info)
            await _timed_call(client)  # whatever a first call starts has started before the quiet window
            self.infos.append(info)
            self.clients.append(client)
        await anyio.sleep(SETTLE_S)
        idle = await anyio.to_thread.run_sync(
            measure_idle,
            [info.container or "" for info in self.infos],
            QUIET_WINDOW_S,
            abandon_on_cancel=True,  # a signal need not wait out the quiet window
        )
        one_at_a_time = [await _timed_call(client) for client in self.clients]
        all_at_once = await at_once([functools.partial(_timed_call, client) for client in self.clients])
        fresh_all_at_once = await at_once([functools.partial(timed_fresh_call, info) for info in self.infos])
        return Step(
            count, added_ready_s, idle, Spread(one_at_a_time), Spread(all_at_once), Spread(fresh_all_at_once)
        )


def _write(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


STEP_HEADER = (
    "| rigs | added rigs all ready | memory per rig | idle CPU per rig, mean / max | this process per rig "
    "| machine busy | load 1 min | one at a time, open p50 / max | all at once, open p50 / max "
    "| all at once, fresh p50 / max | each within 1 s (one at a time / all at once) |\n"
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|"
)


def step_row(step: Step) -> str:
    idle = step.idle
    verdicts = " / ".join("yes" if held else "NO" for held in (step.held, step.held_all_at_once))
    return (
        f"| {step.rigs} | {step.added_ready_s:.1f} s | {statistics.mean(idle.rig_memory_mib):.0f} MiB "
        f"| {statistics.mean(idle.rig_cpu_ms_per_s):.2f} / {max(idle.rig_cpu_ms_per_s):.2f} ms/s "
        f"| {idle.this_process_ms_per_s:.2f} ms/s | {idle.machine_busy:.0%} | {idle.load_1min:.2f} "
        f"| {step.one_at_a_time} ms | {step.all_at_once} ms | {step.fresh_all_at_once} ms | {verdicts} |"
    )


def split_table(steps: list[Step]) -> list[str]:
    """Per process inside the first rig, a column per step: CPU ms/s and wake-ups per second."""
    measured = [step for step in steps if step.idle.first_rig]
    if not measured:
        return ["(no per-process split: the engine's processes are not on this kernel)"]
    names = sorted({name for step in measured for name in step.idle.first_rig})
    lines = [
        "| process in the first rig | "
        + " | ".join(f"{s.rigs} rigs: CPU ms/s, wake-ups/s" for s in measured)
        + " |",
        "|---|" + "---:|" * len(measured),
    ]
    for name in names:
        cells = []
        for step in measured:
            use = step.idle.first_rig.get(name)
            cells.append("–" if use is None else f"{use.cpu_ms_per_s:.2f}, {use.wakeups_per_s:.1f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def verdict_rows(steps: list[Step], max_rigs: int) -> list[str]:
    held = {step.rigs: step.held for step in steps}
    held_together = {step.rigs: step.held_all_at_once for step in steps}
    if max_rigs < RIGS_TARGET:
        met = f"not judged: --max-rigs {max_rigs}"
    else:
        met = "yes" if knee(held) >= RIGS_TARGET else "NO"
    lines = [
        "| measure | value | target | met |",
        "|---|---:|---:|:-:|",
        f"| knee: most idle rigs each answering list_windows within 1 s, one at a time over open "
        f"connections | {knee(held)} | ≥ {RIGS_TARGET} | {met} |",
        f"| same, all at once over open connections | {knee(held_together)} | | |",
    ]
    fresh = next((step for step in steps if step.rigs == FRESH_TARGET_RIGS), None)
    if fresh is not None:
        fresh_met = fresh.fresh_all_at_once.p50 <= ANSWER_TARGET_MS
        lines.append(
            f"| {FRESH_TARGET_RIGS} idle rigs, list_windows all at once over fresh connections, p50 "
            f"| {fresh.fresh_all_at_once.p50:.0f} ms | ≤ {ANSWER_TARGET_MS:.0f} ms | {'yes' if fresh_met else 'NO'} |"
        )
    return lines


async def step_through(
    max_rigs: int, image: str, on_step: Callable[[Step], None], tmp: str, orchestrator_id: str
) -> list[Step]:
    """Grow the fleet step by step (see :func:`next_count`); stop early when the machine's memory
    would not hold the next step."""
    steps: list[Step] = []
    async with (
        Orchestrator(orchestrator_config(tmp, max_rigs), orchestrator_id=orchestrator_id) as orchestrator,
        anyio.create_task_group() as connection_tasks,
    ):
        connections = Connections(connection_tasks)
        fleet = Fleet(orchestrator, connections, image)
        try:
            count = next_count(0, True, max_rigs)
            while count is not None:
                if steps:
                    per_rig = statistics.mean(steps[-1].idle.rig_memory_mib)
                    available = _memory_available_mib()
                    needed = (count - steps[-1].rigs) * per_rig + MEMORY_HEADROOM_MIB
                    if available is not None and available < needed:
                        _write(
                            f"(stopped before {count} rigs: {available:.0f} MiB available, {needed:.0f} needed)"
                        )
                        break
                step = await fleet.grow_to(count)
                steps.append(step)
                on_step(step)
                count = next_count(count, step.held, max_rigs)
        finally:
            connections.close()
    return steps


async def _until_signalled(scope: anyio.CancelScope, received: list[int]) -> None:
    """Cancel ``scope`` on the first SIGINT or SIGTERM (noted in ``received``)."""
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async for signum in signals:
            received.append(signum)
            _write(f"({signal.Signals(signum).name}: stopping the fleet's rigs)")
            scope.cancel()
            return


async def run_fleet(max_rigs: int, image: str, on_step: Callable[[Step], None]) -> list[Step]:
    """:func:`step_through` until done, an error or a signal, after which the fleet's rigs are
    removed by label whatever the orchestrator managed to stop (a signal: SystemExit 128 + it)."""
    received: list[int] = []
    steps: list[Step] = []
    orchestrator_id = f"density-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_until_signalled, tg.cancel_scope, received)
                steps = await step_through(max_rigs, image, on_step, tmp, orchestrator_id)
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await remove_rigs(orchestrator_config(tmp, max_rigs), orchestrator_id)
    if received:
        raise SystemExit(128 + received[0])
    return steps


async def remove_rigs(config: OrchestratorConfig, orchestrator_id: str) -> None:
    """Remove every rig labelled as ``orchestrator_id``'s (left when the orchestrator's own stop failed)."""
    runtime = make_runtime(config)
    try:
        for handle in await runtime.list_by_label({LABEL_ORCHESTRATOR: orchestrator_id}):
            _write(f"(removing {handle.name}, left behind)")
            await runtime.destroy(handle)
    finally:
        await runtime.close()


def run(max_rigs: int) -> list[Step]:
    chosen = image()
    _write(f"\n### Density: idle rigs ({chosen}, {os.cpu_count()} CPUs, up to {max_rigs} rigs)\n")
    _write(STEP_HEADER)
    steps = anyio.run(run_fleet, max_rigs, chosen, lambda step: _write(step_row(step)))
    _write("")
    for line in [*split_table(steps), "", *verdict_rows(steps, max_rigs)]:
        _write(line)
    return steps
