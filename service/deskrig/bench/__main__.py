"""``python -m deskrig.bench [SUITE ...]``: run benchmark suites and print their tables."""

from __future__ import annotations

import argparse
import logging
import sys

from deskrig.bench import actions, capture, images, orchestrator, recording

SUITES = {
    "capture": capture.run,
    "actions": actions.run,
    "recording": recording.run,
    "images": images.run,
    "orchestrator": orchestrator.run,
}


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    parser.add_argument(
        "suites", nargs="*", metavar="SUITE", help=f"any of {', '.join(SUITES)} (default: all)"
    )
    parser.add_argument("--runs", type=int, default=30, help="samples per case")
    args = parser.parse_args()
    unknown = sorted(set(args.suites) - set(SUITES))
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for name in args.suites or SUITES:
        SUITES[name](args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
