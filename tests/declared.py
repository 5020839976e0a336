"""What pyproject.toml declares, as the packaging tests read it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
#: Modules that call one operating system's own libraries (installed there only, by their
#: environment markers, or asserting their platform on import), by the ``sys.platform`` they need.
PLATFORM_MODULES = {
    "deskrig.desktop.macos_quartz": "darwin",
    "deskrig.desktop.macos_ax_native": "darwin",
    "deskrig.desktop.windows": "win32",
    "deskrig.desktop.windows_api": "win32",
    "deskrig.desktop.windows_clipboard": "win32",
    "deskrig.desktop.windows_input": "win32",
    "deskrig.a11y.windows_uia_native": "win32",
}


def project_table() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def dependencies() -> list[Requirement]:
    """``[project].dependencies``: what ``pip install deskrig`` brings."""
    return [Requirement(spec) for spec in project_table()["dependencies"]]


def extras() -> dict[str, list[Requirement]]:
    """``[project.optional-dependencies]`` by extra (``deskrig[kubernetes]``, ``deskrig[dev]``)."""
    table = project_table()["optional-dependencies"]
    return {extra: [Requirement(spec) for spec in specs] for extra, specs in table.items()}
