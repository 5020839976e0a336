"""The ``session`` and ``orchestrator`` commands' flags, each settable by a DESKRIG_* variable too."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass


def _boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("want 1/true/yes/on or 0/false/no/off")


def _one_of(names: tuple[str, ...]) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw not in names:
            raise ValueError(f"want one of {', '.join(names)}")
        return raw

    return parse


#: What a variable of each kind must hold, for the error when it does not.
_WANTS: dict[Callable[[str], object], str] = {int: "want a whole number", float: "want a number"}


@dataclass(frozen=True)
class EnvFlag:
    """A flag's DESKRIG_* variable: used when the flag is not given (the flag wins)."""

    dest: str
    env: str
    parse: Callable[[str], object]


class Flags:
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

    def runtime(self) -> None:
        """Where rigs run: the service's runtime (``session start`` starts the service with it)."""
        from typing import get_args

        from deskrig.orchestrator.runtime_names import DEFAULT_RUNTIME, RuntimeName

        names = get_args(RuntimeName)
        action = self.parser.add_argument(
            "--runtime",
            choices=names,
            help=f"where rigs run: {', '.join(names)} (default {DEFAULT_RUNTIME}) [$DESKRIG_RUNTIME]",
        )
        self.env_flags.append(EnvFlag(action.dest, "DESKRIG_RUNTIME", _one_of(names)))

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
