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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deskrig import __version__
from deskrig.cli_errors import report_cli_error
from deskrig.config import ENV_KEYS, Settings, load_settings
from deskrig.errors import ConfigError, DeskrigError
from deskrig.transport import Transport, resolve_tokens

#: The ``DESKRIG_*`` variable of every ``serve`` / ``rig run`` flag, by argparse dest. Those backed
#: by a setting (config.ENV_KEYS) are read by load_settings; the others by :func:`apply_env`.
FLAG_ENV: dict[str, str] = {}
#: Flag dests that are settings, and the settings key each overrides (dotted: security.*).
SETTINGS_FLAGS: dict[str, str] = {}
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def _option(
    parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup,
    *names: str,
    env: str,
    setting: str | None = None,
    **kwargs: Any,
) -> None:
    """Add a flag whose ``DESKRIG_*`` equivalent is ``env`` (named in --help)."""
    action = parser.add_argument(*names, **kwargs)
    action.help = f"{action.help or ''} [env {env}]".strip()
    FLAG_ENV[action.dest] = env
    if setting is not None:
        SETTINGS_FLAGS[action.dest] = setting
        if env not in ENV_KEYS:
            raise AssertionError(f"{env} is not a settings variable")


def _server_options(parser: argparse.ArgumentParser) -> None:
    transport = parser.add_mutually_exclusive_group()
    _option(transport, "--stdio", env="DESKRIG_STDIO", action="store_true", help="serve MCP on stdin/stdout")
    _option(
        transport,
        "--http",
        env="DESKRIG_HTTP",
        metavar="HOST:PORT",
        help="serve MCP over Streamable HTTP at /mcp",
    )
    _option(parser, "--config", env="DESKRIG_CONFIG", metavar="FILE", help="TOML settings file")
    _option(
        parser,
        "--token",
        env="DESKRIG_TOKEN",
        setting="token",
        action="append",
        metavar="[NAME=]SECRET",
        help="bearer token for HTTP; NAME=SECRET names the identity it authenticates (repeatable; "
        "default: generated for the identity 'default')",
    )
    _option(
        parser,
        "--tokens-file",
        env="DESKRIG_TOKENS_FILE",
        setting="tokens_file",
        metavar="FILE",
        help="more tokens, one NAME=SECRET per line (mode 600)",
    )
    _option(
        parser,
        "--no-auth",
        env="DESKRIG_NO_AUTH",
        action="store_true",
        help="no token; only on a loopback bind",
    )
    _option(
        parser,
        "--allowed-host",
        env="DESKRIG_ALLOWED_HOSTS",
        setting="allowed_hosts",
        action="append",
        metavar="HOST[:PORT]",
        help="extra Host header to accept (repeatable; env: comma-separated)",
    )
    _option(
        parser,
        "--header-timeout",
        env="DESKRIG_HEADER_TIMEOUT",
        setting="header_timeout",
        type=float,
        metavar="SECONDS",
        help="close an HTTP connection whose request headers are not complete by then (default 10)",
    )
    _option(
        parser,
        "--tool-profile",
        env="DESKRIG_TOOL_PROFILE",
        setting="tool_profile",
        choices=["default", "acs", "all"],
        help="which tool set to expose",
    )
    _option(
        parser,
        "--backend",
        env="DESKRIG_BACKEND",
        setting="backend",
        help="desktop backend: auto, x11, sway (attach to $SWAYSOCK and $WAYLAND_DISPLAY)",
    )
    _option(
        parser,
        "--allowed-dir",
        env="DESKRIG_ALLOWED_DIRS",
        setting="security.allowed_directories",
        action="append",
        metavar="DIR",
        help="allowed output directory (repeatable; env: ':'-separated)",
    )
    _option(
        parser,
        "--max-captures-per-minute",
        env="DESKRIG_MAX_CAPTURES_PER_MINUTE",
        setting="security.max_captures_per_minute",
        type=int,
        metavar="N",
        help="capture rate limit per client identity",
    )
    _option(
        parser,
        "--blocked-window",
        env="DESKRIG_BLOCKED_WINDOWS",
        setting="security.blocked_window_patterns",
        action="append",
        metavar="REGEX",
        help="hide windows whose title matches (repeatable; env: comma-separated)",
    )
    _option(
        parser,
        "--audit-log",
        env="DESKRIG_AUDIT_LOG",
        setting="security.audit_log",
        metavar="FILE",
        help="audit log file, or - for stderr",
    )
    _option(
        parser,
        "--max-inline-bytes",
        env="DESKRIG_MAX_INLINE_BYTES",
        setting="max_inline_bytes",
        type=int,
        metavar="N",
        help="largest inline image (default 1 MiB)",
    )
    _option(
        parser,
        "--record",
        env="DESKRIG_RECORD",
        setting="record_dir",
        metavar="DIR",
        help="record every client's actions as turn folders in DIR from start-up",
    )
    _option(
        parser,
        "--record-video",
        env="DESKRIG_RECORD_VIDEO",
        setting="record_video",
        action="store_true",
        help="with --record: also DIR/recording.mp4",
    )
    _option(
        parser,
        "--recording-idle-timeout",
        env="DESKRIG_RECORDING_IDLE_TIMEOUT",
        setting="recording_idle_timeout",
        type=float,
        metavar="SECONDS",
        help="end a client's recording after this long without an action from it (default 600; 0: never)",
    )
    _option(
        parser,
        "--recording-key-file",
        env="DESKRIG_RECORDING_KEY_FILE",
        setting="recording_key_file",
        metavar="FILE",
        help="key that signs recorded turns; rigs sharing it replay each other's recordings "
        "(default: a random key per rig)",
    )
    _option(
        parser,
        "--input-lock-timeout",
        env="DESKRIG_INPUT_LOCK_TIMEOUT",
        setting="input_lock_timeout",
        type=float,
        metavar="SECONDS",
        help="how long an input call waits for another client's input before BUSY (default 10)",
    )
    _option(
        parser, "-v", "--verbose", env="DESKRIG_VERBOSE", action="store_true", help="debug logging on stderr"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deskrig", description="A headless GUI test rig for AI agents.")
    parser.add_argument("--version", action="version", version=f"deskrig {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="attach to the current $DISPLAY and serve MCP")
    _server_options(serve)
    _option(serve, "--display", env="DESKRIG_DISPLAY", help="X display to attach to (default: $DISPLAY)")

    rig = commands.add_parser("rig", help="run a rig: virtual display, window manager, app and MCP server")
    rig_commands = rig.add_subparsers(dest="rig_command", required=True)
    run = rig_commands.add_parser("run", help="start a rig around APP and serve MCP until it ends")
    _server_options(run)
    _option(run, "--size", env="DESKRIG_SIZE", metavar="WxH", help="screen size (default 1280x800)")
    _option(run, "--wm", env="DESKRIG_WM", help="window manager (default openbox)")
    _option(run, "--no-wm", env="DESKRIG_NO_WM", action="store_true", help="run without a window manager")
    _option(
        run,
        "--no-a11y",
        env="DESKRIG_NO_A11Y",
        action="store_true",
        help="do not start the accessibility bus",
    )
    _option(
        run,
        "--startup-timeout",
        env="DESKRIG_STARTUP_TIMEOUT",
        type=float,
        metavar="SECONDS",
        help="how long each part may take to start (default 30)",
    )
    _option(run, "app", env="DESKRIG_APP", nargs=argparse.REMAINDER, help="-- APP [ARGS...]")

    doctor = commands.add_parser("doctor", help="check the display and show backend diagnostics")
    doctor.add_argument("--display", help="X display (default: $DISPLAY)")

    from deskrig.orchestrator.cli import register  # `session` and `orchestrator`; lazy inside

    register(commands)
    return parser


def _env_switch(var: str, raw: str) -> bool:
    word = raw.strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise ConfigError(f"{var}={raw!r} is not a switch: use 1/true/yes/on or 0/false/no/off")


def apply_env(args: argparse.Namespace, env: Mapping[str, str]) -> None:
    """Fill flags that were not given from their ``DESKRIG_*`` variables (settings excluded:
    load_settings layers those between the config file and the flags)."""
    if getattr(args, "app", None) and args.app[0] == "--":
        args.app = args.app[1:]
    transport_given = bool(args.stdio or args.http)  # a transport flag beats both variables
    for dest, var in FLAG_ENV.items():
        raw = env.get(var)
        if dest in SETTINGS_FLAGS or not hasattr(args, dest) or raw is None or raw == "":
            continue
        if dest in ("stdio", "http") and transport_given:
            continue
        given = getattr(args, dest)
        if given not in (None, False, []):
            continue
        if isinstance(given, bool):
            setattr(args, dest, _env_switch(var, raw))
        elif dest == "app":
            args.app = shlex.split(raw)
        elif dest == "startup_timeout":
            try:
                args.startup_timeout = float(raw)
            except ValueError:
                raise ConfigError(f"{var}={raw!r} is not a number of seconds") from None
        else:
            setattr(args, dest, raw)
    if args.stdio and args.http:
        raise ConfigError("give one transport: --stdio (DESKRIG_STDIO) or --http (DESKRIG_HTTP), not both")
    if not args.stdio and not args.http:
        raise ConfigError(
            "no transport: give --stdio or --http HOST:PORT (or DESKRIG_STDIO=1 / DESKRIG_HTTP)"
        )


def _settings(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    overrides: dict[str, Any] = {"security": {}}
    for dest, key in SETTINGS_FLAGS.items():
        value = getattr(args, dest)
        if value is False:
            value = None  # a switch not given does not override
        section, _, name = key.rpartition(".")
        (overrides[section] if section else overrides)[name] = value
    return load_settings(args.config, env, overrides)


@dataclass(frozen=True)
class Invocation:
    """A ``serve`` or ``rig run`` command line with its ``DESKRIG_*`` variables applied."""

    args: argparse.Namespace
    settings: Settings
    transport: Transport


def prepare(args: argparse.Namespace, env: Mapping[str, str]) -> Invocation:
    apply_env(args, env)
    settings = _settings(args, env)
    if args.stdio:
        transport = Transport("stdio")
    else:
        transport = Transport.parse_http(
            args.http, no_auth=args.no_auth, allowed_hosts=settings.allowed_hosts
        )
    return Invocation(args, settings, transport)


def _listener(transport: Transport) -> contextlib.AbstractContextManager[socket.socket | None]:
    """The bound HTTP socket (None for stdio), claimed before a desktop or rig starts."""
    if transport.kind != "http":
        return contextlib.nullcontext()
    from deskrig.guard import bind_listener  # the HTTP stack: not imported for stdio

    return contextlib.closing(bind_listener(transport.host, transport.port))


def cmd_serve(invocation: Invocation) -> int:
    from deskrig.desktop import open_desktop
    from deskrig.http import Readiness
    from deskrig.launcher import SubprocessLauncher
    from deskrig.serving import build_server, serve
    from deskrig.signals import handling_signals

    args, settings, transport = invocation.args, invocation.settings, invocation.transport
    tokens = resolve_tokens(settings, transport)

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
        with handling_signals(lambda signum: stop.set()):
            serve(server, transport, listener, tokens, readiness, stop)
    return 0


def cmd_rig_run(invocation: Invocation) -> int:
    from deskrig.rig import Rig, RigOptions, run_until_signal

    args, settings, transport = invocation.args, invocation.settings, invocation.transport
    tokens = resolve_tokens(settings, transport)
    # Importing the MCP and HTTP stacks takes longer than starting the whole desktop (about 1.5 s
    # against 1.3 s): do it while the display, window manager, buses and app start.
    importer = threading.Thread(target=importlib.import_module, args=("deskrig.serving",), daemon=True)
    importer.start()
    app = list(args.app)
    options = RigOptions(
        size=args.size or "1280x800",
        wm=None if args.no_wm else args.wm or "openbox",
        app=app,
        a11y=not args.no_a11y,
        startup_timeout=args.startup_timeout or 30.0,
    )
    rig = Rig(options)

    def serve_rig(rig: Rig, stop: threading.Event, listener: socket.socket | None) -> None:
        importer.join()
        from deskrig.desktop import open_desktop
        from deskrig.http import Readiness
        from deskrig.launcher import CallbackLauncher
        from deskrig.serving import build_server, serve

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

            serve(server, transport, listener, tokens, readiness, stop)

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
    try:
        invocation = prepare(args, os.environ) if args.command in ("serve", "rig") else None
        logging.basicConfig(
            level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        if invocation is not None:
            return cmd_serve(invocation) if args.command == "serve" else cmd_rig_run(invocation)
        if args.command in ("session", "orchestrator"):
            from deskrig.orchestrator.cli import run

            return run(args)
        return cmd_doctor(args)
    except DeskrigError as exc:
        return report_cli_error(exc, verbose=getattr(args, "verbose", False))

if __name__ == "__main__":
    sys.exit(main())
