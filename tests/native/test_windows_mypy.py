"""``mypy --platform win32`` over the package: the Windows backend's native modules (skipped by the
normal run, whose platform is Linux) and every module ``deskrig serve`` loads on Windows.

Left out are the modules that only ever run on Linux, the rig's: the supervisor (``rig/``), the X11
and sway backends, the run folders, the benchmarks and the orchestrator's lease reaper (fcntl
locks). They are still read for the types they export (``follow_imports = silent``), their own
errors unreported, so a POSIX-only call anywhere else is an error here.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "service" / "deskrig"
#: Modules that run on Linux only (see the module docstring).
LINUX_ONLY_PACKAGES = ("rig", "bench")
LINUX_ONLY_MODULES = ("rundirs", "orchestrator.reaper")
LINUX_ONLY_PREFIXES = ("desktop/x11", "desktop/sway")


def linux_only() -> list[str]:
    """The Linux-only modules' dotted names, and ``pkg.*`` for the packages."""
    modules = [f"deskrig.{package}" for package in LINUX_ONLY_PACKAGES]
    modules += [f"deskrig.{package}.*" for package in LINUX_ONLY_PACKAGES]
    modules += [f"deskrig.{module}" for module in LINUX_ONLY_MODULES]
    for prefix in LINUX_ONLY_PREFIXES:
        folder, stem = prefix.split("/")
        modules += [
            f"deskrig.{folder}.{path.stem}" for path in sorted((PACKAGE / folder).glob(f"{stem}*.py"))
        ]
    return modules


def mypy_config(cache: Path) -> str:
    """The project's mypy settings (pyproject.toml) for the win32 check, as a mypy.ini."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    lines = ["[mypy]"]
    for key, value in settings.items():
        if key in ("files", "overrides"):
            continue
        shown = ", ".join(value) if isinstance(value, list) else str(value)
        lines.append(f"{key} = {shown}")
    lines += ["platform = win32", f"cache_dir = {cache}", ""]
    for override in settings.get("overrides", []):
        lines.append(f"[mypy-{','.join(override['module'])}]")
        lines += [f"{key} = {value}" for key, value in override.items() if key != "module"]
        lines.append("")
    lines += [f"[mypy-{','.join(linux_only())}]", "follow_imports = silent"]
    return "\n".join(lines) + "\n"


def checked_files() -> list[str]:
    skipped = {name.removesuffix(".*") for name in linux_only()}
    files = []
    for path in sorted(PACKAGE.rglob("*.py")):
        dotted = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        if not any(dotted == s or dotted.startswith(s + ".") for s in skipped):
            files.append(str(path))
    return files


@pytest.mark.slow
def test_the_package_type_checks_for_windows(tmp_path: Path) -> None:
    config = tmp_path / "mypy.ini"
    config.write_text(mypy_config(ROOT / ".mypy_cache" / "win32"))
    files = checked_files()
    assert any(f.endswith("windows_api.py") for f in files)
    assert not any("/rig/" in f or "x11_" in f for f in files)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
