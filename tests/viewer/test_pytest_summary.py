"""The pytest plugin names a failed test's trajectory report in its terminal summary.

The user's pytest run is real (a subprocess with the installed plugin); its orchestrator is a
stand-in whose "rig" is the recording made by this package's real rig, so no Docker is needed
(tests/orchestrator/test_plugin.py checks the same with real containers).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.viewer.conftest import RecordedSession

#: conftest.py of the user's run: the plugin's own RigPool over an orchestrator that hands out
#: the recording in $RECORDING as each rig's artifacts.
STAND_IN = """
import os
import time
from pathlib import Path

import pytest

from deskrig.orchestrator.models import SessionInfo
from deskrig.pytest_fixtures import PluginOptions, RigPool


class RecordedOrchestrator:
    def start(self, spec):
        return SessionInfo(id="s1", state="ready", spec=spec, created_at=time.time(),
                           mcp_url="http://127.0.0.1:9/mcp", token="t", artifacts_dir=os.environ["RECORDING"])

    def stop(self, session_id):
        pass


@pytest.fixture(scope="session")
def deskrig_orchestrator(pytestconfig):
    pool = RigPool(PluginOptions.from_config(pytestconfig), RecordedOrchestrator(), pytestconfig)
    yield pool
    pool.close()
"""

USER_TESTS = """
def test_passes(deskrig_rig):
    pass


def test_fails(deskrig_rig):
    assert False, "deliberately"
"""


def test_a_failed_test_names_its_html_report(recorded: RecordedSession, tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    shutil.copytree(recorded.folder, artifacts)
    (tmp_path / "conftest.py").write_text(STAND_IN)
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--deskrig-keep", "test_user.py"],
        cwd=tmp_path,
        env={**os.environ, "RECORDING": str(artifacts)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    summary = run.stdout.split("deskrig artifacts")[-1]
    report = artifacts / "report.html"
    assert f"test_user.py::test_fails: {artifacts}\n  report: {report}\n" in summary, summary
    assert "test_passes" not in summary
    page = report.read_text("utf-8")
    assert '"turn-00004"' in page and '"ELEMENT_NOT_FOUND"' in page
