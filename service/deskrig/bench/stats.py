"""Timing helpers and the table every benchmark suite prints."""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO, TypeVar

import anyio

T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    name: str
    samples_ms: list[float]
    #: CPU time per sample, this process's and its waited-for children's (where measured).
    cpu_samples_ms: list[float] = field(default_factory=list)

    def cpu(self) -> Timing:
        """The CPU samples as a timing of their own."""
        return Timing(f"{self.name}, CPU", self.cpu_samples_ms)

    @property
    def p50(self) -> float:
        return statistics.median(self.samples_ms)

    def percentile(self, share: float) -> float:
        """The sample at ``share`` (0..1) of the sorted samples, nearest rank."""
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]

    @property
    def p95(self) -> float:
        return self.percentile(0.95)

    @property
    def p99(self) -> float:
        return self.percentile(0.99)


def measure(name: str, fn: Callable[[], object], runs: int, warmup: int = 2) -> Timing:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return Timing(name, samples)


async def measure_async(name: str, fn: Callable[[], Awaitable[object]], runs: int, warmup: int = 2) -> Timing:
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - started) * 1000)
    return Timing(name, samples)


def awaitable(fn: Callable[[], object]) -> Callable[[], Awaitable[None]]:
    """``fn`` as a coroutine function, to be timed beside async cases (it blocks the loop)."""

    async def call() -> None:
        fn()

    return call


async def measure_interleaved(
    cases: Sequence[tuple[str, Callable[[], Awaitable[object]]]], runs: int, warmup: int = 2
) -> list[Timing]:
    """Each case once per round, in turn. On a shared machine whose load comes and goes, every case
    then meets the same load, so the ratios between them hold when the absolute times do not."""
    for _ in range(warmup):
        for _name, fn in cases:
            await fn()
    samples: list[list[float]] = [[] for _ in cases]
    cpu: list[list[float]] = [[] for _ in cases]
    for _ in range(runs):
        for (_name, fn), taken, spent in zip(cases, samples, cpu, strict=True):
            started, cpu_started = time.perf_counter(), cpu_s()
            await fn()
            taken.append((time.perf_counter() - started) * 1000)
            spent.append((cpu_s() - cpu_started) * 1000)
    return [Timing(name, taken, spent) for (name, _fn), taken, spent in zip(cases, samples, cpu, strict=True)]


async def at_once(calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Every call started together; their results in the order of ``calls``."""
    results: dict[int, T] = {}

    async def one(index: int, call: Callable[[], Awaitable[T]]) -> None:
        results[index] = await call()

    async with anyio.create_task_group() as tg:
        for index, call in enumerate(calls):
            tg.start_soon(one, index, call)
    return [results[index] for index in range(len(calls))]


def cpu_s() -> float:
    """CPU seconds of this process (all its threads) and of its children that have been waited for:
    a spawned peer's work counts as the in-process work does, and neither depends on the load."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` has used so far, from /proc."""
    return _stat_cpu_seconds(Path(f"/proc/{pid}/stat"))


def thread_cpu_seconds(native_id: int) -> float:
    """CPU seconds (user + system) one thread of this process (its ``native_id``) has used so far."""
    return _stat_cpu_seconds(Path(f"/proc/self/task/{native_id}/stat"))


def _stat_cpu_seconds(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Row:
    timing: Timing
    baseline: Timing | None = None
    target: float | None = None

    @property
    def ratio(self) -> float | None:
        return None if self.baseline is None else self.baseline.p50 / self.timing.p50


#: How a Markdown table's column is aligned, as its separator row says it.
_ALIGNMENT = {"left": "---", "right": "---:", "centre": ":-:"}


def write_table_head(title: str, columns: Sequence[tuple[str, Literal["left", "right", "centre"]]]) -> TextIO:
    """A Markdown table's title, header and separator rows on stdout (the benchmark's own output,
    not a server's); the stream to write its rows to."""
    out = sys.stdout
    out.write(f"\n### {title}\n\n")
    out.write("| " + " | ".join(name for name, _ in columns) + " |\n")
    out.write("|" + "|".join(_ALIGNMENT[align] for _, align in columns) + "|\n")
    return out


def print_table(title: str, rows: list[Row]) -> None:
    """A Markdown table on stdout (the benchmark's own output, not a server's)."""
    out = write_table_head(
        title,
        [
            ("case", "left"),
            ("p50 ms", "right"),
            ("p95 ms", "right"),
            ("baseline", "left"),
            ("speed-up", "right"),
            ("target", "right"),
            ("met", "centre"),
        ],
    )
    for row in rows:
        ratio = row.ratio
        met = "" if row.target is None or ratio is None else ("yes" if ratio >= row.target else "NO")
        out.write(
            f"| {row.timing.name} | {row.timing.p50:.2f} | {row.timing.p95:.2f} | "
            f"{row.baseline.name if row.baseline else ''} | {'' if ratio is None else f'{ratio:.1f}x'} | "
            f"{'' if row.target is None else f'{row.target:g}x'} | {met} |\n"
        )
    out.flush()
