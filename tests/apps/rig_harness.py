"""Run a rig until SIGINT/SIGTERM or until its app exits, with no MCP server: a test harness.

    .venv/bin/python tests/apps/rig_harness.py [--backend x11|sway] [--size WxH] [--no-wm] [--no-a11y] -- APP [ARGS...]

When the rig is ready it writes one JSON line to stderr:
``{"ready": <RigStatus>, "env": <Rig.env>, "run_dir": "..."}``; a start-up failure writes
``{"error": {code, message, details, remediation}}`` and exits 1. Otherwise the exit code is
run_until_signal's: 0 after a signal, the app's status when the app exited on its own.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading

from deskrig.rig import Rig, RigOptions, RigStartupError, run_until_signal


def main() -> int:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["x11", "sway"], default="x11")
    parser.add_argument("--size", default="1280x800")
    parser.add_argument("--no-wm", action="store_true")
    parser.add_argument("--no-a11y", action="store_true")
    args = parser.parse_args(argv[:split])
    options = RigOptions(
        backend=args.backend,
        size=args.size,
        wm=None if args.no_wm or args.backend != "x11" else "openbox",
        a11y=not args.no_a11y,
        app=argv[split + 1 :],
    )

    def serve(rig: Rig, stop: threading.Event) -> None:
        ready = {"ready": rig.status().model_dump(mode="json"), "env": rig.env, "run_dir": str(rig.run_dir)}
        print(json.dumps(ready), file=sys.stderr, flush=True)
        stop.wait()

    try:
        return run_until_signal(Rig(options), serve)
    except RigStartupError as exc:
        print(json.dumps({"error": exc.info().model_dump(mode="json")}), file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
