"""The official MCP conformance suite's server scenarios that apply to deskrig (tools, resources,
logging; not the suite's fixed test:// resources, prompts or sampling)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.server.rigproc import NODE, ROOT, RigProcess

BIN = ROOT / ".tools" / "conformance" / "node_modules" / ".bin"
SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "logging-set-level",
    "resources-list",
]


@pytest.fixture(scope="module")
def open_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RigProcess]:
    rig = RigProcess(app=["xterm"], token=None).start(tmp_path_factory.mktemp("conformance"))
    yield rig
    rig.stop()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario(open_rig: RigProcess, scenario: str, tmp_path: Path) -> None:
    assert (BIN / "conformance").exists(), "scripts/setup installs the conformance suite"
    result = subprocess.run(
        [
            str(NODE),
            str(BIN / "conformance"),
            "server",
            "--url",
            open_rig.url,
            "--scenario",
            scenario,
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert " 0 failed" in output and "Passed: " in output, output
