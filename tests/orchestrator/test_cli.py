"""The ``session`` and ``orchestrator`` command lines without Docker: every flag's DESKRIG_*
variable, one-line errors a person can act on, JSON output, ISO-8601 timestamps."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.orchestrator.helpers import deskrig

from deskrig.cli import build_parser
from deskrig.cli_errors import cli_error_line
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.cli_flags import EnvFlag, apply_environment
from deskrig.orchestrator.models import SessionInfo, SessionSpec, SessionState
from deskrig.orchestrator.service import ServiceState
from deskrig.tools import ALL_TOOLS

#: A value each kind of flag accepts, as typed on a command line (and in its variable).
SAMPLES: dict[object, str] = {int: "7", float: "2.5", str: "sample"}


def children(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def subcommands() -> list[tuple[tuple[str, str], argparse.ArgumentParser]]:
    top = children(build_parser())
    return [
        ((name, sub), parser)
        for name in ("session", "orchestrator")
        for sub, parser in children(top[name]).items()
    ]


def positionals(command: tuple[str, str]) -> list[str]:
    return (
        {"stop": ["s1"], "logs": ["s1"], "artifacts": ["s1"]}.get(command[1], [])
        if command[0] == "session"
        else []
    )


@pytest.mark.parametrize(
    ("command", "parser"), subcommands(), ids=lambda v: " ".join(v) if isinstance(v, tuple) else ""
)
def test_every_flag_has_a_variable_with_the_same_effect(
    command: tuple[str, str], parser: argparse.ArgumentParser
) -> None:
    flags: list[EnvFlag] = parser.get_default("env_flags")
    by_dest = {flag.dest: flag for flag in flags}
    help_text = parser.format_help()
    checked = 0
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        flag = by_dest.get(action.dest)
        assert flag is not None, f"{' '.join(command)} {action.option_strings[0]} has no DESKRIG_* variable"
        assert flag.env.startswith("DESKRIG_") and f"${flag.env}" in help_text
        if action.nargs == 0:  # a switch
            typed, env_value = [action.option_strings[-1]], "1"
        elif isinstance(action, argparse._AppendAction):
            typed, env_value = (
                [action.option_strings[-1], "A=1", action.option_strings[-1], "B=2 3"],
                "A=1 'B=2 3'",
            )
        else:
            sample = list(action.choices)[-1] if action.choices else SAMPLES[action.type or str]
            typed, env_value = [action.option_strings[-1], sample], sample
        argv = [*command, *positionals(command)]
        given = build_parser().parse_args([*argv, *typed])
        from_env = build_parser().parse_args(argv)
        apply_environment(from_env, {flag.env: env_value})
        assert getattr(from_env, action.dest) == getattr(given, action.dest) is not None, flag.env
        # The flag wins over its variable.
        apply_environment(given, {flag.env: "0" if action.nargs == 0 else "9"})
        assert getattr(given, action.dest) == getattr(from_env, action.dest)
        checked += 1
    assert checked == len(flags)


def test_a_bad_variable_is_one_clear_error() -> None:
    args = build_parser().parse_args(["orchestrator", "serve"])
    with pytest.raises(DeskrigError) as raised:
        apply_environment(args, {"DESKRIG_MAX_SESSIONS": "many"})
    assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    assert raised.value.message == "$DESKRIG_MAX_SESSIONS='many' is not valid: want a whole number"


@pytest.mark.parametrize(
    ("flag", "variable", "value", "problem"),
    [
        ("--size", "DESKRIG_SESSION_SIZE", "10x", "want WxH such as 1280x800, got '10x'"),
        ("--backend", "DESKRIG_SESSION_BACKEND", "wayland", "Input should be 'x11' or 'sway'"),
    ],
    ids=["size", "backend"],
)
@pytest.mark.parametrize("given_by", ["flag", "variable"])
def test_session_start_with_a_bad_option_says_so_in_one_line(
    tmp_path: Path, given_by: str, flag: str, variable: str, value: str, problem: str
) -> None:
    args, env = ([flag, value], {}) if given_by == "flag" else ([], {variable: value})
    done = deskrig(tmp_path, "session", "start", *args, **env)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"deskrig: INVALID_ARGUMENT: {flag}: {problem}. "
        "Fix the configuration file, DESKRIG_* variable or flag named in the message.\n"
    )
    assert not (tmp_path / "state").exists(), "no service is started for a request that cannot be valid"


def test_orchestrator_status_json_without_a_service(tmp_path: Path) -> None:
    for done in (
        deskrig(tmp_path, "orchestrator", "status", "--json"),
        deskrig(tmp_path, "orchestrator", "status", DESKRIG_JSON="1"),
    ):
        assert done.returncode == 1
        assert json.loads(done.stdout) == {"running": False, "state_dir": str(tmp_path / "state")}


def test_a_missing_service_is_one_line_with_a_command_to_run(tmp_path: Path) -> None:
    done = deskrig(tmp_path, "session", "ls")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("deskrig: RUNTIME_UNAVAILABLE: no orchestrator service is running.")
    assert "deskrig orchestrator serve --background" in done.stderr


@pytest.mark.parametrize("code", list(ErrorCode))
def test_cli_errors_never_give_mcp_tool_advice(code: ErrorCode) -> None:
    line = cli_error_line(DeskrigError(code, "it went wrong\nbadly."))
    assert line.startswith(f"deskrig: {code.value}: it went wrong badly.")
    assert "\n" not in line
    words = set(line.replace("`", " ").replace(",", " ").split())
    assert not words & {tool.name for tool in ALL_TOOLS}, line
    assert "call" not in line.lower().split()


def test_an_explicit_remediation_is_kept() -> None:
    error = DeskrigError(ErrorCode.RIG_FAILED, "rig died", remediation="Run `deskrig session logs s1`.")
    assert cli_error_line(error) == "deskrig: RIG_FAILED: rig died. Run `deskrig session logs s1`."


def test_timestamps_are_iso_8601_utc_and_old_epoch_files_still_read() -> None:
    info = SessionInfo(
        id="s1",
        state=SessionState.READY,
        spec=SessionSpec(),
        created_at=1796078232.5,
        ready_at=1796078233.25,
        artifacts_dir="/tmp/s1",
    )
    record = info.model_dump(mode="json")
    assert (record["created_at"], record["ready_at"]) == (
        "2026-11-30T22:37:12.500Z",
        "2026-11-30T22:37:13.250Z",
    )
    assert SessionInfo.model_validate(record) == info
    # session.json and orchestrator.json as they were written before: epoch floats.
    old = {**record, "created_at": 1796078232.5, "ready_at": 1796078233.25}
    assert SessionInfo.model_validate_json(json.dumps(old)) == info
    state = ServiceState(
        url="http://127.0.0.1:1", token="t", pid=1, orchestrator_id="o1", started_at=1796078232.5
    )
    assert json.loads(state.model_dump_json())["started_at"] == "2026-11-30T22:37:12.500Z"
    assert ServiceState.model_validate_json(state.model_dump_json()).started_at == 1796078232.5


def test_the_parser_leaves_the_orchestrators_models_unbuilt() -> None:
    """Every command builds the whole parser, ``deskrig rig run`` (a container's cold start) too:
    the orchestrator's flags must not load its pydantic models for their choices."""
    code = "import sys, deskrig.cli; deskrig.cli.build_parser(); print(*sorted(sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "deskrig.orchestrator.cli" in loaded
    assert "deskrig.orchestrator.models" not in loaded
