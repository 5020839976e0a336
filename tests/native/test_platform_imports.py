"""Each native platform's ``pip install deskrig`` brings what ``deskrig serve`` imports there.

Simulated on any OS: in a fresh interpreter, the modules of every distribution pyproject.toml's
environment markers leave out on that platform are made unimportable, then every module of the
package is imported but for the Linux-only ones (the rig runner, the benchmarks, the X11 and Sway
backends) and other platforms' native modules (tests/declared.py: PLATFORM_MODULES).
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest
from tests.declared import PLATFORM_MODULES, dependencies

#: What runs on Linux only, and why.
LINUX_ONLY = {
    "deskrig.rig": "the rig runner starts Xvfb or sway (`deskrig rig run` is Linux-only)",
    "deskrig.bench": "the benchmarks run rigs",
    "deskrig.desktop.x11": "X11",
    "deskrig.desktop.sway": "Wayland",
}
IMPORT_ALL_BUT = """
import importlib, pkgutil, sys, deskrig
blocked, skipped = sys.argv[1].split(","), tuple(sys.argv[2].split(","))
for name in blocked:
    sys.modules[name] = None  # import fails, as for a package that is not installed
failed = []
for info in pkgutil.walk_packages(deskrig.__path__, "deskrig."):
    if info.name.endswith(".__main__") or info.name.startswith(skipped):
        continue
    try:
        importlib.import_module(info.name)
    except ImportError as exc:
        failed.append(f"{info.name}: {exc}")
print("\\n".join(failed))
"""


def absent_on(platform: str) -> set[str]:
    """The dependencies whose environment markers leave them out on ``platform``."""
    return {
        r.name.lower()
        for r in dependencies()
        if r.marker is not None and not r.marker.evaluate({"sys_platform": platform})
    }


def modules_of(distributions: set[str]) -> list[str]:
    """The top-level modules those distributions installed here (none where they are not)."""
    installed = importlib.metadata.packages_distributions()
    return sorted(
        module for module, dists in installed.items() if any(d.lower() in distributions for d in dists)
    )


@pytest.mark.parametrize("platform", ["darwin"])
def test_everything_serve_needs_imports_with_only_the_platforms_dependencies(platform: str) -> None:
    absent = absent_on(platform)
    assert {"python-xlib", "i3ipc", "pywayland"} <= absent
    blocked = modules_of(absent)
    skipped = [*LINUX_ONLY, *(name for name, needs in PLATFORM_MODULES.items() if needs != sys.platform)]

    result = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL_BUT, ",".join(blocked), ",".join(skipped)],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
