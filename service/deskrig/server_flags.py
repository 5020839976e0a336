"""The flags of ``serve`` and ``rig run``, each with its ``DESKRIG_*`` variable, and how a command
line and the environment become one :class:`Invocation` (flags over variables over the config file).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deskrig.config import ENV_KEYS, Settings, load_settings
from deskrig.errors import ConfigError
from deskrig.transport import Transport

#: The ``DESKRIG_*`` variable of every ``serve`` / ``rig run`` flag, by argparse dest. Those backed
#: by a setting (config.ENV_KEYS) are read by load_settings; the others by :func:`apply_env`.
FLAG_ENV: dict[str, str] = {}
#: Flag dests that are settings, and the settings key each overrides (dotted: security.*).
SETTINGS_FLAGS: dict[str, str] = {}
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def option(
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


def server_options(parser: argparse.ArgumentParser) -> None:
    transport = parser.add_mutually_exclusive_group()
    option(transport, "--stdio", env="DESKRIG_STDIO", action="store_true", help="serve MCP on stdin/stdout")
    option(
        transport,
        "--http",
        env="DESKRIG_HTTP",
        metavar="HOST:PORT",
        help="serve MCP over Streamable HTTP at /mcp",
    )
    option(parser, "--config", env="DESKRIG_CONFIG", metavar="FILE", help="TOML settings file")
    option(
        parser,
        "--token",
        env="DESKRIG_TOKEN",
        setting="token",
        action="append",
        metavar="[NAME=]SECRET",
        help="bearer token for HTTP; NAME=SECRET names the identity it authenticates (repeatable; "
        "default: generated for the identity 'default')",
    )
    option(
        parser,
        "--tokens-file",
        env="DESKRIG_TOKENS_FILE",
        setting="tokens_file",
        metavar="FILE",
        help="more tokens, one NAME=SECRET per line (mode 600)",
    )
    option(
        parser,
        "--no-auth",
        env="DESKRIG_NO_AUTH",
        action="store_true",
        help="no token; only on a loopback bind",
    )
    option(
        parser,
        "--allowed-host",
        env="DESKRIG_ALLOWED_HOSTS",
        setting="allowed_hosts",
        action="append",
        metavar="HOST[:PORT]",
        help="extra Host header to accept (repeatable; env: comma-separated)",
    )
    option(
        parser,
        "--header-timeout",
        env="DESKRIG_HEADER_TIMEOUT",
        setting="header_timeout",
        type=float,
        metavar="SECONDS",
        help="close an HTTP connection whose request headers are not complete by then (default 10)",
    )
    option(
        parser,
        "--body-timeout",
        env="DESKRIG_BODY_TIMEOUT",
        setting="body_timeout",
        type=float,
        metavar="SECONDS",
        help="close an HTTP connection whose request body stalls that long, no byte of it arriving (default 10)",
    )
    option(
        parser,
        "--tool-profile",
        env="DESKRIG_TOOL_PROFILE",
        setting="tool_profile",
        choices=["default", "acs", "all"],
        help="which tool set to expose",
    )
    option(
        parser,
        "--backend",
        env="DESKRIG_BACKEND",
        setting="backend",
        help="desktop backend: auto, x11, sway (attach to $SWAYSOCK and $WAYLAND_DISPLAY), macos",
    )
    option(
        parser,
        "--allowed-dir",
        env="DESKRIG_ALLOWED_DIRS",
        setting="security.allowed_directories",
        action="append",
        metavar="DIR",
        help="allowed output directory (repeatable; env: ':'-separated)",
    )
    option(
        parser,
        "--max-captures-per-minute",
        env="DESKRIG_MAX_CAPTURES_PER_MINUTE",
        setting="security.max_captures_per_minute",
        type=int,
        metavar="N",
        help="capture rate limit per client identity",
    )
    option(
        parser,
        "--blocked-window",
        env="DESKRIG_BLOCKED_WINDOWS",
        setting="security.blocked_window_patterns",
        action="append",
        metavar="REGEX",
        help="hide windows whose title matches (repeatable; env: comma-separated)",
    )
    option(
        parser,
        "--audit-log",
        env="DESKRIG_AUDIT_LOG",
        setting="security.audit_log",
        metavar="FILE",
        help="audit log file, or - for stderr",
    )
    pii_options(parser)
    option(
        parser,
        "--max-inline-bytes",
        env="DESKRIG_MAX_INLINE_BYTES",
        setting="max_inline_bytes",
        type=int,
        metavar="N",
        help="largest inline image (default 1 MiB)",
    )
    option(
        parser,
        "--record",
        env="DESKRIG_RECORD",
        setting="record_dir",
        metavar="DIR",
        help="record every client's actions as turn folders in DIR from start-up",
    )
    option(
        parser,
        "--record-video",
        env="DESKRIG_RECORD_VIDEO",
        setting="record_video",
        action="store_true",
        help="with --record: also DIR/recording.mp4",
    )
    option(
        parser,
        "--recording-idle-timeout",
        env="DESKRIG_RECORDING_IDLE_TIMEOUT",
        setting="recording_idle_timeout",
        type=float,
        metavar="SECONDS",
        help="end a client's recording after this long without an action from it (default 600; 0: never)",
    )
    option(
        parser,
        "--recording-key-file",
        env="DESKRIG_RECORDING_KEY_FILE",
        setting="recording_key_file",
        metavar="FILE",
        help="key that signs recorded turns; rigs sharing it replay each other's recordings "
        "(default: a random key per rig)",
    )
    option(
        parser,
        "--input-lock-timeout",
        env="DESKRIG_INPUT_LOCK_TIMEOUT",
        setting="input_lock_timeout",
        type=float,
        metavar="SECONDS",
        help="how long an input call waits for another client's input before BUSY (default 10)",
    )
    option(
        parser,
        "--held-input-idle-timeout",
        env="DESKRIG_HELD_INPUT_IDLE_TIMEOUT",
        setting="held_input_idle_timeout",
        type=float,
        metavar="SECONDS",
        help="release the keys and buttons a stateless client holds after this long without a call "
        "from it (default 120; 0: never)",
    )
    option(
        parser,
        "--a11y-events-idle-timeout",
        env="DESKRIG_A11Y_EVENTS_IDLE_TIMEOUT",
        setting="a11y_events_idle_timeout",
        type=float,
        metavar="SECONDS",
        help="stop listening to the apps' accessibility events this long after the last tree read "
        "(the next read fetches the tree whole; default 60; 0: never)",
    )
    option(
        parser,
        "--max-file-bytes",
        env="DESKRIG_MAX_FILE_BYTES",
        setting="max_file_bytes",
        type=int,
        metavar="N",
        help="largest file upload_file/download_file move (default 25 MiB)",
    )
    option(
        parser,
        "--allow-commands",
        env="DESKRIG_ALLOW_COMMANDS",
        setting="allow_commands",
        action="store_true",
        help="enable run_command: any token holder may then run programs as the rig's user",
    )
    option(
        parser, "-v", "--verbose", env="DESKRIG_VERBOSE", action="store_true", help="debug logging on stderr"
    )


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


def pii_options(parser: argparse.ArgumentParser) -> None:
    """The PII masking policy's flags (``deskrig.privacy``)."""
    option(
        parser,
        "--pii-masking",
        env="DESKRIG_PII_MASKING",
        setting="security.pii_masking.enabled",
        choices=("off", "on"),
        help="mask personal data in every capture, recording and accessibility text (default off)",
    )
    option(
        parser,
        "--pii-detector",
        env="DESKRIG_PII_DETECTORS",
        setting="security.pii_masking.detectors",
        action="append",
        metavar="NAME",
        help="a built-in detector to use: email, phone, card, iban (repeatable; default all; env: comma-separated)",
    )
    option(
        parser,
        "--pii-pattern",
        env="DESKRIG_PII_PATTERNS",
        setting="security.pii_masking.custom_patterns",
        action="append",
        metavar="NAME=REGEX",
        help="also mask what REGEX matches, counted as NAME (repeatable; env: pairs separated by ';;')",
    )
    option(
        parser,
        "--pii-fill",
        env="DESKRIG_PII_FILL",
        setting="security.pii_masking.fill",
        choices=("black", "blur"),
        help="how masked boxes are drawn (default black)",
    )


def _settings(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    overrides: dict[str, Any] = {"security": {}}
    for dest, key in SETTINGS_FLAGS.items():
        value = getattr(args, dest)
        if value is False:
            value = None  # a switch not given does not override
        *sections, name = key.split(".")
        layer = overrides
        for section in sections:
            layer = layer.setdefault(section, {})
        layer[name] = value
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
