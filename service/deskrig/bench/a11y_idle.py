"""What a rig burns idle once its accessibility tree was read, and after the event feed ended.

Toolkits emit AT-SPI events only while someone listens, and an app that animates then sends them
without pause (gtk3-widget-factory's pulsing progress bars, some 180 a second). A rig's server
listens from its first tree read on, until the first event that comes ``a11y_events_idle_timeout``
(60 s) after the last read ended; then it deregisters, and the next read fetches the tree whole.

A real rig (``deskrig rig run --http``) runs gtk3-widget-factory; the CPU of each of its processes
is measured, as a share of one core, before any read (the baseline), right after a
``get_app_state``, and once the timeout has passed; then the first ``get_app_state`` after it (a
whole fetch) is timed beside a mirror read, as the server timed its read of the tree. Takes about
two minutes, most of it the timeout.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import anyio

from deskrig.bench.reliability_rig import BenchRig
from deskrig.bench.stats import process_cpu_seconds, write_table_head
from deskrig.client import connect
from deskrig.config import A11Y_EVENTS_IDLE_TIMEOUT

APP = ["gtk3-widget-factory"]
CPU_SECONDS = 10.0
#: The rig's a11y_events_idle_timeout, in seconds.
IDLE_TIMEOUT_S = A11Y_EVENTS_IDLE_TIMEOUT
#: The rig's processes by what they are, as its /readyz names them; the rest of its processes
#: (the window manager, the session bus, at-spi-bus-launcher's) go under "other".
PARTS = {"server": "server", "app": "app", "xvfb": "Xvfb"}
PART_COLUMNS = ["whole rig", "server", "app", "accessibility bus daemon", "Xvfb", "other"]


def _cpu(rig: BenchRig, a11y_bus: int) -> dict[str, float]:
    """Each part's CPU over :data:`CPU_SECONDS`, in % of one core, and the whole rig's."""
    names = {pid: PARTS.get(name, "other") for name, pid in rig.pids().items()}
    names[a11y_bus] = "accessibility bus daemon"
    before = {pid: process_cpu_seconds(pid) for pid in rig.family()}
    started = time.monotonic()
    time.sleep(CPU_SECONDS)
    wall = time.monotonic() - started
    shares: dict[str, float] = {}
    for pid, was in before.items():
        part = names.get(pid, "other")
        shares[part] = shares.get(part, 0.0) + 100 * (process_cpu_seconds(pid) - was) / wall
    shares["whole rig"] = sum(shares.values())
    return shares


def _a11y_bus_daemon(rig: BenchRig) -> int:
    """The accessibility bus's dbus-daemon: at-spi-bus-launcher's child."""
    launcher = rig.pids()["at-spi"]
    return next(e.pid for e in rig.family().values() if e.ppid == launcher)


async def _app_state(url: str, token: str, pid: int) -> tuple[str, float]:
    """One get_app_state over MCP/HTTP: where its tree came from, and how long the server took to
    read it (its ``fetch_ms``; the client's own time on a fresh connection is mostly its building
    the tool's output schema validator)."""
    async with connect(url, token) as client:
        result = await client.call_tool("get_app_state", {"pid": pid})
    assert not result.is_error and result.structured_content is not None, result
    structured: dict[str, Any] = result.structured_content
    return str(structured["source"]), float(structured["fetch_ms"])


@dataclass(frozen=True)
class IdleCost:
    """Each state's CPU shares (part -> % of one core), and each timed read's source and ms."""

    states: list[tuple[str, dict[str, float]]]
    reads: list[tuple[str, tuple[str, float]]]


def measure() -> IdleCost:
    rig = BenchRig(app=APP, extra=["--a11y-events-idle-timeout", f"{IDLE_TIMEOUT_S:g}"]).start()
    try:
        a11y_bus, pid = _a11y_bus_daemon(rig), rig.app_pid()
        unread = _cpu(rig, a11y_bus)
        first = anyio.run(_app_state, rig.url, rig.token, pid)
        mirror = anyio.run(_app_state, rig.url, rig.token, pid)
        listening = _cpu(rig, a11y_bus)
        # The timeout counts from the last read; the first event after it ends the feed.
        time.sleep(max(0.0, IDLE_TIMEOUT_S - CPU_SECONDS) + 2.0)
        ended = _cpu(rig, a11y_bus)
        again = anyio.run(_app_state, rig.url, rig.token, pid)
    finally:
        rig.cleanup()
    return IdleCost(
        states=[
            ("before any tree read (baseline)", unread),
            ("after a get_app_state: the feed listens", listening),
            (f"{IDLE_TIMEOUT_S:g} s after the last read: the feed ended", ended),
        ],
        reads=[
            ("the first read", first),
            ("the next read", mirror),
            ("the first read after the feed ended", again),
        ],
    )


def run(runs: int) -> None:
    del runs  # one measurement per state: each takes CPU_SECONDS
    cost = measure()
    out = write_table_head(
        f"a11y feed idle cost: {' '.join(APP)}, CPU % of one core over {CPU_SECONDS:g} s",
        [("state", "left"), *((part, "right") for part in PART_COLUMNS)],
    )
    for name, shares in cost.states:
        out.write(
            f"| {name} | " + " | ".join(f"{shares.get(part, 0.0):.1f}" for part in PART_COLUMNS) + " |\n"
        )
    out.write("\n| get_app_state over MCP/HTTP | source | the server's read (fetch_ms) |\n|---|---|---:|\n")
    out.write("".join(f"| {name} | {source} | {took:.1f} |\n" for name, (source, took) in cost.reads))
    sys.stdout.flush()
