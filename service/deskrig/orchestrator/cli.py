"""``deskrig session ...`` and ``deskrig orchestrator ...``: argument parsing and display only.

Everything heavy is imported inside the handlers, so ``deskrig rig run`` never pays for it.
Results go to stdout (``--json`` for scripts); progress and errors go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from deskrig.orchestrator.models import SessionInfo
    from deskrig.orchestrator.service import ServiceClient

#: How often ``session start`` polls the service while it shows progress.
PROGRESS_POLL = 0.2


def _timeouts(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--ready-timeout", type=float, metavar="S", help=f"seconds a rig may take to be ready{what}"
    )
    parser.add_argument(
        "--queue-timeout", type=float, metavar="S", help=f"seconds to wait for a free slot{what}"
    )
    parser.add_argument(
        "--idle-timeout", type=float, metavar="S", help=f"stop after S s without MCP activity{what}"
    )
    parser.add_argument("--max-duration", type=float, metavar="S", help=f"stop after S s at most{what}")


def _state_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", metavar="DIR", help="where the service's address file lives")


def register(commands: Any) -> None:
    """Add the ``session`` and ``orchestrator`` commands to deskrig's subparsers."""
    session = commands.add_parser(
        "session", help="start, list and stop rigs through the orchestrator service"
    )
    sessions = session.add_subparsers(dest="session_command", required=True)

    start = sessions.add_parser("start", help="start a rig (starts the orchestrator service if none runs)")
    start.add_argument("--image", help="rig image (default deskrig/rig:latest)")
    start.add_argument("--app", metavar="CMD", help="app command line (default: the image's)")
    start.add_argument("--size", metavar="WxH", help="screen size")
    start.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="rig environment")
    start.add_argument("--no-record", action="store_true", help="do not record turn folders")
    start.add_argument("--video", action="store_true", help="also record an mp4 of the session")
    start.add_argument("--name", help="a label for the session")
    start.add_argument("--artifacts-dir", metavar="DIR", help="host directory for the session's artifacts")
    _timeouts(start, "")
    start.add_argument("--json", action="store_true", help="print {id, mcp_url, token, artifacts_dir}")
    _state_dir(start)

    stop = sessions.add_parser(
        "stop", help="stop sessions: finalize the video, keep artifacts, remove the rig"
    )
    stop.add_argument("ids", nargs="+", metavar="ID")
    stop.add_argument("--json", action="store_true")
    _state_dir(stop)

    ls = sessions.add_parser("ls", help="sessions with state, age, endpoint and turn count")
    ls.add_argument("--json", action="store_true")
    _state_dir(ls)

    logs = sessions.add_parser("logs", help="the rig's log")
    logs.add_argument("id", metavar="ID")
    logs.add_argument("--tail", type=int, metavar="N", help="last N lines only")
    _state_dir(logs)

    artifacts = sessions.add_parser("artifacts", help="list a session's artifacts, or fetch one")
    artifacts.add_argument("id", metavar="ID")
    artifacts.add_argument("path", nargs="?", help="one file to write to stdout (or -o FILE)")
    artifacts.add_argument("-o", "--output", metavar="FILE", help="write the file here")
    artifacts.add_argument("--json", action="store_true")
    _state_dir(artifacts)

    orchestrator = commands.add_parser(
        "orchestrator", help="the orchestrator service the session commands use"
    )
    service = orchestrator.add_subparsers(dest="orchestrator_command", required=True)
    serve = service.add_parser("serve", help="run the orchestrator service (foreground unless --background)")
    serve.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="API address (default: loopback, any port)",
    )
    serve.add_argument("--background", action="store_true", help="start detached and return once it answers")
    serve.add_argument(
        "--max-sessions", type=int, metavar="N", help="rigs at once (default from CPUs and memory)"
    )
    serve.add_argument("--artifacts-root", metavar="DIR", help="where session directories go")
    serve.add_argument(
        "--rig-bind", metavar="ADDR", help="address rig ports are published on (default 127.0.0.1)"
    )
    _timeouts(serve, " (default for sessions)")
    serve.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    _state_dir(serve)
    service_stop = service.add_parser("stop", help="stop the service and all its sessions")
    _state_dir(service_stop)
    status = service.add_parser("status", help="whether the service runs, and where")
    _state_dir(status)


def run(args: argparse.Namespace) -> int:
    """Dispatch a ``session`` or ``orchestrator`` command."""
    import logging

    verbose = getattr(args, "verbose", False)
    logging.getLogger("httpx2").setLevel(logging.DEBUG if verbose else logging.WARNING)
    if args.command == "orchestrator":
        return {"serve": _serve, "stop": _service_stop, "status": _service_status}[args.orchestrator_command](
            args
        )
    handlers = {"start": _start, "stop": _stop, "ls": _ls, "logs": _logs, "artifacts": _artifacts}
    return handlers[args.session_command](args)


# --- helpers -----------------------------------------------------------------------------------------


def _state_path(args: argparse.Namespace) -> Path:
    from deskrig.orchestrator.models import default_state_dir

    return Path(args.state_dir) if args.state_dir else default_state_dir()


def _err() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def _client(args: argparse.Namespace) -> ServiceClient:
    from deskrig.errors import DeskrigError, ErrorCode
    from deskrig.orchestrator.service import connect_service

    client = connect_service(_state_path(args))
    if client is None:
        raise DeskrigError(
            ErrorCode.RUNTIME_UNAVAILABLE,
            "no orchestrator service is running",
            remediation="`deskrig session start` starts one; or run `deskrig orchestrator serve --background`.",
        )
    return client


def _age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


# --- session commands --------------------------------------------------------------------------------


def _spec(args: argparse.Namespace) -> Any:
    from deskrig.errors import ConfigError
    from deskrig.orchestrator.models import SessionSpec

    env = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--env wants NAME=VALUE, got {item!r}")
        env[name] = value
    fields = {
        "image": args.image,
        "app": args.app,
        "size": args.size,
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
    except ValueError as exc:
        raise ConfigError(f"invalid session options: {exc}") from exc


def _progress_text(info: SessionInfo) -> str:
    if info.queue_position:
        return f"[bold]{info.id}[/] queued: {info.queue_position} ahead of it in line for a rig slot"
    return f"[bold]{info.id}[/] {info.state.value}: {info.phase or ''}"


def _start(args: argparse.Namespace) -> int:
    from deskrig.errors import DeskrigError, ErrorCode
    from deskrig.orchestrator.models import SessionState
    from deskrig.orchestrator.service import ensure_service

    spec = _spec(args)
    console = _err()
    with console.status("connecting to the orchestrator service") as status:
        client = ensure_service(_state_path(args))
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
        raise DeskrigError(
            error.code if error else ErrorCode.RIG_FAILED,
            f"session {info.id} {info.state.value}: {info.reason}",
            details=error.details if error else None,
            remediation=error.remediation if error else None,
        )
    if args.json:
        _print_json(
            {"id": info.id, "mcp_url": info.mcp_url, "token": info.token, "artifacts_dir": info.artifacts_dir}
        )
    else:
        sys.stdout.write(
            f"session {info.id} ready\n  mcp_url:       {info.mcp_url}\n  token:         {info.token}\n"
            f"  artifacts_dir: {info.artifacts_dir}\n  stop with:     deskrig session stop {info.id}\n"
        )
    return 0


def _stop(args: argparse.Namespace) -> int:
    results = []
    with _client(args) as client, _err().status("stopping") as status:
        for session_id in args.ids:
            status.update(f"stopping {session_id}: finalizing the recording, removing the rig")
            info = client.stop(session_id)
            results.append(info)
    if args.json:
        _print_json([info.model_dump(mode="json", exclude={"token"}) for info in results])
    else:
        for info in results:
            sys.stdout.write(
                f"{info.id} {info.state.value}: {info.reason}; {info.turns} turns in {info.artifacts_dir}\n"
            )
    return 0


def _ls(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    with _client(args) as client:
        sessions = client.list()
    if args.json:
        _print_json([info.model_dump(mode="json", exclude={"token"}) for info in sessions])
        return 0
    table = Table("ID", "STATE", "AGE", "ENDPOINT", "TURNS", "IMAGE", "REASON", box=None)
    now = time.time()
    for info in sessions:
        table.add_row(
            info.id,
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


def _logs(args: argparse.Namespace) -> int:
    with _client(args) as client:
        sys.stdout.write(client.logs(args.id, args.tail))
    return 0


def _artifacts(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.path:
            data = client.artifact(args.id, args.path)
            if args.output:
                Path(args.output).write_bytes(data)
            else:
                sys.stdout.buffer.write(data)
            return 0
        listing = client.artifacts(args.id)
    if args.json:
        _print_json(listing.model_dump(mode="json"))
    else:
        sys.stdout.write(f"{listing.artifacts_dir}\n")
        for item in listing.files:
            sys.stdout.write(f"  {item.size:>10}  {item.path}\n")
    return 0


# --- the service -------------------------------------------------------------------------------------


def _serve_args(args: argparse.Namespace) -> list[str]:
    """The flags a background service is started with: the ones given here, passed through."""
    passed = []
    for flag in ("listen", "max_sessions", "artifacts_root", "rig_bind", *_TIMEOUT_FIELDS):
        value = getattr(args, flag)
        if value is not None:
            passed += [f"--{flag.replace('_', '-')}", str(value)]
    return passed + (["--verbose"] if args.verbose else [])


_TIMEOUT_FIELDS = ("ready_timeout", "queue_timeout", "idle_timeout", "max_duration")


def _serve(args: argparse.Namespace) -> int:
    import logging

    from deskrig.orchestrator.models import OrchestratorConfig
    from deskrig.orchestrator.service import serve, start_background

    state_dir = _state_path(args)
    if args.background:
        with start_background(state_dir, _serve_args(args)) as client:
            sys.stdout.write(f"orchestrator service at {client.url} (state: {state_dir})\n")
        return 0
    logging.getLogger("deskrig").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    host, _, port = args.listen.rpartition(":")
    fields: dict[str, Any] = {
        "state_dir": state_dir,
        "max_sessions": args.max_sessions,
        "artifacts_root": args.artifacts_root,
        "bind_address": args.rig_bind,
        **{name: getattr(args, name) for name in _TIMEOUT_FIELDS},
    }
    config = OrchestratorConfig.model_validate({k: v for k, v in fields.items() if v is not None})
    serve(config, host=host.strip("[]") or "127.0.0.1", port=int(port or 0))
    return 0


def _service_stop(args: argparse.Namespace) -> int:
    from deskrig.orchestrator.service import stop_service

    with _err().status("stopping the orchestrator service and its sessions"):
        stopped = stop_service(_state_path(args))
    sys.stderr.write("orchestrator service stopped\n" if stopped else "no orchestrator service was running\n")
    return 0


def _service_status(args: argparse.Namespace) -> int:
    from deskrig.orchestrator.service import connect_service, read_state

    state_dir = _state_path(args)
    client = connect_service(state_dir)
    state = read_state(state_dir)
    if client is None or state is None:
        sys.stdout.write("not running\n")
        return 1
    with client:
        count = len(client.list())
    sys.stdout.write(
        f"running: {state.url} pid {state.pid} orchestrator {state.orchestrator_id}, {count} sessions\n"
    )
    return 0
