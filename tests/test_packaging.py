"""The wheel as a user installs it: built from this tree, installed into a fresh venv without the
dev extras, then every module imported and every command line run.

Only what pyproject.toml declares is there, so an import of a dev-only package (httpx, say) or of
one that only arrives by accident fails here. pytest joins the wheel in the venv because the
pytest plugin is for projects that have it; nothing else does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deskrig.cli import build_parser

pytestmark = pytest.mark.slow

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
#: Imports every module of the installed package (``__main__`` modules run their command instead;
#: another platform's modules are left out).
IMPORT_ALL = f"""
import importlib, pkgutil, sys, deskrig
other_platforms = {{name for name, platform in {PLATFORM_MODULES!r}.items() if platform != sys.platform}}
names = [m.name for m in pkgutil.walk_packages(deskrig.__path__, "deskrig.") if not m.name.endswith(".__main__")]
for name in names:
    if name not in other_platforms:
        importlib.import_module(name)
print(len(names))
"""


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command and subcommand of ``parser``: ("serve",), ("rig", "run"), ("session", "ls") ..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from command_paths(sub, (*prefix, name))


def run(*argv: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel built from this tree, its declared dependencies and pytest."""
    work = tmp_path_factory.mktemp("packaging")
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources it builds.
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "service", source / "service", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = run(*pip, "wheel", "--no-deps", "-w", work / "dist", source)
    assert built.returncode == 0, built.stderr
    (wheel,) = (work / "dist").glob("deskrig-*.whl")
    venv = work / "venv"
    made = run(sys.executable, "-m", "venv", "--without-pip", venv)
    assert made.returncode == 0, made.stderr
    # This environment's pip installs into the new venv (pip's cache makes it quick).
    python = venv / "bin" / "python"
    added = run(*pip, "--python", python, "install", "--quiet", "--no-compile", wheel, "pytest")
    assert added.returncode == 0, added.stderr
    return venv


def test_every_module_imports_without_the_dev_extras(installed: Path) -> None:
    imported = run(installed / "bin" / "python", "-c", IMPORT_ALL)
    assert imported.returncode == 0, imported.stderr
    assert int(imported.stdout) > 50


def test_every_command_answers_help(installed: Path) -> None:
    deskrig = installed / "bin" / "deskrig"
    paths = [(), *command_paths(build_parser())]
    assert ("session", "ls") in paths and ("orchestrator", "status") in paths
    for path in paths:
        done = run(deskrig, *path, "--help")
        assert done.returncode == 0, (path, done.stderr)
        assert done.stdout.startswith("usage: deskrig"), (path, done.stdout)


def test_session_ls_runs_and_explains_a_missing_service(installed: Path, tmp_path: Path) -> None:
    env = {**os.environ, "DESKRIG_STATE_DIR": str(tmp_path / "state")}
    done = run(installed / "bin" / "deskrig", "session", "ls", env=env)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr
    assert "no orchestrator service is running" in done.stderr


def test_the_pytest_plugin_loads(installed: Path, tmp_path: Path) -> None:
    done = run(installed / "bin" / "python", "-m", "pytest", "--help", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stderr
    assert "--deskrig-image" in done.stdout
