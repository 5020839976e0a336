"""Every flag of `deskrig serve` and `deskrig rig run` has a DESKRIG_* variable, named in --help,
that does what the flag does. The test walks the parsers, so a new flag without one fails it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from deskrig.cli import build_parser
from deskrig.errors import ConfigError
from deskrig.server_flags import FLAG_ENV, SETTINGS_FLAGS, prepare

COMMANDS = {"serve": ["serve"], "rig run": ["rig", "run"]}
TRANSPORT = {"stdio", "http"}


def command_parser(words: list[str]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def flags_of(words: list[str]) -> list[argparse.Action]:
    return [a for a in command_parser(words)._actions if not isinstance(a, argparse._HelpAction)]


def sample(action: argparse.Action, tmp: Path) -> tuple[list[str], str]:
    """(the flag as given on the command line, the same as its variable's value)."""
    option = action.option_strings[-1] if action.option_strings else None
    if action.dest == "config":
        config = tmp / "deskrig.toml"
        config.write_text('tool_profile = "all"\n')
        return [option or "", str(config)], str(config)
    if action.dest == "app":
        return ["--", "xterm", "-geometry", "10x10"], "xterm -geometry 10x10"
    if isinstance(action, argparse._StoreTrueAction):
        return [option or ""], "yes"
    value = {
        "http": "127.0.0.1:9999",
        "token": "alice=s3cret-a",
        "tokens_file": str(tmp / "tokens"),
        "allowed_host": "rig1:8765",
        "allowed_dir": "/srv/shots",
        "blocked_window": "^Secret",
        "audit_log": "-",
        "record": "/srv/turns",
        "recording_key_file": "/srv/recording.key",
        "header_timeout": "30",
        "body_timeout": "40",
        "display": ":7",
        "size": "640x480",
        "wm": "xfwm4",
        "backend": "x11",
        "run_as": "rigger",
        "pii_detector": "email",
        "pii_pattern": r"order=ORD-\d+",
    }.get(action.dest)
    if value is None:
        if action.choices:
            value = str(list(action.choices)[-1])
        elif action.type in (int, float):
            value = "20000"
        else:
            raise AssertionError(f"no sample value for {option}: add one to this test")
    return [option or "", value], value


def effect(words: list[str], argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """What the command line means after DESKRIG_* variables: settings, transport, options."""
    tail = [i for i, word in enumerate(argv) if word == "--"]
    head, rest = (argv[: tail[0]], argv[tail[0] :]) if tail else (argv, [])
    invocation = prepare(build_parser().parse_args([*words, *head, *rest]), env)
    options = {
        dest: getattr(invocation.args, dest)
        for dest in FLAG_ENV
        if dest not in SETTINGS_FLAGS and dest not in TRANSPORT and hasattr(invocation.args, dest)
    }
    return {"settings": invocation.settings.model_dump(), "transport": invocation.transport, **options}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_flag_has_a_working_documented_variable(command: str, tmp_path: Path) -> None:
    words = COMMANDS[command]
    checked = []
    for action in flags_of(words):
        name = action.option_strings[-1] if action.option_strings else action.dest
        var = FLAG_ENV.get(action.dest)
        assert var is not None and var.startswith("DESKRIG_"), f"{command} {name} has no DESKRIG_* variable"
        assert f"[env {var}]" in (action.help or ""), f"{command} {name}: --help does not name {var}"
        flag, value = sample(action, tmp_path)
        base = [] if action.dest in TRANSPORT else ["--http", "127.0.0.1:9"]
        by_flag = effect(words, [*base, *flag], {})
        by_env = effect(words, base, {var: value})
        assert by_flag == by_env, f"{command}: {var}={value!r} does not do what {' '.join(flag)} does"
        if action.dest not in TRANSPORT:
            assert by_env != effect(words, base, {}), f"{command}: {var} changes nothing"
        checked.append(name)
    assert {"--wm", "--startup-timeout", "app"} <= set(checked) or command == "serve"
    assert {"--token", "--tokens-file", "--verbose", "--config"} <= set(checked)


def test_flags_win_over_variables_and_bad_values_are_refused() -> None:
    words = COMMANDS["rig run"]
    env = {"DESKRIG_WM": "xfwm4", "DESKRIG_TOKEN": "env-token", "DESKRIG_HTTP": "127.0.0.1:1"}
    chosen = effect(words, ["--wm", "openbox", "--token", "flag-token", "--stdio"], env)
    assert chosen["wm"] == "openbox" and chosen["settings"]["token"] == ["flag-token"]
    assert chosen["transport"].kind == "stdio"
    for bad, message in [
        ({"DESKRIG_NO_AUTH": "maybe"}, "DESKRIG_NO_AUTH='maybe' is not a switch"),
        ({"DESKRIG_STDIO": "1", "DESKRIG_HTTP": "127.0.0.1:1"}, "give one transport"),
        ({}, "no transport"),
        ({"DESKRIG_STARTUP_TIMEOUT": "soon", "DESKRIG_STDIO": "1"}, "not a number of seconds"),
    ]:
        with pytest.raises(ConfigError, match=message):
            effect(words, [], bad)


def test_rig_cli_errors_are_one_line_for_a_person(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad flag is one stderr line with a shell hint, not the MCP advice ("call again")."""
    from deskrig.cli import main

    assert main(["rig", "run", "--stdio", "--size", "10x", "--", "xterm"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("deskrig: INVALID_ARGUMENT: invalid screen size '10x'")
    assert "call" not in lines[0].lower().split() and "--help" in lines[0]
