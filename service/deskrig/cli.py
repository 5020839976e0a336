"""Command line: argument parsing only; the work happens in the modules it calls."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import shlex
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

from deskrig import __version__
from deskrig.config import Settings, load_settings
from deskrig.errors import DeskrigError
from deskrig.transport import Transport, bind_listener, resolve_token

EXIT_ERROR = 1
EXIT_USAGE = 2


def _server_options(parser: argparse.ArgumentParser) -> None:
    transport = parser.add_mutually_exclusive_group(required=True)
    transport.add_argument("--stdio", action="store_true", help="serve MCP on stdin/stdout")
    transport.add_argument("--http", metavar="HOST:PORT", help="serve MCP over Streamable HTTP at /mcp")
    parser.add_argument("--config", metavar="FILE", help="TOML settings file")
    parser.add_argument("--token", help="bearer token for HTTP (default: $DESKRIG_TOKEN, else generated)")
    parser.add_argument("--no-auth", action="store_true", help="no token; only on a loopback bind")
    parser.add_argument(
        "--allowed-host",
        action="append",
        metavar="HOST[:PORT]",
        help="extra Host header to accept (repeatable)",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        metavar="SECONDS",
        help="close an HTTP connection whose request headers are not complete by then (default 10)",
    )
    parser.add_argument("--tool-profile", choices=["default", "acs", "all"], help="which tool set to expose")
    parser.add_argument("--backend", help="desktop backend: auto, x11")
    parser.add_argument(
        "--allowed-dir", action="append", metavar="DIR", help="allowed output directory (repeatable)"
    )
    parser.add_argument("--max-captures-per-minute", type=int, metavar="N")
    parser.add_argument(
        "--blocked-window", action="append", metavar="REGEX", help="hide windows whose title matches"
    )
    parser.add_argument("--audit-log", metavar="FILE", help="audit log file, or - for stderr")
    parser.add_argument(
        "--max-inline-bytes", type=int, metavar="N", help="largest inline image (default 1 MiB)"
    )
    parser.add_argument(
        "--record", metavar="DIR", help="record every client's actions as turn folders in DIR from start-up"
    )
    parser.add_argument("--record-video", action="store_true", help="with --record: also DIR/recording.mp4")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deskrig", description="A headless GUI test rig for AI agents.")
    parser.add_argument("--version", action="version", version=f"deskrig {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="attach to the current $DISPLAY and serve MCP")
    _server_options(serve)
    serve.add_argument("--display", help="X display to attach to (default: $DISPLAY)")

    rig = commands.add_parser("rig", help="run a rig: virtual display, window manager, app and MCP server")
    rig_commands = rig.add_subparsers(dest="rig_command", required=True)
    run = rig_commands.add_parser("run", help="start a rig around APP and serve MCP until it ends")
    _server_options(run)
    run.add_argument(
        "--size", default=None, metavar="WxH", help="screen size (default $DESKRIG_SIZE or 1280x800)"
    )
    run.add_argument("--wm", default="openbox", help="window manager (default openbox)")
    run.add_argument("--no-wm", action="store_true", help="run without a window manager")
    run.add_argument("--no-a11y", action="store_true", help="do not start the accessibility bus")
    run.add_argument("--startup-timeout", type=float, default=30.0, metavar="SECONDS")
    run.add_argument("app", nargs=argparse.REMAINDER, help="-- APP [ARGS...] (default: $DESKRIG_APP)")

    doctor = commands.add_parser("doctor", help="check the display and show backend diagnostics")
    doctor.add_argument("--display", help="X display (default: $DISPLAY)")

    from deskrig.orchestrator.cli import register  # `session` and `orchestrator`; lazy inside

    register(commands)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {
        "token": args.token,
        "tool_profile": args.tool_profile,
        "backend": args.backend,
        "allowed_hosts": args.allowed_host,
        "max_inline_bytes": args.max_inline_bytes,
        "header_timeout": args.header_timeout,
        "record_dir": args.record,
        "record_video": True if args.record_video else None,
        "security": {
            "allowed_directories": args.allowed_dir,
            "max_captures_per_minute": args.max_captures_per_minute,
            "blocked_window_patterns": args.blocked_window,
            "audit_log": args.audit_log,
        },
    }
    return load_settings(args.config, os.environ, overrides)


def _transport(args: argparse.Namespace, settings: Settings) -> Transport:
    if args.stdio:
        return Transport("stdio")
    return Transport.parse_http(args.http, no_auth=args.no_auth, allowed_hosts=settings.allowed_hosts)


def _listener(transport: Transport) -> contextlib.AbstractContextManager[socket.socket | None]:
    """The bound HTTP socket (None for stdio), claimed before a desktop or rig starts."""
    if transport.kind != "http":
        return contextlib.nullcontext()
    return contextlib.closing(bind_listener(transport.host, transport.port))


def cmd_serve(args: argparse.Namespace) -> int:
    from deskrig.desktop import open_desktop
    from deskrig.http import Readiness
    from deskrig.serving import build_server, serve, stop_on_signals
    from deskrig.tools.launcher import SubprocessLauncher

    settings = _settings(args)
    transport = _transport(args, settings)
    token = resolve_token(settings, transport)

    with _listener(transport) as listener, open_desktop(settings.backend, args.display) as desktop:
        launcher = SubprocessLauncher({"DISPLAY": args.display} if args.display else {})
        server = build_server(
            desktop,
            settings,
            session_bus=os.environ.get("DBUS_SESSION_BUS_ADDRESS"),
            launcher=launcher,
            display=args.display,
        )

        def readiness() -> Readiness:
            try:
                desktop.screen_bounds()
                up = True
            except DeskrigError:
                up = False
            return Readiness(ready=up, checks={"display": up})

        stop = threading.Event()
        with stop_on_signals(stop):
            serve(server, transport, listener, token, readiness, stop)
    return 0


def cmd_rig_run(args: argparse.Namespace) -> int:
    from deskrig.rig import Rig, RigOptions, run_until_signal

    settings = _settings(args)
    transport = _transport(args, settings)
    token = resolve_token(settings, transport)
    # Importing the MCP and HTTP stacks takes longer than starting the whole desktop (about 1.5 s
    # against 1.3 s): do it while the display, window manager, buses and app start.
    importer = threading.Thread(target=importlib.import_module, args=("deskrig.serving",), daemon=True)
    importer.start()
    app = list(args.app)
    if app and app[0] == "--":
        app = app[1:]
    if not app and os.environ.get("DESKRIG_APP"):
        app = shlex.split(os.environ["DESKRIG_APP"])
    options = RigOptions(
        size=args.size or os.environ.get("DESKRIG_SIZE") or "1280x800",
        wm=None if args.no_wm else args.wm,
        app=app,
        a11y=not args.no_a11y,
        startup_timeout=args.startup_timeout,
    )
    rig = Rig(options)

    def serve_rig(rig: Rig, stop: threading.Event, listener: socket.socket | None) -> None:
        importer.join()
        from deskrig.desktop import open_desktop
        from deskrig.http import Readiness
        from deskrig.serving import build_server, serve
        from deskrig.tools.launcher import CallbackLauncher

        with open_desktop(settings.backend, rig.display) as desktop:
            server = build_server(
                desktop,
                settings,
                session_bus=rig.env.get("DBUS_SESSION_BUS_ADDRESS") if rig.status().a11y_up else None,
                launcher=CallbackLauncher(lambda argv, env, cwd: rig.launch(argv, env=env, cwd=cwd)),
                display=rig.display,
            )

            def readiness() -> Readiness:
                status = rig.status()
                checks = {"display": status.display_up, "app": status.app_up or not app}
                if status.wm is not None:
                    checks["window_manager"] = status.wm_up
                return Readiness(ready=status.ready, checks=checks, details=status.model_dump(mode="json"))

            serve(server, transport, listener, token, readiness, stop)

    with _listener(transport) as listener:
        return run_until_signal(rig, lambda rig, stop: serve_rig(rig, stop, listener))


def cmd_doctor(args: argparse.Namespace) -> int:
    from deskrig.desktop import open_desktop

    with open_desktop("auto", args.display) as desktop:
        report = {
            "backend": desktop.backend_name,
            "screen": desktop.screen_bounds().model_dump(),
            "displays": [d.model_dump() for d in desktop.displays()],
            "windows": len(desktop.windows()),
            "diagnostics": [d.model_dump() for d in desktop.diagnostics],
        }
    print(json.dumps(report, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "serve":
            return cmd_serve(args)
        if args.command == "rig":
            return cmd_rig_run(args)
        if args.command in ("session", "orchestrator"):
            from deskrig.orchestrator.cli import run

            return run(args)
        return cmd_doctor(args)
    except DeskrigError as exc:
        print(f"deskrig: {exc.code.value}: {exc.message}", file=sys.stderr)
        if exc.details:
            print(f"deskrig: details: {json.dumps(exc.details, default=str)}", file=sys.stderr)
        if exc.remediation:
            print(f"deskrig: {exc.remediation}", file=sys.stderr)
        return EXIT_USAGE if exc.code.value == "INVALID_ARGUMENT" else EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
