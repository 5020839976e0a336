"""`scripts/bench reliability` in tiny bounded sizes against real rigs: each part runs, its report
has the figures the issue asks for, and outcomes are counted under the right error codes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from deskrig.bench.reliability import ReliabilityReport
from deskrig.bench.reliability_calls import call_all
from deskrig.bench.reliability_faults import FaultReport, run_fault
from deskrig.bench.reliability_fuzz import generate, narrowed
from deskrig.bench.reliability_load import run_load
from deskrig.bench.reliability_outcomes import Outcome, Tally
from deskrig.bench.reliability_probes import run_probes
from deskrig.bench.reliability_rig import BenchRig
from deskrig.client import connect
from deskrig.tools import tools_for_profile

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rig() -> Iterator[BenchRig]:
    rig = BenchRig(app=["xterm"], extra=["--tool-profile", "all", "--no-a11y"]).start()
    yield rig
    rig.cleanup()


def test_outcomes_are_counted_by_error_code(rig: BenchRig) -> None:
    answered: list[tuple[str, dict[str, Any]]] = [
        ("list_windows", {}),
        ("screenshot_window", {"window_id": 999_999}),
        ("screenshot_capture_window", {"windowId": "999999"}),  # the acs error shape
        ("screenshot_window", {"window_id": "not a number"}),
        ("move_cursor", {"x": 1}),
    ]
    unanswered = [("wait_for", {"window_title": "never shown", "timeout_ms": 5000})]
    tally = Tally()

    def record(_: int, outcome: Outcome) -> None:
        tally.add(outcome)

    anyio.run(call_all, rig, answered, 30.0, record)
    anyio.run(call_all, rig, unanswered, 0.5, record)
    assert tally.calls == 6
    assert tally.ok == 1
    assert tally.errors_by_code == {"WINDOW_NOT_FOUND": 2, "INVALID_ARGUMENT": 2}
    assert tally.hangs == 1
    assert tally.protocol_errors == {}
    assert tally.internal_errors == 0
    assert tally.failures == 1  # the hang


def test_a_broken_session_counts_as_a_protocol_error_and_the_run_goes_on(tmp_path: Path) -> None:
    victim = BenchRig(app=["xterm"], extra=["--no-a11y"]).start()
    outcomes: list[Outcome] = []

    def record(index: int, outcome: Outcome) -> None:
        outcomes.append(outcome)
        if index == 0:
            assert victim.proc is not None
            victim.proc.kill()  # the server dies between two calls of one session

    try:
        anyio.run(call_all, victim, [("list_windows", {})] * 3, 30.0, record)
    finally:
        victim.cleanup()
    assert [o.kind for o in outcomes] == ["ok", "protocol", "protocol"]
    assert all((o.code or "").startswith("connection: ") for o in outcomes[1:]), outcomes


def test_calls_stop_at_the_deadline(rig: BenchRig) -> None:
    outcomes: list[Outcome] = []
    unmade = anyio.run(
        call_all, rig, [("list_windows", {})] * 3, 30.0, lambda _, o: outcomes.append(o), time.monotonic()
    )
    assert unmade == 3 and outcomes == []


def test_dangerous_tools_are_fuzzed_only_with_safe_arguments(rig: BenchRig) -> None:
    async def schemas() -> dict[str, dict[str, Any]]:
        async with connect(rig.url, rig.token) as client:
            return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}

    listed = anyio.run(schemas)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    for arguments in generate(narrowed("launch_app", listed["launch_app"]), 30, seed=3):
        assert arguments["command"] in (["true"], ["sleep", "3"])
        assert arguments.get("timeout_ms", 100) <= 2000
    for arguments in generate(narrowed("kill_app", listed["kill_app"]), 30, seed=3):
        assert arguments["pid"] > pid_max
    for arguments in generate(narrowed("start_recording", listed["start_recording"]), 30, seed=3):
        assert arguments.get("record_video", False) is False
    for arguments in generate(narrowed("wait_for", listed["wait_for"]), 30, seed=3):
        assert arguments.get("timeout_ms", 0) <= 2000
        assert (arguments.get("region") or {}).get("stable_ms", 50) <= 500


def test_probes_report_each_attack_against_its_expected_answer() -> None:
    # The rig's deadlines are half the wait, so a stalled request is cut off inside it.
    results = {result.probe: result for result in run_probes(timeout=30.0, slow_wait=2.0, body_mib=1)}
    assert {r.group for r in results.values()} == {"auth", "host", "origin", "body", "path", "slow headers"}
    # Checks that hold on every branch: the token, Host and path guards.
    for probe in (
        "no token",
        "wrong token",
        "right token (control)",
        "foreign Host",
        "save_dir outside (screenshot_screen)",
    ):
        assert results[probe].met, results[probe]
    assert results["no token"].observed.startswith("HTTP 401")
    stalled = results["Content-Length larger than the body"]
    assert stalled.met and stalled.observed.startswith("HTTP 408"), stalled


def test_load_reports_calls_latencies_and_rss() -> None:
    report = run_load(clients=2, calls=4, rounds=2, timeout=60.0, seed=5)
    assert report.total.calls == 16
    assert sum(len(samples) for samples in report.latencies_ms.values()) == 16
    assert len(report.failures_per_round) == 2
    assert report.rss_before_kib and report.rss_after_kib
    assert "get_app_state" in report.per_tool or "list_windows" in report.per_tool


def test_a_fault_run_reports_what_the_client_saw_and_what_was_left() -> None:
    report = run_fault("wm", timeout=30.0)
    assert len(report.sequence) == 5 and report.seen.calls == 5
    assert report.seen.hangs == 0
    # The rig outlives its window manager and stops cleanly on SIGTERM.
    assert report.ended_after_s is None and report.exit_status == 0
    assert report.leftover_processes == [] and report.leftover_dirs == []
    assert report.clean


def test_a_killed_server_leaves_only_dirs_that_the_next_rigs_sweep_removes() -> None:
    report = run_fault("server", timeout=30.0)
    assert report.exit_status == -9  # SIGKILLed
    assert report.leftover_processes == []
    assert [name.rsplit("-", 1)[0] for name in report.swept_dirs] == ["deskrig-rig", "deskrig-xdg"]
    assert report.leftover_dirs == []
    assert report.clean


@pytest.mark.parametrize(
    ("victim", "ended_after_s", "code", "clean"),
    [
        ("dbus", 0.3, "JSON-RPC -32000", True),  # the rig closed the call's connection as it ended
        ("dbus", 0.3, "connection: RemoteProtocolError", True),
        ("wm", None, "JSON-RPC -32000", False),  # the rig went on: a closed connection is a defect
        ("dbus", 0.3, "JSON-RPC -32603", False),
        ("server", None, "connection: ReadError", True),
    ],
)
def test_a_call_cut_off_by_the_rig_going_away_is_clean_and_only_then(
    victim: str, ended_after_s: float | None, code: str, clean: bool
) -> None:
    report = FaultReport(victim=victim, ended_after_s=ended_after_s)
    report.seen.add(Outcome(tool="list_windows", kind="protocol", code=code, ms=1.0))
    assert report.clean is clean


def test_check_fails_on_internal_errors_and_unmet_probes() -> None:
    clean = ReliabilityReport(load=None)
    assert clean.problems() == []
    report = ReliabilityReport.model_validate(
        {
            "fuzz": {"valid": {"calls": 3, "ok": 2, "errors_by_code": {"INTERNAL_ERROR": 1}}},
            "probes": [
                {
                    "group": "host",
                    "probe": "foreign Host",
                    "expected": "421",
                    "observed": "HTTP 200",
                    "met": False,
                }
            ],
        }
    )
    assert report.problems() == [
        "fuzz: 1 INTERNAL_ERROR, 0 hangs, 0 protocol errors",
        "probes: 1 not as expected (foreign Host)",
    ]


def test_scripts_bench_reliability_prints_tables_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    calls = str(len(tools_for_profile("all")))  # one per tool
    argv = [sys.executable, "-m", "deskrig.bench", "reliability", "--parts", "fuzz", "--fuzz-calls", calls]
    done = subprocess.run([*argv, "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "### reliability: fuzz" in done.stdout
    assert "| calls | ok | errors by code | INTERNAL_ERROR | hangs | protocol errors |" in done.stdout
    tools = {tool.name for tool in tools_for_profile("all")}  # the default and acs profiles
    assert f"reliability: fuzz {len(tools)} calls" in done.stdout.strip().splitlines()[-1]
    report = json.loads(out.read_text())
    assert report["load"] is None and report["faults"] is None and report["probes"] is None
    assert set(report["fuzz"]["per_tool"]) == tools
    assert report["fuzz"]["ungenerated"] == {}  # hypothesis-jsonschema took every schema
    tallies = report["fuzz"]["per_tool"].values()
    assert (
        sum(t["calls"] for t in tallies)
        == report["fuzz"]["valid"]["calls"] + report["fuzz"]["invalid"]["calls"]
    )
