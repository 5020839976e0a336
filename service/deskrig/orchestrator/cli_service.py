"""``deskrig orchestrator serve|stop|status``: run, stop and report the orchestrator service."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from deskrig.orchestrator.cli_common import print_json, state_path, stderr_console

DEFAULT_LISTEN = "127.0.0.1:0"


def _serve_args(args: argparse.Namespace) -> list[str]:
    """The flags a background service is started with: the ones given here, passed through."""
    passed = []
    for flag in (
        "listen",
        "max_sessions",
        "artifacts_root",
        "rig_bind",
        "registry",
        "runtime",
        *_TIMEOUT_FIELDS,
    ):
        value = getattr(args, flag)
        if value is not None:
            passed += [f"--{flag.replace('_', '-')}", str(value)]
    for flag in _PLACEMENT_FIELDS:
        for value in getattr(args, flag) or []:
            passed += [f"--{flag.replace('_', '-')}", value]
    return passed + (["--verbose"] if args.verbose else [])


#: Repeatable flags whose values become the config's lists (placement_constraint -> ..._constraints).
_PLACEMENT_FIELDS = ("placement_constraint", "placement_preference")


_TIMEOUT_FIELDS = ("ready_timeout", "queue_timeout", "idle_timeout", "max_duration")


def serve(args: argparse.Namespace) -> int:
    import logging

    from pydantic import ValidationError

    from deskrig.errors import ConfigError
    from deskrig.orchestrator.cli_common import validation_problems
    from deskrig.orchestrator.models import OrchestratorConfig
    from deskrig.orchestrator.service import serve as serve_api
    from deskrig.orchestrator.service import start_background

    state_dir = state_path(args)
    if args.background:
        with start_background(state_dir, _serve_args(args)) as client:
            sys.stdout.write(f"orchestrator service at {client.url} (state: {state_dir})\n")
        return 0
    logging.getLogger("deskrig").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    host, _, port = (args.listen or DEFAULT_LISTEN).rpartition(":")
    fields: dict[str, Any] = {
        "state_dir": state_dir,
        "adopt_rigs": True,  # its clients hold the URLs of the rigs a crashed predecessor started
        "max_sessions": args.max_sessions,
        "artifacts_root": args.artifacts_root,
        "bind_address": args.rig_bind,
        "registry": args.registry,
        "runtime": args.runtime,
        **{name: getattr(args, name) for name in _TIMEOUT_FIELDS},
        **{f"{name}s": getattr(args, name) for name in _PLACEMENT_FIELDS},
    }
    try:
        config = OrchestratorConfig.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc)) from None
    serve_api(config, host=host.strip("[]") or "127.0.0.1", port=int(port or 0))
    return 0


def stop(args: argparse.Namespace) -> int:
    from deskrig.orchestrator.service import stop_service

    with stderr_console().status("stopping the orchestrator service and its sessions"):
        stopped = stop_service(state_path(args))
    sys.stderr.write("orchestrator service stopped\n" if stopped else "no orchestrator service was running\n")
    return 0


def status(args: argparse.Namespace) -> int:
    from deskrig.orchestrator.service import connect_service, read_state

    state_dir = state_path(args)
    client = connect_service(state_dir)
    state = read_state(state_dir)
    if client is None or state is None:
        if args.json:
            print_json({"running": False, "state_dir": str(state_dir)})
        else:
            sys.stdout.write("not running\n")
        return 1
    with client:
        count = len(client.list())
    if args.json:
        shown = state.model_dump(mode="json", exclude={"token"})
        print_json({"running": True, **shown, "sessions": count, "state_dir": str(state_dir)})
    else:
        sys.stdout.write(
            f"running: {state.url} pid {state.pid} orchestrator {state.orchestrator_id} "
            f"on {state.runtime}, {count} sessions\n"
        )
    return 0
