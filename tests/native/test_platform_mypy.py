"""``mypy --platform``: the package type-checks as it would on each native platform, with that
platform's ``sys.platform`` branches taken (pyobjc and pywin32 ship no type information, so their
modules are Any: pyproject's [[tool.mypy.overrides]]). Runs on every OS, from the checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["darwin"])
def test_the_package_type_checks_for_the_platform(platform: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--platform", platform],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert result.returncode == 0, result.stdout + result.stderr
