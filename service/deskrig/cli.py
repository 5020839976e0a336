"""Command line: argument parsing only; the work happens in the modules it calls."""

from __future__ import annotations

import sys

from deskrig import quick_imports

# A rig's cold start, and a stdio server's first answers (MCP clients spawn one on every start),
# wait for their imports, which build pydantic models from the first below on: the switches go on
# here, once, for a process started as `rig run` or `serve` (main()'s other callers, such as tests
# calling it in a process that runs other code too, start without them). Each turns them off once
# its server is built.
if sys.argv[1:3] == ["rig", "run"] or sys.argv[1:2] == ["serve"]:
    quick_imports.begin()

import argparse
import contextlib
import importlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, get_args

from deskrig import __version__
from deskrig.cli_errors import report_cli_error
from deskrig.errors import ConfigError, DeskrigError, ErrorCode
from deskrig.rig.options import RigBackend
from deskrig.server_flags import Invocation, option, prepare, server_options
from deskrig.transport import Transport, resolve_tokens

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from deskrig.desktop import Desktop
    from deskrig.server import DeskrigServer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deskrig", description="A headless GUI test rig for AI agents.")
    parser.add_argument("--version", action="version", version=f"deskrig {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="attach to the current $DISPLAY and serve MCP")
    server_options(serve)
    option(serve, "--display", env="DESKRIG_DISPLAY", help="X display to attach to (default: $DISPLAY)")

    rig = commands.add_parser("rig", help="run a rig: virtual display, window manager, app and MCP server")
    rig_commands = rig.add_subparsers(dest="rig_command", required=True)
    run = rig_commands.add_parser(
        "run",
        help="start a rig around APP and serve MCP until it ends",
        description="Start a rig around APP and serve MCP until it ends. --backend: x11 (Xvfb and a "
        "window manager; also what auto picks) or sway (a headless sway, Xwayland for X11-only apps).",
    )
    server_options(run)
    option(run, "--size", env="DESKRIG_SIZE", metavar="WxH", help="screen size (default 1280x800)")
    option(run, "--wm", env="DESKRIG_WM", help="x11: window manager (default openbox)")
    option(run, "--no-wm", env="DESKRIG_NO_WM", action="store_true", help="x11: run without a window manager")
    option(
        run,
        "--run-as",
        env="DESKRIG_RUN_AS",
        metavar="USER",
        help="sway, as root: run sway and the app as USER (sway refuses root; default: $SUDO_USER, else nobody)",
    )
    option(
        run,
        "--no-a11y",
        env="DESKRIG_NO_A11Y",
        action="store_true",
        help="do not start the accessibility bus",
    )
    option(
        run,
        "--startup-timeout",
        env="DESKRIG_STARTUP_TIMEOUT",
        type=float,
        metavar="SECONDS",
        help="how long each part may take to start (default 30)",
    )
    option(run, "app", env="DESKRIG_APP", nargs=argparse.REMAINDER, help="-- APP [ARGS...]")

    doctor = commands.add_parser("doctor", help="check the display and show backend diagnostics")
    doctor.add_argument("--display", help="X display (default: $DISPLAY)")

    from deskrig.orchestrator.cli import register  # `session` and `orchestrator`; lazy inside

    register(commands)
    from deskrig.viewer.cli import register as register_viewer  # `view` and `export`

    register_viewer(commands)
    return parser


def _listener(transport: Transport) -> contextlib.AbstractContextManager[socket.socket | None]:
    """The bound HTTP socket (None for stdio), claimed before a desktop or rig starts."""
    if transport.kind != "http":
        return contextlib.nullcontext()
    from deskrig.listener import bind_listener

    return contextlib.closing(bind_listener(transport.host, transport.port))


def cmd_serve(invocation: Invocation) -> int:
    from deskrig.desktop import choose_backend, open_desktop
    from deskrig.signals import handling_signals

    args, settings, transport = invocation.args, invocation.settings, invocation.transport
    tokens = resolve_tokens(settings, transport)
    choose_backend(settings.backend, display=args.display)  # no display at all: refused before serving
    stop = threading.Event()

    def build(desktop: Desktop) -> DeskrigServer:
        from deskrig.launcher import SubprocessLauncher
        from deskrig.serving import build_server

        return build_server(
            desktop,
            settings,
            session_bus=os.environ.get("DBUS_SESSION_BUS_ADDRESS"),
            launcher=SubprocessLauncher({"DISPLAY": args.display} if args.display else {}),
        )

    def open_now() -> Desktop:
        return open_desktop(settings.backend, args.display)

    if transport.kind == "stdio":
        from deskrig.serving import serve_stdio_deferred  # opens the desktop after `initialize`

        with handling_signals(lambda signum: stop.set()):
            serve_stdio_deferred(settings.tool_profile, open_now, build, stop)
        return 0

    from deskrig.http import Readiness
    from deskrig.serving import serve

    with _listener(transport) as listener, open_now() as desktop:
        server = build(desktop)
        quick_imports.end()

        def readiness() -> Readiness:
            try:
                desktop.screen_bounds()
                up = True
            except DeskrigError:
                up = False
            return Readiness(ready=up, checks={"display": up})

        with handling_signals(lambda signum: stop.set()):
            serve(server, transport, listener, tokens, readiness, stop)
    return 0


def cmd_rig_run(invocation: Invocation) -> int:
    if not sys.platform.startswith("linux"):  # the rig starts Xvfb or sway, D-Bus and its app under /proc
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            "rig run is Linux-only; use deskrig serve",
            details={"platform": sys.platform},
            remediation="`deskrig serve` drives this desktop with its native backend; a rig runs "
            "on Linux or in the rig image (docker compose up).",
        )
    from deskrig.rig import Rig, RigOptions, run_until_signal

    args, settings, transport = invocation.args, invocation.settings, invocation.transport
    tokens = resolve_tokens(settings, transport)
    app = list(args.app)
    backend = rig_backend(settings.backend, args)
    options = RigOptions(
        backend=backend,
        size=args.size or "1280x800",
        wm=None if args.no_wm or backend != "x11" else args.wm or "openbox",
        app=app,
        a11y=not args.no_a11y,
        startup_timeout=args.startup_timeout or 30.0,
        run_as=args.run_as,
    )
    rig = Rig(options)
    built: Future[tuple[Desktop, DeskrigServer] | None] = Future()
    served = threading.Event()

    def build() -> None:
        """The server, built beside the rig's start-up: importing the MCP and HTTP stacks takes
        about as long as the whole desktop to start, and the server needs only the display and the
        buses, so it is built on them while the app starts. Only the listener's bind (a port in
        use fails before anything starts) comes first."""
        try:
            importlib.import_module("deskrig.http")  # what serve() imports, now rather than after the app
            from deskrig.desktop import open_desktop
            from deskrig.launcher import CallbackLauncher
            from deskrig.serving import build_server

            log.debug("server modules imported (%.0f ms of this thread's CPU)", time.thread_time() * 1000)
            if not rig.wait_desktop():
                built.set_result(None)  # the rig did not start: nothing to serve
                return
            log.debug("desktop up; opening it")
            desktop = open_desktop(backend, rig.display if backend == "x11" else None, env=rig.env)
            log.debug("desktop opened")
            try:
                server = build_server(
                    desktop,
                    settings,
                    session_bus=rig.env.get("DBUS_SESSION_BUS_ADDRESS") if rig.status().a11y_up else None,
                    launcher=CallbackLauncher(
                        lambda argv, env, cwd: rig.launch(argv, env=env, cwd=cwd),
                        rig.launch_environment,
                        rig.account,
                    ),
                    boot_recording=False,  # from when the app is up, as before
                )
            except BaseException:
                desktop.close()
                raise
            log.debug("MCP server built (%.0f ms of this thread's CPU)", time.thread_time() * 1000)
            built.set_result((desktop, server))
        except BaseException as exc:  # raised where the server is served, not lost in this thread
            built.set_exception(exc)

    def serve_rig(rig: Rig, stop: threading.Event, listener: socket.socket | None) -> None:
        from deskrig.http import Readiness
        from deskrig.serving import serve, start_boot_recording

        prepared = built.result()
        assert prepared is not None, "the rig started, so its desktop was up"
        desktop, server = prepared
        served.set()
        quick_imports.end()
        with desktop:

            def readiness() -> Readiness:
                status = rig.status()
                checks = {"display": status.display_up, "app": status.app_up or not app}
                if status.wm is not None:
                    checks["window_manager"] = status.wm_up
                return Readiness(ready=status.ready, checks=checks, details=status.model_dump(mode="json"))

            start_boot_recording(server)
            serve(server, transport, listener, tokens, readiness, stop)

    with _listener(transport) as listener:
        log.debug(
            "starting the rig and building the server (%.0f ms of CPU so far)", time.process_time() * 1000
        )
        builder = threading.Thread(target=build, name="deskrig-build", daemon=True)
        builder.start()
        try:
            return run_until_signal(rig, lambda rig, stop: serve_rig(rig, stop, listener))
        finally:
            quick_imports.end()
            builder.join()  # soon: the rig's start-up is over, and with it the wait for the desktop
            prepared = None if built.exception() is not None else built.result()
            if prepared is not None and not served.is_set():  # the app never came up
                from deskrig.serving import close_server

                close_server(prepared[1])
                prepared[0].close()


def rig_backend(backend: str, args: argparse.Namespace) -> RigBackend:
    """The backend a rig runs: ``auto`` is X11 (the rig makes its own display, so there is
    no environment to pick from); the window-manager flags are X11's and --run-as sway's."""
    if backend == "auto":
        backend = "x11"
    if backend not in get_args(RigBackend):
        raise ConfigError(f"a rig's backend is x11 or sway, not {backend!r} (--backend, DESKRIG_BACKEND)")
    if backend == "sway" and (args.wm or args.no_wm):
        raise ConfigError(
            "sway is the window manager of a sway rig: drop --wm / --no-wm (DESKRIG_WM, DESKRIG_NO_WM)"
        )
    if backend == "x11" and args.run_as:
        raise ConfigError("--run-as (DESKRIG_RUN_AS) is for the sway backend: an X11 rig runs as you")
    return backend  # type: ignore[return-value]


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
    try:
        invocation = prepare(args, os.environ) if args.command in ("serve", "rig") else None
        logging.basicConfig(
            level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        if invocation is not None:
            return cmd_serve(invocation) if args.command == "serve" else cmd_rig_run(invocation)
        if args.command in ("session", "orchestrator", "images", "k8s"):
            from deskrig.orchestrator.cli import run

            return run(args)
        if args.command in ("view", "export"):
            from deskrig.viewer.cli import run as run_viewer

            return run_viewer(args)
        return cmd_doctor(args)
    except DeskrigError as exc:
        return report_cli_error(exc, verbose=getattr(args, "verbose", False))


if __name__ == "__main__":
    sys.exit(main())
