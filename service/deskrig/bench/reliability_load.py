"""Load: N concurrent clients, each making M mixed calls, for R rounds, on one GTK rig.

Each round opens N fresh connections at once; each client draws its calls from ``MIX`` (weighted
towards ``get_app_state``, the call that failed under load). The rig's capture rate limit is lifted:
this measures the server under load, not its policy.
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

import anyio
from pydantic import BaseModel, Field

from deskrig.bench.reliability_calls import call_all
from deskrig.bench.reliability_outcomes import TALLY_HEADER, Outcome, Tally, table, tally_row, write
from deskrig.bench.reliability_rig import GTK_APP, BenchRig
from deskrig.bench.stats import Timing
from deskrig.client import connect

#: (tool, weight): the share of each call in a client's mix.
MIX: list[tuple[str, int]] = [
    ("get_app_state", 4),
    ("list_windows", 2),
    ("screenshot_window", 2),
    ("click", 1),
    ("type_text", 1),
    ("move_cursor", 1),
    ("get_cursor_position", 1),
]


class Target(BaseModel):
    """What the mixed calls aim at: the app, its window, and a blank spot inside it."""

    pid: int
    window_id: int
    x: int
    y: int

    def arguments(self, tool: str) -> dict[str, Any]:
        by_tool: dict[str, dict[str, Any]] = {
            "get_app_state": {"pid": self.pid},
            "screenshot_window": {"window_id": self.window_id},
            "click": {"x": self.x, "y": self.y},
            "type_text": {"text": "ab"},
            "move_cursor": {"x": self.x, "y": self.y},
        }
        return by_tool.get(tool, {})


class LoadReport(BaseModel):
    clients: int
    calls_per_client: int
    rounds: int
    per_tool: dict[str, Tally] = Field(default_factory=dict)
    latencies_ms: dict[str, list[float]] = Field(default_factory=dict)
    #: Calls per round that did not succeed.
    failures_per_round: list[int] = Field(default_factory=list)
    rss_before_kib: int | None = None
    rss_after_kib: int | None = None
    #: Calls not made because the time budget ran out.
    unmade: int = 0
    #: The rig's exit status on SIGTERM after the load, and what of it was still alive a second later.
    exit_status: int | None = None
    leftover_processes: list[str] = Field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> Tally:
        total = Tally()
        for tally in self.per_tool.values():
            total.merge(tally)
        return total


async def _target(rig: BenchRig) -> Target:
    pid = rig.app_pid()
    async with connect(rig.url, rig.token) as client:
        windows = await client.call_tool("list_windows", {})
        screen = await client.call_tool("get_screen_size", {})
    assert windows.structured_content is not None and screen.structured_content is not None
    window = next(w for w in windows.structured_content["windows"] if w.get("pid") == pid)
    bounds = window["bounds"]
    # The bottom-right corner of the window's visible part: blank in gtk3-widget-factory.
    right = min(bounds["x"] + bounds["width"], screen.structured_content["width"])
    bottom = min(bounds["y"] + bounds["height"], screen.structured_content["height"])
    return Target(pid=pid, window_id=window["id"], x=right - 4, y=bottom - 4)


async def _client(
    rig: BenchRig,
    target: Target,
    tools: list[str],
    timeout: float,
    deadline: float,
    report: LoadReport,
    this_round: Tally,
) -> None:
    """One client: its own connection, its calls one after another."""

    def record(_: int, outcome: Outcome) -> None:
        report.per_tool.setdefault(outcome.tool, Tally()).add(outcome)
        report.latencies_ms.setdefault(outcome.tool, []).append(outcome.ms)
        this_round.add(outcome)

    calls = [(tool, target.arguments(tool)) for tool in tools]
    report.unmade += await call_all(rig, calls, timeout, record, deadline)


async def _load(
    rig: BenchRig, clients: int, calls: int, rounds: int, timeout: float, seed: int, budget: float
) -> LoadReport:
    report = LoadReport(clients=clients, calls_per_client=calls, rounds=rounds)
    target = await _target(rig)
    tools = [tool for tool, _ in MIX]
    weights = [weight for _, weight in MIX]
    report.rss_before_kib = rig.server_rss_kib()
    started = time.monotonic()
    deadline = started + budget
    for round_index in range(rounds):
        if time.monotonic() >= deadline:
            break
        this_round = Tally()
        async with anyio.create_task_group() as group:
            for client_index in range(clients):
                rng = random.Random(seed * 1_000_003 + round_index * 1009 + client_index)
                mix = rng.choices(tools, weights, k=calls)
                group.start_soon(_client, rig, target, mix, timeout, deadline, report, this_round)
        # Every call of the mix is valid: anything but ok is a failure.
        failed = this_round.calls - this_round.ok
        report.failures_per_round.append(failed)
        # Progress of a long run, on stderr beside the logs; stdout is the report.
        sys.stderr.write(
            f"load: round {round_index + 1} of {rounds}: {this_round.calls} calls, {failed} failed\n"
        )
    report.unmade += (rounds - len(report.failures_per_round)) * clients * calls
    report.seconds = time.monotonic() - started
    await anyio.sleep(1.0)  # let the last connections' teardown finish before reading RSS
    report.rss_after_kib = rig.server_rss_kib()
    return report


def run_load(
    clients: int, calls: int, rounds: int, timeout: float, seed: int, budget: float = 600.0
) -> LoadReport:
    rig = BenchRig(app=GTK_APP, extra=["--max-captures-per-minute", "1000000"])
    try:
        rig.start()
        report = anyio.run(_load, rig, clients, calls, rounds, timeout, seed, budget)
        report.exit_status, report.leftover_processes = rig.stop_and_leftovers()
        return report
    finally:
        rig.cleanup()


def _mib(kib: int | None) -> str:
    return "?" if kib is None else f"{kib / 1024:.1f}"


def print_load(report: LoadReport) -> None:
    total = report.total
    title = (
        f"reliability: load ({report.rounds} round{'s' if report.rounds != 1 else ''} of {report.clients} clients x "
        f"{report.calls_per_client} mixed calls, {report.seconds:.0f} s)"
    )
    header = [*TALLY_HEADER, "p50 ms", "p99 ms"]
    rows = []
    for tool, tally in sorted(report.per_tool.items()):
        timing = Timing(tool, report.latencies_ms[tool])
        rows.append([*tally_row(tool, tally), f"{timing.p50:.0f}", f"{timing.p99:.0f}"])
    every = [ms for samples in report.latencies_ms.values() for ms in samples]
    overall = Timing("all", every or [0.0])
    rows.append([*tally_row("**all**", total), f"{overall.p50:.0f}", f"{overall.p99:.0f}"])
    table(title, header, rows)
    rounds_clean = sum(1 for n in report.failures_per_round if n == 0)
    rounds_run = len(report.failures_per_round)
    write(
        f"\n- rounds without a failed call: {rounds_clean} of {rounds_run} run "
        f"(failed calls per round: {report.failures_per_round})\n"
        f"- server RSS before / after: {_mib(report.rss_before_kib)} / {_mib(report.rss_after_kib)} MiB\n"
        f"- throughput: {total.calls / max(report.seconds, 1e-9):.0f} calls/s\n"
    )
    if report.unmade:
        write(f"- stopped at the time budget: {report.unmade} calls not made\n")
    leftovers = ", ".join(report.leftover_processes) or "none"
    write(
        f"- the rig after the load: exit status {report.exit_status} on SIGTERM; left running: {leftovers}\n"
    )
