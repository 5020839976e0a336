"""``scripts/bench reliability``: the fuzz, load, fault and probe campaign, bounded and on loopback.

Each part starts its own rigs (``deskrig rig run --http 127.0.0.1:PORT``, private HOME and TMPDIR),
stops them and cleans up after itself:

- **fuzz**: schema-generated calls of every tool of every profile (and a share made invalid);
- **load**: N concurrent clients x M mixed calls for R rounds; p50/p99 per tool, server RSS;
- **faults**: kill -9 of each rig process in a fresh rig; what a client saw, how the rig ended,
  what it left behind;
- **probes**: auth, Host, Origin, path, body and slow-header attacks against the expected answers.

It prints a table per part and one summary line. It reports and exits 0; with ``--check`` it
exits 1 when a part found a defect: an INTERNAL_ERROR, a hang or a protocol error (fuzz, load), a
failed call under load, an unclean fault run, or a probe answered other than expected.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import NoReturn

from pydantic import BaseModel

from deskrig.bench.reliability_faults import VICTIMS, FaultReport, print_faults, run_faults
from deskrig.bench.reliability_fuzz import FuzzReport, print_fuzz, run_fuzz
from deskrig.bench.reliability_load import LoadReport, print_load, run_load
from deskrig.bench.reliability_outcomes import write
from deskrig.bench.reliability_probes import ProbeResult, print_probes, run_probes
from deskrig.imaging import save_file
from deskrig.signals import handling_signals

PARTS = ("fuzz", "load", "faults", "probes")


class ReliabilityReport(BaseModel):
    fuzz: FuzzReport | None = None
    load: LoadReport | None = None
    faults: list[FaultReport] | None = None
    probes: list[ProbeResult] | None = None

    def problems(self) -> list[str]:
        """What ``--check`` fails on, one line per part that found something."""
        found = []
        if self.fuzz is not None and self.fuzz.total.failures:
            total = self.fuzz.total
            found.append(
                f"fuzz: {total.internal_errors} INTERNAL_ERROR, {total.hangs} hangs, "
                f"{sum(total.protocol_errors.values())} protocol errors"
            )
        if self.load is not None and (failed := sum(self.load.failures_per_round)):
            found.append(f"load: {failed} failed calls")
        if self.load is not None and self.load.leftover_processes:
            found.append(f"load: the stopped rig left {', '.join(self.load.leftover_processes)} running")
        if self.faults is not None and (unclean := [f.victim for f in self.faults if not f.clean]):
            found.append(f"faults: unclean after kill -9 of {', '.join(unclean)}")
        if self.probes is not None and (missed := [p.probe for p in self.probes if not p.met]):
            found.append(f"probes: {len(missed)} not as expected ({'; '.join(missed)})")
        return found

    def summary(self) -> str:
        parts = []
        if self.fuzz is not None:
            total = self.fuzz.total
            parts.append(
                f"fuzz {total.calls} calls, {total.internal_errors} INTERNAL_ERROR, {total.hangs} hangs"
            )
        if self.load is not None:
            total = self.load.total
            parts.append(
                f"load {total.calls} calls, {sum(self.load.failures_per_round)} failed, {total.hangs} hangs"
            )
        if self.faults is not None:
            parts.append(f"faults {sum(f.clean for f in self.faults)} of {len(self.faults)} clean")
        if self.probes is not None:
            parts.append(f"probes {sum(p.met for p in self.probes)} of {len(self.probes)} as expected")
        return "reliability: " + "; ".join(parts)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reliability suite (runs only when named)")
    group.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, any of {', '.join(PARTS)}")
    group.add_argument("--fuzz-calls", type=int, default=640, help="fuzz calls, shared equally by all tools")
    group.add_argument("--fuzz-invalid", type=float, default=0.2, help="share of fuzz calls made invalid")
    group.add_argument("--clients", type=int, default=10, help="load: concurrent clients")
    group.add_argument("--calls", type=int, default=20, help="load: calls per client per round")
    group.add_argument("--rounds", type=int, default=2, help="load: rounds")
    group.add_argument(
        "--victims", default=",".join(VICTIMS), help="faults: processes to kill -9, comma-separated"
    )
    group.add_argument(
        "--call-timeout", type=float, default=30.0, help="seconds before an unanswered call is a hang"
    )
    group.add_argument(
        "--slow-wait", type=float, default=10.0, help="probes: seconds a stalled request may stay open"
    )
    group.add_argument("--body-mib", type=int, default=16, help="probes: size of the oversized body")
    group.add_argument(
        "--budget", type=float, default=600.0, help="fuzz, load: seconds of calls before a part stops early"
    )
    group.add_argument("--seed", type=int, default=1, help="fuzz and load: random seed")
    group.add_argument("--check", action="store_true", help="exit 1 if any part found a defect")
    group.add_argument("--json", type=Path, metavar="FILE", help="also write the full report as JSON")


def parse_parts(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Validate the comma-separated choices once, before any rig starts."""
    for option, choices in (("parts", PARTS), ("victims", VICTIMS)):
        chosen = [item for item in getattr(args, option).split(",") if item]
        unknown = sorted(set(chosen) - set(choices))
        if unknown:
            parser.error(f"--{option}: unknown {', '.join(unknown)}; choose from {', '.join(choices)}")
        setattr(args, option, chosen)


def _exit_on_sigterm(signum: int) -> NoReturn:
    raise SystemExit(128 + signum)  # unwinds through each part's finally, which stops its rigs


def run(args: argparse.Namespace) -> int:
    with handling_signals(_exit_on_sigterm, [signal.SIGTERM]):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    report = ReliabilityReport()
    if "fuzz" in args.parts:
        report.fuzz = run_fuzz(args.fuzz_calls, args.fuzz_invalid, args.call_timeout, args.seed, args.budget)
        print_fuzz(report.fuzz)
    if "load" in args.parts:
        report.load = run_load(
            args.clients, args.calls, args.rounds, args.call_timeout, args.seed, args.budget
        )
        print_load(report.load)
    if "faults" in args.parts:
        report.faults = run_faults(args.victims, args.call_timeout)
        print_faults(report.faults)
    if "probes" in args.parts:
        report.probes = run_probes(args.call_timeout, args.slow_wait, args.body_mib)
        print_probes(report.probes)
    if args.json is not None:
        save_file(args.json, report.model_dump_json(indent=2).encode())
    problems = report.problems()
    write(f"\n{report.summary()}\n" + "".join(f"- {problem}\n" for problem in problems))
    return 1 if args.check and problems else 0
