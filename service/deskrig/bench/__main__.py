"""``python -m deskrig.bench [SUITE ...]``: run benchmark suites and print their tables.

The timing suites run by default; ``reliability`` (the fuzz, load, fault and probe campaign) and
``density`` (idle rigs stepped up to ``--max-rigs``, which loads the machine for minutes) run only
when named.
"""

from __future__ import annotations

import argparse
import logging
import sys

from deskrig.bench import (
    a11y_idle,
    actions,
    capture,
    density,
    images,
    live,
    orchestrator,
    privacy,
    recording,
    reliability,
    stdio,
    sway,
    viewer,
)

SUITES = {
    "capture": capture.run,
    "actions": actions.run,
    "recording": recording.run,
    "images": images.run,
    "orchestrator": orchestrator.run,
    "stdio": stdio.run,
    "sway": sway.run,
    "privacy": privacy.run,
    "live": live.run,
    "viewer": viewer.run,
    "a11y-idle": a11y_idle.run,
}


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    parser.add_argument(
        "suites",
        nargs="*",
        metavar="SUITE",
        help=f"any of {', '.join(SUITES)}, density, reliability (default: all but density and reliability)",
    )
    parser.add_argument("--runs", type=int, default=30, help="samples per case")
    parser.add_argument_group("density suite (runs only when named)").add_argument(
        "--max-rigs",
        type=int,
        default=density.MAX_RIGS,
        help=f"most idle rigs to step up to (by {density.STEP}; beyond {density.RIGS_TARGET} only while "
        "every rig answers within 1 s)",
    )
    reliability.add_arguments(parser)
    args = parser.parse_args()
    known = [*SUITES, "density", "reliability"]
    unknown = sorted(set(args.suites) - set(known))
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    reliability.parse_parts(parser, args)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    status = 0
    for name in args.suites or SUITES:
        if name == "reliability":
            status = max(status, reliability.run(args))
        elif name == "density":
            density.run(args.max_rigs)
        else:
            SUITES[name](args.runs)
    return status


if __name__ == "__main__":
    sys.exit(main())
