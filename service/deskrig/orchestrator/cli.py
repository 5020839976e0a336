"""``deskrig session ...`` and ``deskrig orchestrator ...``: argument parsing and display only.

Everything heavy is imported inside the handlers, so ``deskrig rig run`` never pays for it.
Results go to stdout (``--json`` for scripts); progress and errors go to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from deskrig.orchestrator.models import SessionInfo
    from deskrig.orchestrator.service import ServiceClient

#: How often ``session start`` polls the service while it shows progress.
PROGRESS_POLL = 0.2
DEFAULT_LISTEN = "127.0.0.1:0"


def _boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("want 1/true/yes/on or 0/false/no/off")


#: What a variable of each kind must hold, for the error when it does not.
_WANTS: dict[Callable[[str], object], str] = {int: "want a whole number", float: "want a number"}


@dataclass(frozen=True)
class EnvFlag:
    """A flag's DESKRIG_* variable: used when the flag is not given (the flag wins)."""

    dest: str
    env: str
    parse: Callable[[str], object]


class _Flags:
    """One subcommand's flags, each settable by its DESKRIG_* variable too (named in its help)."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser
        self.env_flags: list[EnvFlag] = []
        parser.set_defaults(env_flags=self.env_flags)

    def value(
        self,
        *names: str,
        env: str,
        help: str,
        type: Callable[[str], object] = str,
        metavar: str | None = None,
    ) -> None:
        action = self.parser.add_argument(*names, type=type, metavar=metavar, help=f"{help} [${env}]")
        self.env_flags.append(EnvFlag(action.dest, env, type))

    def switch(self, *names: str, env: str, help: str) -> None:
        action = self.parser.add_argument(
            *names, action="store_true", default=None, help=f"{help} [${env}=1]"
        )
        self.env_flags.append(EnvFlag(action.dest, env, _boolean))

    def many(self, *names: str, env: str, help: str, metavar: str) -> None:
        """A repeatable flag; its variable holds several values, split like a shell would."""
        action = self.parser.add_argument(
            *names, action="append", metavar=metavar, help=f"{help} (repeatable) [${env}, space-separated]"
        )
        self.env_flags.append(EnvFlag(action.dest, env, shlex.split))

    def timeouts(self, env_prefix: str, what: str) -> None:
        for name, help_text in (
            ("ready-timeout", "seconds a rig may take to be ready"),
            ("queue-timeout", "seconds to wait for a free slot"),
            ("idle-timeout", "stop after S s without MCP activity"),
            ("max-duration", "stop after S s at most"),
        ):
            env = f"{env_prefix}_{name.replace('-', '_').upper()}"
            self.value(f"--{name}", env=env, type=float, metavar="S", help=help_text + what)

    def json(self, what: str = "print JSON for scripts") -> None:
        self.switch("--json", env="DESKRIG_JSON", help=what)

    def common(self) -> None:
        """The flags every subcommand has: where the service's state lives, and verbosity."""
        self.value(
            "--state-dir",
            env="DESKRIG_STATE_DIR",
            metavar="DIR",
            help="where the service's address file lives",
        )
        self.switch("-v", "--verbose", env="DESKRIG_VERBOSE", help="debug logging; errors with their details")


def apply_environment(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """Fill each flag that was not given from its DESKRIG_* variable, when that is set."""
    from deskrig.errors import ConfigError

    for flag in getattr(args, "env_flags", []):
        raw = environ.get(flag.env, "")
        if getattr(args, flag.dest) is not None or not raw:
            continue
        try:
            value = flag.parse(raw)
        except ValueError as exc:
            wants = _WANTS.get(flag.parse, str(exc))
            raise ConfigError(f"${flag.env}={raw!r} is not valid: {wants}") from None
        setattr(args, flag.dest, value)


def register(commands: Any) -> None:
    """Add the ``session`` and ``orchestrator`` commands to deskrig's subparsers."""
    session = commands.add_parser(
        "session", help="start, list and stop rigs through the orchestrator service"
    )
    sessions = session.add_subparsers(dest="session_command", required=True)

    start = _Flags(
        sessions.add_parser("start", help="start a rig (starts the orchestrator service if none runs)")
    )
    start.value("--image", env="DESKRIG_SESSION_IMAGE", help="rig image (default deskrig/rig:latest)")
    start.value(
        "--app", env="DESKRIG_SESSION_APP", metavar="CMD", help="app command line (default: the image's)"
    )
    start.value("--size", env="DESKRIG_SESSION_SIZE", metavar="WxH", help="screen size")
    start.many("--env", env="DESKRIG_SESSION_ENV", metavar="NAME=VALUE", help="rig environment")
    start.switch("--no-record", env="DESKRIG_SESSION_NO_RECORD", help="do not record turn folders")
    start.switch("--video", env="DESKRIG_SESSION_VIDEO", help="also record an mp4 of the session")
    start.value("--name", env="DESKRIG_SESSION_NAME", help="a label for the session")
    start.value(
        "--artifacts-dir",
        env="DESKRIG_SESSION_ARTIFACTS_DIR",
        metavar="DIR",
        help="host directory for the session's artifacts",
    )
    start.timeouts("DESKRIG_SESSION", "")
    start.json("print {id, mcp_url, token, artifacts_dir}")
    start.common()

    stop = _Flags(
        sessions.add_parser("stop", help="stop sessions: finalize the video, keep artifacts, remove the rig")
    )
    stop.parser.add_argument("ids", nargs="+", metavar="ID")
    stop.json()
    stop.common()

    ls = _Flags(sessions.add_parser("ls", help="sessions with name, state, age, endpoint and turn count"))
    ls.json()
    ls.common()

    logs = _Flags(sessions.add_parser("logs", help="the rig's log"))
    logs.parser.add_argument("id", metavar="ID")
    logs.value("--tail", env="DESKRIG_LOGS_TAIL", type=int, metavar="N", help="last N lines only")
    logs.common()

    artifacts = _Flags(sessions.add_parser("artifacts", help="list a session's artifacts, or fetch one"))
    artifacts.parser.add_argument("id", metavar="ID")
    artifacts.parser.add_argument("path", nargs="?", help="one file to write to stdout (or -o FILE)")
    artifacts.value(
        "-o", "--output", env="DESKRIG_ARTIFACT_OUTPUT", metavar="FILE", help="write the file here"
    )
    artifacts.json()
    artifacts.common()

    orchestrator = commands.add_parser(
        "orchestrator", help="the orchestrator service the session commands use"
    )
    service = orchestrator.add_subparsers(dest="orchestrator_command", required=True)
    serve = _Flags(
        service.add_parser("serve", help="run the orchestrator service (foreground unless --background)")
    )
    serve.value(
        "--listen",
        env="DESKRIG_ORCHESTRATOR_LISTEN",
        metavar="HOST:PORT",
        help=f"API address (default {DEFAULT_LISTEN}: loopback, any port)",
    )
    serve.switch(
        "--background",
        env="DESKRIG_ORCHESTRATOR_BACKGROUND",
        help="start detached and return once it answers",
    )
    serve.value(
        "--max-sessions",
        env="DESKRIG_MAX_SESSIONS",
        type=int,
        metavar="N",
        help="rigs at once (default from CPUs and memory)",
    )
    serve.value(
        "--artifacts-root", env="DESKRIG_ARTIFACTS_ROOT", metavar="DIR", help="where session directories go"
    )
    serve.value(
        "--rig-bind",
        env="DESKRIG_RIG_BIND",
        metavar="ADDR",
        help="address rig ports are published on (default 127.0.0.1)",
    )
    serve.timeouts("DESKRIG_ORCHESTRATOR", " (default for sessions)")
    serve.common()
    service_stop = _Flags(service.add_parser("stop", help="stop the service and all its sessions"))
    service_stop.common()
    status = _Flags(service.add_parser("status", help="whether the service runs, and where"))
    status.json("print {running, url, pid, orchestrator_id, started_at, sessions, state_dir}")
    status.common()


def run(args: argparse.Namespace) -> int:
    """Dispatch a ``session`` or ``orchestrator`` command; a failure is one line on stderr."""
    import logging

    from deskrig.cli_errors import report_cli_error
    from deskrig.errors import DeskrigError

    try:
        apply_environment(args, os.environ)
        verbose = bool(getattr(args, "verbose", False))
        logging.getLogger("httpx2").setLevel(logging.DEBUG if verbose else logging.WARNING)
        if args.command == "orchestrator":
            handlers = {"serve": _serve, "stop": _service_stop, "status": _service_status}
            return handlers[args.orchestrator_command](args)
        handlers = {"start": _start, "stop": _stop, "ls": _ls, "logs": _logs, "artifacts": _artifacts}
        return handlers[args.session_command](args)
    except DeskrigError as exc:
        return report_cli_error(exc, verbose=bool(getattr(args, "verbose", False)))


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
        problems = [
            f"--{'.'.join(str(part) for part in err['loc']).replace('_', '-')}: "
            + err["msg"].removeprefix("Value error, ")
            for err in exc.errors(include_url=False)
        ]
        raise ConfigError("; ".join(problems)) from None


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
    host, _, port = (args.listen or DEFAULT_LISTEN).rpartition(":")
    fields: dict[str, Any] = {
        "state_dir": state_dir,
        "adopt_rigs": True,  # its clients hold the URLs of the rigs a crashed predecessor started
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
        if args.json:
            _print_json({"running": False, "state_dir": str(state_dir)})
        else:
            sys.stdout.write("not running\n")
        return 1
    with client:
        count = len(client.list())
    if args.json:
        shown = state.model_dump(mode="json", exclude={"token"})
        _print_json({"running": True, **shown, "sessions": count, "state_dir": str(state_dir)})
    else:
        sys.stdout.write(
            f"running: {state.url} pid {state.pid} orchestrator {state.orchestrator_id}, {count} sessions\n"
        )
    return 0
