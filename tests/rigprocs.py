"""What the rig tests share: the fixture apps they run and a leak check in /proc.

Every process a rig starts carries the rig's private XDG_RUNTIME_DIR in its environment, so a
scan for it finds grandchildren too.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.polling import poll

#: Debian's Python, with tkinter and python3-gi: what the fixture apps other than Qt's run in.
SYSTEM_PYTHON = "/usr/bin/python3"


def _folder_anyone_can_read(prefix: str) -> Path:
    """A new folder any user can read, removed when this process exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _anyone_can_reach(path: Path) -> bool:
    """Whether every folder down to ``path`` lets any user through."""
    return all(folder.stat().st_mode & stat.S_IXOTH for folder in (path, *path.parents))


def _apps_anyone_can_run() -> Path:
    """tests/apps where any user can read the apps: there, or in a copy made for this process.

    A sway rig run as root runs its apps as an unprivileged user, and a checkout below a folder
    only root may enter (``mktemp -d`` makes them 0700) is out of that user's reach: the apps
    exited with "Permission denied" under every sway test. Such a checkout's apps are copied once
    to a folder anyone can read."""
    apps = Path(__file__).resolve().parent / "apps"
    if _anyone_can_reach(apps) and all(app.stat().st_mode & stat.S_IROTH for app in apps.glob("*.py")):
        return apps
    copy = _folder_anyone_can_read("deskrig-apps-")
    shutil.copytree(apps, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    for path in (copy, *copy.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links refused
        shutil.copy2(source, target)


def _qt_python_anyone_can_run() -> str:
    """A Python with PySide6 that any user can run: Debian's python3 (3.11, the venv's ABI) given
    the venv's PySide6 and shiboken6, linked into a folder anyone can read.

    The venv's own interpreter is out of reach of the unprivileged user a sway rig runs its apps
    as (it lives under root's home). A package anyone can reach is linked to where it is; one below
    a folder only root may enter (a venv in a ``mktemp -d`` checkout) is hard-linked file by file,
    which costs no copy on the same file system. The folder holds nothing else, so Debian's own
    modules are not shadowed."""
    folder = _folder_anyone_can_read("deskrig-qt-")
    for package in ("PySide6", "shiboken6"):
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, f"{package} is a dev dependency"
        source = Path(spec.submodule_search_locations[0])
        if _anyone_can_reach(source):
            (folder / package).symlink_to(source)
        else:
            shutil.copytree(
                source,
                folder / package,
                copy_function=_link_or_copy,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
    launcher = folder / "python3"
    launcher.write_text(f'#!/bin/sh\nPYTHONPATH={folder} exec {SYSTEM_PYTHON} "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


#: The fixture apps (tests/apps), where the user a rig runs its apps as can read them.
APPS = _apps_anyone_can_run()
#: The Python the Qt form runs in (PySide6 is a dev dependency), one any user can run.
QT_PYTHON = _qt_python_anyone_can_run()
#: The desktop backends every rig test runs on (``deskrig rig run --backend``), and the name each
#: gives its display server's process.
BACKENDS = ("x11", "sway")
DISPLAY_SERVER = {"x11": "xvfb", "sway": "sway"}
XTERM_TITLE = "rig-test-xterm"
# A Tk window that exits with status 5 once the file named by argv[1] exists.
TK_EXIT_WHEN_TOLD = (
    "import os, sys, tkinter as tk\n"
    "root = tk.Tk(); root.title('exit-when-told'); root.geometry('200x100')\n"
    "def check():\n"
    "    os._exit(5) if os.path.exists(sys.argv[1]) else root.after(20, check)\n"
    "check(); root.mainloop()\n"
)


def live_rig_processes(runtime_dir: str, pids: Iterator[int] | list[int] = ()) -> dict[int, str]:
    """pid -> command of every live (non-zombie) process of the rig: the given pids and every
    process whose environment holds the rig's XDG_RUNTIME_DIR."""
    marker = f"XDG_RUNTIME_DIR={runtime_dir}".encode()
    wanted = set(pids)
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat_line = Path(f"/proc/{name}/stat").read_text()
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if stat_line[stat_line.rindex(")") + 2] in "ZX":
            continue
        if int(name) in wanted or marker in environ.split(b"\0"):
            found[int(name)] = stat_line[stat_line.index("(") + 1 : stat_line.rindex(")")]
    return found


def assert_all_gone(runtime_dir: str, pids: list[int], timeout: float = 10.0) -> None:
    poll("the rig's processes to end", lambda: not live_rig_processes(runtime_dir, pids), timeout)


@contextlib.contextmanager
def open_dir(prefix: str) -> Iterator[Path]:
    """A fresh folder the rig's apps can use whoever they run as (logs, triggers), removed after.

    A sway rig run as root runs its apps as an unprivileged user, who cannot enter pytest's
    (root's) tmp_path."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
