"""The wheel as a user installs it: built from this tree, installed into a fresh venv without the
extras, then every module imported and every command line run.

Only what pyproject.toml declares is there, so an import of a dev-only package (httpx, say) or of
one that only arrives by accident fails here; a command that needs an extra says which. pytest
joins the wheel in the venv (without its extra's orchestrator) because the pytest plugin loads in
any project that has pytest; nothing else does.

A package that arrives with a declared one (pydantic_core with pydantic) imports fine in that venv
too, so the sources' imports are also read and checked against what is declared by name.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.metadata
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from tests.declared import EXTRA_ONLY_MODULES, PLATFORM_MODULES, dependencies, extra_distributions, extras

from deskrig.cli import build_parser
from deskrig.extras import EXTRA_MODULES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
#: The distributions of modules that install only on another OS (so this one cannot look them up).
OTHER_OS_DISTRIBUTIONS = {
    "AppKit": "pyobjc-framework-Cocoa",
    "Foundation": "pyobjc-framework-Cocoa",
    "Quartz": "pyobjc-framework-Quartz",
    "ApplicationServices": "pyobjc-framework-ApplicationServices",
    "comtypes": "comtypes",
}
#: Modules imported from this repository rather than from a distribution.
REPOSITORY_MODULES = {"pii_content": "the PII fixture app's module (tests/apps), for the privacy benchmark"}
#: Imports every module of the installed package (``__main__`` modules run their command instead;
#: another platform's modules are left out, and those that load an extra's packages); prints how
#: many, and where the package is.
IMPORT_ALL = f"""
import importlib, pkgutil, sys, deskrig
other_platforms = {{name for name, platform in {PLATFORM_MODULES!r}.items() if platform != sys.platform}}
left_out = other_platforms | {set(EXTRA_ONLY_MODULES)!r}
names = [m.name for m in pkgutil.walk_packages(deskrig.__path__, "deskrig.") if not m.name.endswith(".__main__")]
for name in names:
    if name not in left_out:
        importlib.import_module(name)
print(len(names), deskrig.__file__)
"""
#: The caller's variables that would have the venv's Python look elsewhere than the venv:
#: PYTHONPATH=service put the sources before the wheel, and with them the *.egg-info of an editable
#: install, which made pip find deskrig installed already and leave the wheel out of the venv.
CALLERS_PYTHON = ("PYTHONPATH", "PYTHONHOME")


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command and subcommand of ``parser``: ("serve",), ("rig", "run"), ("session", "ls") ..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from command_paths(sub, (*prefix, name))


def run(*argv: str | Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``argv`` in ``cwd`` (a folder of the test's: the caller's would be the first place a Python
    imports from), with ``env`` added to this environment less :data:`CALLERS_PYTHON`."""
    environment = {name: value for name, value in os.environ.items() if name not in CALLERS_PYTHON} | env
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, env=environment, cwd=cwd, timeout=600
    )


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
    built = run(*pip, "wheel", "--no-deps", "-w", work / "dist", source, cwd=work)
    assert built.returncode == 0, built.stderr
    (wheel,) = (work / "dist").glob("deskrig-*.whl")
    venv = work / "venv"
    made = run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=work)
    assert made.returncode == 0, made.stderr
    # This environment's pip installs into the new venv (pip's cache makes it quick).
    python = venv / "bin" / "python"
    added = run(*pip, "--python", python, "install", "--quiet", "--no-compile", wheel, "pytest", cwd=work)
    assert added.returncode == 0, added.stderr
    return venv


def test_every_module_imports_without_the_extras(installed: Path) -> None:
    """The wheel's modules, not the sources' (a PYTHONPATH=service of the caller's put those first)."""
    imported = run(installed / "bin" / "python", "-c", IMPORT_ALL, cwd=installed.parent)
    assert imported.returncode == 0, imported.stderr
    count, package = imported.stdout.split()
    assert int(count) > 50
    assert Path(package).is_relative_to(installed), package


def test_every_command_answers_help(installed: Path) -> None:
    deskrig = installed / "bin" / "deskrig"
    paths = [(), *command_paths(build_parser())]
    assert ("session", "ls") in paths and ("orchestrator", "status") in paths
    for path in paths:
        done = run(deskrig, *path, "--help", cwd=installed.parent)
        assert done.returncode == 0, (path, done.stderr)
        assert done.stdout.startswith("usage: deskrig"), (path, done.stdout)


def test_session_ls_runs_and_explains_a_missing_service(installed: Path, tmp_path: Path) -> None:
    done = run(
        installed / "bin" / "deskrig",
        "session",
        "ls",
        cwd=tmp_path,
        DESKRIG_STATE_DIR=str(tmp_path / "state"),
    )
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr
    assert "no orchestrator service is running" in done.stderr


def test_the_pytest_plugin_loads(installed: Path, tmp_path: Path) -> None:
    done = run(installed / "bin" / "python", "-m", "pytest", "--help", "-p", "no:cacheprovider", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "--deskrig-image" in done.stdout


def third_party_imports(module: ast.Module) -> Iterator[tuple[str, bool]]:
    """Each third-party top-level module ``module`` imports, and whether on import (not in a
    function, and not only for type checking)."""

    def walk(node: ast.AST, on_import: bool) -> Iterator[tuple[str, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            else:
                names = []
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top != "deskrig":
                    yield top, on_import
            type_checking = isinstance(child, ast.If) and ast.unparse(child.test) == "TYPE_CHECKING"
            deferred = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from walk(child, on_import and not (deferred or type_checking))

    yield from walk(module, True)


@functools.cache
def distribution_of(module: str) -> str:
    installed = importlib.metadata.packages_distributions()
    (name,) = installed.get(module, [OTHER_OS_DISTRIBUTIONS.get(module, f"<nothing installs {module}>")])
    return canonicalize_name(name)


def test_every_imported_package_is_declared_and_extras_are_imported_when_used() -> None:
    """A module's third-party imports name declared distributions (imported with another one
    counts for nothing), and one that only an extra brings is imported in the function using it,
    so a plain install imports every module; but for the modules of that extra
    (``EXTRA_ONLY_MODULES``)."""
    core = {canonicalize_name(r.name) for r in dependencies()}
    in_extras = {canonicalize_name(r.name) for reqs in extras().values() for r in reqs} - {"deskrig"}
    undeclared, extra_on_import = set(), set()
    for path in sorted((ROOT / "service" / "deskrig").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        name = ".".join(path.relative_to(ROOT / "service").with_suffix("").parts)
        loads_extra = extra_distributions(EXTRA_ONLY_MODULES[name]) if name in EXTRA_ONLY_MODULES else set()
        for module, on_import in third_party_imports(ast.parse(path.read_text(), where)):
            if module in REPOSITORY_MODULES:
                continue
            distribution = distribution_of(module)
            if distribution not in core | in_extras:
                undeclared.add(f"{where}: {module} ({distribution})")
            elif distribution not in core | loads_extra and on_import:
                extra_on_import.add(f"{where}: {module} ({distribution})")

    assert not undeclared, "imported but not declared in pyproject.toml"
    assert not extra_on_import, "an extra's package imported on import (import it where it is used)"


def test_each_extra_names_the_modules_its_distributions_install() -> None:
    """What ``needs_extra`` reports a missing import by is what pyproject.toml's extra installs."""
    installed_by: dict[str, set[str]] = {}
    for module, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            installed_by.setdefault(canonicalize_name(distribution), set()).add(module)
    for extra, modules in EXTRA_MODULES.items():
        own = {canonicalize_name(r.name) for r in extras()[extra]} - {"deskrig"}
        assert modules == {m for d in own for m in installed_by[d] if not m.startswith("_")}, extra
    assert {"orchestrator", "pytest"} <= set(EXTRA_ONLY_MODULES.values()) <= set(extras())


def test_a_command_needing_an_extra_says_which_to_install(installed: Path, tmp_path: Path) -> None:
    """Without the orchestrator extra: its runtimes and its image push answer with the extra to
    install, no traceback (`session ls --json` without it: tests/test_extras.py)."""
    deskrig = installed / "bin" / "deskrig"
    state = str(tmp_path / "state")
    for argv in (
        ("orchestrator", "serve", "--runtime", "docker"),
        ("orchestrator", "serve", "--runtime", "swarm"),
        ("images", "push", "--registry", "localhost:5000"),
    ):
        done = run(deskrig, *argv, cwd=tmp_path, DESKRIG_STATE_DIR=state)
        assert "Traceback" not in done.stderr, (argv, done.stderr)
        assert done.returncode == 1, (argv, done.stderr)
        assert "RUNTIME_UNAVAILABLE" in done.stderr and "deskrig's 'orchestrator' extra" in done.stderr, argv
        assert "pip install 'deskrig[orchestrator]'" in done.stderr, (argv, done.stderr)
    kubernetes = run(
        deskrig, "orchestrator", "serve", "--runtime", "kubernetes", cwd=tmp_path, DESKRIG_STATE_DIR=state
    )
    assert "Traceback" not in kubernetes.stderr and kubernetes.returncode == 1, kubernetes.stderr
    assert "pip install 'deskrig[kubernetes]'" in kubernetes.stderr, kubernetes.stderr
