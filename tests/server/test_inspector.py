"""The official MCP Inspector (2.x, a strict client: it validates structured content against each
tool's output schema) drives real rigs over stdio and HTTP through its CLI mode."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.server.conftest import GreenRig
from tests.server.helpers import undescribed
from tests.server.rigproc import DESKRIG, NODE, ROOT, RigProcess

INSPECTOR = ROOT / ".tools" / "inspector" / "node_modules" / ".bin" / "inspector"
#: The Inspector CLI's exit status when the tool result has isError.
TOOL_IS_ERROR = 5


def run_inspector(tmp: Path, target: list[str], *method: str) -> tuple[int, dict[str, Any], str]:
    """One Inspector CLI call: (exit status, the result as it printed it, stderr)."""
    assert INSPECTOR.exists(), "scripts/setup installs the MCP Inspector"
    argv = [str(NODE), str(INSPECTOR), "--cli", "--format", "json", *method, *target]
    # Its catalog and client config go to HOME.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp)}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)
    printed = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, printed.get("result", printed), done.stderr


def inspect(
    tmp: Path, target: list[str], tool: str, arguments: dict[str, Any]
) -> tuple[int, dict[str, Any], str]:
    """Call one tool through the Inspector CLI."""
    call = ["--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments)]
    return run_inspector(tmp, target, *call)


def http_target(rig: RigProcess) -> list[str]:
    return ["--server-url", rig.url, "--transport", "http", "--header", f"Authorization: Bearer {rig.token}"]


def stdio_target(*extra: str) -> list[str]:
    return ["--", *DESKRIG, "rig", "run", "--stdio", *extra, "--", "xterm"]


def assert_structured_error(status: int, result: dict[str, Any], stderr: str) -> dict[str, Any]:
    """The Inspector got the error result whole: isError and the deskrig error JSON in its text."""
    assert status == TOOL_IS_ERROR, (result, stderr)
    assert result["isError"] is True, result
    (block,) = result["content"]
    return json.loads(block["text"])["error"]  # type: ignore[no-any-return]


def test_an_error_reaches_the_inspector_over_stdio(tmp_path: Path) -> None:
    error = assert_structured_error(*inspect(tmp_path, stdio_target(), "press_key", {"key": "Retrun"}))
    assert error["code"] == "INVALID_ARGUMENT"
    assert error["details"]["suggestions"] == ["Return"]
    assert error["remediation"]


def test_a_success_passes_the_inspector_over_stdio(tmp_path: Path) -> None:
    status, result, stderr = inspect(tmp_path, stdio_target(), "press_key", {"key": "Return"})
    assert status == 0, (result, stderr)
    assert result["structuredContent"]["effect"] == "unverifiable"


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("press_key", {"key": "Retrun"}, "INVALID_ARGUMENT"),
        ("screenshot_screen", {"display_id": 7}, "DISPLAY_NOT_FOUND"),
        ("click", {"x": 1}, "INVALID_ARGUMENT"),
        ("screenshot_window", {"window_title": "no such window"}, "WINDOW_NOT_FOUND"),
    ],
)
def test_errors_reach_the_inspector_over_http(
    green_rig: GreenRig, tmp_path: Path, tool: str, arguments: dict[str, Any], code: str
) -> None:
    error = assert_structured_error(*inspect(tmp_path, http_target(green_rig.rig), tool, arguments))
    assert error["code"] == code and error["message"] and error["remediation"]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("list_windows", {}),
        ("list_displays", {}),
        ("screenshot_region", {"x": 0, "y": 0, "width": 16, "height": 16}),
        ("move_cursor", {"x": 5, "y": 5}),
        ("get_recording_state", {}),
    ],
)
def test_successes_pass_the_inspector_over_http(
    green_rig: GreenRig, tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    status, result, stderr = inspect(tmp_path, http_target(green_rig.rig), tool, arguments)
    assert status == 0, (result, stderr)
    assert result["isError"] is False and result["structuredContent"], result


def test_acs_error_envelope_is_valid_structured_content(tmp_path: Path) -> None:
    status, result, stderr = inspect(
        tmp_path,
        stdio_target("--tool-profile", "acs"),
        "screenshot_capture_region",
        {"x": 0, "y": 0, "width": 0, "height": 5},
    )
    assert status == TOOL_IS_ERROR, (result, stderr)
    envelope = result["structuredContent"]
    assert envelope["status"] == "error" and envelope["error"]["code"] == "INVALID_REGION"
    assert json.loads(result["content"][0]["text"]) == envelope


@pytest.mark.parametrize("profile", ["default", "acs"])
def test_tool_schemas_are_portable_and_described(tmp_path: Path, profile: str) -> None:
    # --strict: the Inspector's schema portability lint fails the run on an error-severity finding.
    status, result, stderr = run_inspector(
        tmp_path, stdio_target("--tool-profile", profile), "--method", "tools/list", "--strict"
    )
    assert status == 0, stderr
    tools = result["tools"]
    assert tools
    assert [p for tool in tools for p in undescribed(tool["inputSchema"], tool["name"])] == []
