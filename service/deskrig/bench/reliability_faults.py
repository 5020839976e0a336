"""Faults: kill -9 of each process of a rig, one at a time, each in a fresh rig.

After the kill a connected client makes a few calls; the report says what it saw (results,
structured errors, hangs, transport errors), then how the runner ended (by itself or after
SIGTERM, its exit status, a traceback in its log), and what it left behind: live processes of its
family and ``deskrig-*`` dirs in its private TMPDIR. A killed runner cannot remove its own dirs;
the next rig's start sweeps those whose owner is gone (:mod:`deskrig.rundirs`), so after that
kill the sweep is run as the next rig would, and only what it leaves counts as left behind.
"""

from __future__ import annotations

import os
import signal
import time

import anyio
import mcp_types as types
from pydantic import BaseModel, Field

from deskrig.bench.reliability_calls import call_fresh, call_once, leaf_exception
from deskrig.bench.reliability_outcomes import Outcome, Tally, format_counts, table, write
from deskrig.bench.reliability_rig import GTK_APP, BenchRig
from deskrig.client import connect
from deskrig.rundirs import sweep_stale_dirs

#: Every process of a rig, by the name /readyz lists it under, plus the server (the runner itself).
VICTIMS = ["xvfb", "wm", "dbus", "at-spi", "app", "server"]
#: What a client sees once the rig has ended: nothing listens on its port.
REFUSED = "connection: ConnectError"
#: What the MCP client says of a call whose connection closed before its answer came.
CONNECTION_CLOSED = f"JSON-RPC {types.CONNECTION_CLOSED}"
#: How long the runner may take to end by itself (app death ends a rig) before it gets SIGTERM.
EXIT_GRACE = 5.0


class FaultReport(BaseModel):
    victim: str
    seen: Tally = Field(default_factory=Tally)
    #: How the client's calls after the kill went, in order: "ok", an error code, "hang", ...
    sequence: list[str] = Field(default_factory=list)
    killed_at: float = 0.0
    #: Seconds from the kill until the runner exited by itself, or None if it had to be stopped.
    ended_after_s: float | None = None
    exit_status: int | None = None
    traceback_in_log: bool = False
    leftover_processes: list[str] = Field(default_factory=list)
    leftover_dirs: list[str] = Field(default_factory=list)
    #: Dirs the killed runner left, which the next rig's sweep removed.
    swept_dirs: list[str] = Field(default_factory=list)
    note: str = ""

    @property
    def clean(self) -> bool:
        """Each call answered (a result, a structured error, or a refused connection once the rig
        has ended), no traceback, nothing left behind. A killed server breaks its connections; a
        rig that ends by itself may close one whose call came in its last moments (the MCP
        client's CONNECTION_CLOSED): both are the rig going away, as a refused connection is."""
        going_away = self.victim == "server" or self.ended_after_s is not None
        unexpected = {
            code
            for code in self.seen.protocol_errors
            if code != REFUSED
            and not (going_away and (code.startswith("connection: ") or code == CONNECTION_CLOSED))
        }
        return (
            self.seen.hangs == 0
            and not unexpected
            and self.seen.internal_errors == 0
            and not self.traceback_in_log
            and not self.leftover_processes
            and not self.leftover_dirs
        )


def _calls(app_pid: int) -> list[tuple[str, dict[str, object]]]:
    return [
        ("list_windows", {}),
        ("screenshot_screen", {}),
        ("get_app_state", {"pid": app_pid}),
        ("click", {"x": 5, "y": 5}),
        ("list_apps", {}),
    ]


async def _fault(rig: BenchRig, victim: str, timeout: float) -> FaultReport:
    """Kill ``victim`` under a connected client, then call: first on that client's session, then
    each call on a fresh connection."""
    report = FaultReport(victim=victim)
    pids = rig.pids()
    calls = _calls(pids["app"])
    tool, arguments = calls.pop(0)
    in_flight = False
    try:
        async with connect(rig.url, rig.token) as client:
            await call_once(client, "list_windows", {}, timeout, {})
            os.kill(pids[victim], signal.SIGKILL)
            report.killed_at = time.monotonic()
            in_flight = True
            _record(report, await call_once(client, tool, arguments, timeout, {}))
            in_flight = False
    except Exception as exc:  # the session broke under the client, with the call in flight
        broken = f"connection: {leaf_exception(exc)}"
        if in_flight:
            _record(report, Outcome(tool=tool, kind="protocol", code=broken, ms=0.0))
        report.note = f"the open session ended with {leaf_exception(exc)}"
    for tool, arguments in calls:
        _record(report, await call_fresh(rig, tool, arguments, timeout))
    return report


def _record(report: FaultReport, outcome: Outcome) -> None:
    report.seen.add(outcome)
    report.sequence.append("refused" if outcome.code == REFUSED else outcome.code or outcome.kind)


def run_fault(victim: str, timeout: float) -> FaultReport:
    rig = BenchRig(app=GTK_APP)
    try:
        rig.start()
        report = anyio.run(_fault, rig, victim, timeout)
        assert rig.proc is not None
        deadline = report.killed_at + EXIT_GRACE
        while rig.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if rig.proc.poll() is not None:
            report.ended_after_s = time.monotonic() - report.killed_at
        report.exit_status, report.leftover_processes = rig.stop_and_leftovers()
        if victim == "server":
            report.swept_dirs = sorted(path.name for path in sweep_stale_dirs(rig.tmpdir))
        report.leftover_dirs = rig.leftover_dirs()
        report.traceback_in_log = "Traceback" in rig.stderr_path.read_text(errors="replace")
        return report
    finally:
        rig.cleanup()


def _ending(report: FaultReport) -> str:
    if report.ended_after_s is None:
        return "on SIGTERM"
    how = "killed" if report.victim == "server" else "by itself"
    return f"{how}, after {report.ended_after_s:.1f} s"


def run_faults(victims: list[str], timeout: float) -> list[FaultReport]:
    return [run_fault(victim, timeout) for victim in victims]


def print_faults(reports: list[FaultReport]) -> None:
    header = [
        "kill -9 of",
        "calls after",
        "client saw, in order",
        "hangs",
        "rig ended",
        "exit status",
        "traceback",
        "leftover processes",
        "leftover dirs",
        "clean",
    ]
    rows = [
        [
            r.victim,
            str(r.seen.calls),
            ", ".join(r.sequence) or "-",
            str(r.seen.hangs),
            _ending(r),
            "killed" if r.exit_status is None else str(r.exit_status),
            "YES" if r.traceback_in_log else "no",
            ", ".join(r.leftover_processes) or "-",
            ", ".join(r.leftover_dirs) or ("-" if not r.swept_dirs else f"- ({len(r.swept_dirs)} swept)"),
            "yes" if r.clean else "NO",
        ]
        for r in reports
    ]
    table("reliability: faults (kill -9 of one process per fresh rig)", header, rows, len(header))
    notes = [f"- {r.victim}: {r.note}" for r in reports if r.note]
    seen = Tally()
    for report in reports:
        seen.merge(report.seen)
    notes.append(f"- errors by code after the kills: {format_counts(seen.errors_by_code)}")
    write("\n" + "\n".join(notes) + "\n")
