"""What pyproject.toml declares, as the packaging tests read it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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

#: Modules that import an extra's packages as they load, by that extra: the implementations reached
#: only through a door that reports the extra missing (``deskrig.extras.needs_extra``), and the
#: benchmarks of what only that extra drives.
EXTRA_ONLY_MODULES = {
    "deskrig.orchestrator.docker_backend": "orchestrator",
    "deskrig.orchestrator.swarm_backend": "orchestrator",
    "deskrig.bench.images": "orchestrator",
    "deskrig.bench.density": "orchestrator",
    "deskrig.bench.orchestrator": "orchestrator",
    # Loaded by pytest alone (entry point pytest11), which is there then.
    "deskrig.pytest_plugin": "pytest",
    "deskrig.pytest_fixtures": "pytest",
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


def extra_distributions(extra: str) -> set[str]:
    """The distributions ``deskrig[extra]`` installs by name, with those of the extras it names
    (``deskrig[orchestrator]`` in another extra)."""
    names: set[str] = set()
    for requirement in extras()[extra]:
        if requirement.name == "deskrig":
            for included in requirement.extras:
                names |= extra_distributions(included)
        else:
            names.add(canonicalize_name(requirement.name))
    return names
