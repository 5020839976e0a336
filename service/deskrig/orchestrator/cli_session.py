"""``deskrig session start|stop|ls|logs|artifacts``: the handlers, over the service's client.

Results go to stdout (``--json`` for scripts); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deskrig.orchestrator.cli_common import (
    print_json,
    service_client,
    state_path,
    stderr_console,
    validation_problems,
)

if TYPE_CHECKING:
    from deskrig.orchestrator.models import SessionInfo

#: How often ``session start`` polls the service while it shows progress.
PROGRESS_POLL = 0.2


def _age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _spec(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from deskrig.errors import ConfigError
    from deskrig.orchestrator.models import SessionSpec

    env = {}
    for item in args.env or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--env wants NAME=VALUE, got {item!r}")
        env[name] = value
    fields = {
        "image": args.image,
        "app": args.app,
        "size": args.size,
        "backend": args.backend,
        "env": env or None,
        "record": False if args.no_record else None,
        "video": True if args.video else None,
        "name": args.name,
        "artifacts_dir": str(Path(args.artifacts_dir).resolve()) if args.artifacts_dir else None,
        "ready_timeout": args.ready_timeout,
        "queue_timeout": args.queue_timeout,
        "idle_timeout": args.idle_timeout,
        "max_duration": args.max_duration,
    }
    try:
        return SessionSpec.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc)) from None


def _progress_text(info: SessionInfo) -> str:
    if info.queue_position:
        return f"[bold]{info.id}[/] queued: {info.queue_position} ahead of it in line for a rig slot"
    return f"[bold]{info.id}[/] {info.state.value}: {info.phase or ''}"


def start(args: argparse.Namespace) -> int:
    from deskrig.errors import DeskrigError, ErrorCode
    from deskrig.orchestrator.models import SessionState
    from deskrig.orchestrator.service import ensure_service

    spec = _spec(args)
    console = stderr_console()
    with console.status("connecting to the orchestrator service") as status:
        serve_args = ["--runtime", args.runtime] if args.runtime else []
        if args.registry:
            serve_args += ["--registry", args.registry]
        client = ensure_service(state_path(args), serve_args, runtime=args.runtime)
        status.update(f"requesting a rig from {spec.image}")
        info = client.start(spec, wait=False)
        try:
            while info.state in (SessionState.QUEUED, SessionState.STARTING):
                status.update(_progress_text(info))
                time.sleep(PROGRESS_POLL)
                info = client.get(info.id)
        except KeyboardInterrupt:
            status.update(f"interrupted: stopping {info.id}")
            client.stop(info.id)
            return 130
    if info.state is not SessionState.READY:
        error = info.error
        code = error.code if error else ErrorCode.RIG_FAILED
        raise DeskrigError(
            code,
            f"session {info.id} {info.state.value}: {info.reason}",
            details=error.details if error else None,
            # The rig's last lines are in details (-v), and all of them here:
            remediation=f"`deskrig session logs {info.id}` shows the rig's log."
            if code is ErrorCode.RIG_FAILED or error is None
            else error.remediation,
        )
    if args.json:
        print_json(
            {"id": info.id, "mcp_url": info.mcp_url, "token": info.token, "artifacts_dir": info.artifacts_dir}
        )
    else:
        sys.stdout.write(
            f"session {info.id} ready\n  mcp_url:       {info.mcp_url}\n  token:         {info.token}\n"
            f"  artifacts_dir: {info.artifacts_dir}\n  stop with:     deskrig session stop {info.id}\n"
        )
    return 0


def stop(args: argparse.Namespace) -> int:
    results = []
    with service_client(args) as client, stderr_console().status("stopping") as status:
        for session_id in args.ids:
            status.update(f"stopping {session_id}: finalizing the recording, removing the rig")
            info = client.stop(session_id)
            results.append(info)
    if args.json:
        print_json([info.model_dump(mode="json", exclude={"token"}) for info in results])
    else:
        for info in results:
            sys.stdout.write(
                f"{info.id} {info.state.value}: {info.reason}; {info.turns} turns in {info.artifacts_dir}\n"
            )
    return 0


def ls(args: argparse.Namespace) -> int:
    from deskrig.extras import needs_extra

    with service_client(args) as client:
        sessions = client.list()
    if args.json:
        print_json([info.model_dump(mode="json", exclude={"token"}) for info in sessions])
        return 0
    with needs_extra("orchestrator", "session ls's table"):
        from rich.console import Console
        from rich.table import Table

    table = Table("ID", "NAME", "STATE", "AGE", "ENDPOINT", "TURNS", "IMAGE", "REASON", box=None)
    now = time.time()
    for info in sessions:
        table.add_row(
            info.id,
            info.spec.name or "",
            info.state.value,
            _age((info.ended_at or now) - info.created_at),
            info.mcp_url or "",
            str(info.turns),
            info.spec.image,
            info.reason or "",
        )
    # A pipe gets whole lines (rich would fit them to 80 columns); a terminal gets its width.
    Console(width=None if sys.stdout.isatty() else 1000).print(table)
    return 0


def logs(args: argparse.Namespace) -> int:
    with service_client(args) as client:
        sys.stdout.write(client.logs(args.id, args.tail))
    return 0


def artifacts(args: argparse.Namespace) -> int:
    with service_client(args) as client:
        if args.path:
            data = client.artifact(args.id, args.path)
            if args.output:
                Path(args.output).write_bytes(data)
            else:
                sys.stdout.buffer.write(data)
            return 0
        listing = client.artifacts(args.id)
    if args.json:
        print_json(listing.model_dump(mode="json"))
    else:
        sys.stdout.write(f"{listing.artifacts_dir}\n")
        for item in listing.files:
            sys.stdout.write(f"  {item.size:>10}  {item.path}\n")
    return 0
