"""Rig directories: a sweep removes only those whose owner is certainly gone."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from deskrig.rundirs import OWNER_FILE, UNRECORDED_GRACE, DirOwner, Kind, make_rig_dir, sweep_stale_dirs


def _owned_dir(root: Path, kind: Kind, **owner_changes: Any) -> Path:
    """A rig directory under ``root`` whose owner record differs from this process's as given."""
    path = make_rig_dir(kind, root)
    owner = DirOwner.current().model_copy(update=owner_changes)
    (path / OWNER_FILE).write_text(owner.model_dump_json())
    return path


def test_sweep_removes_only_dirs_whose_owner_is_certainly_gone(tmp_path: Path) -> None:
    me = DirOwner.current()
    exited = subprocess.Popen(["true"])
    exited.wait()
    dead_pid = exited.pid
    sleeper = subprocess.Popen(["sleep", "60"], env={"XDG_RUNTIME_DIR": str(tmp_path / "deskrig-xdg-inuse")})
    try:
        kept = {
            "live owner": _owned_dir(tmp_path, "xdg"),
            "live owner, run dir": _owned_dir(tmp_path, "rig"),
            "other pid namespace": _owned_dir(tmp_path, "xdg", pid=dead_pid, pid_namespace="pid:[1]"),
            "unrecorded, recent": tmp_path / "deskrig-xdg-recent",
            "unrecorded, in use": tmp_path / "deskrig-xdg-inuse",
            "unrecorded run dir": tmp_path / "deskrig-rig-old",
            "another prefix": tmp_path / "deskrig-bench-old",
        }
        removed = {
            "dead owner": _owned_dir(tmp_path, "xdg", pid=dead_pid),
            "reused pid": _owned_dir(tmp_path, "rig", start_time=me.start_time - 1),
            "before a reboot": _owned_dir(tmp_path, "xdg", boot_id="another-boot"),
            "unrecorded, old, unused": tmp_path / "deskrig-xdg-old",
        }
        long_ago = time.time() - 2 * UNRECORDED_GRACE
        for name, path in [*kept.items(), *removed.items()]:
            path.mkdir(exist_ok=True)
            if name != "unrecorded, recent":
                os.utime(path, (long_ago, long_ago))
        assert sorted(sweep_stale_dirs(tmp_path)) == sorted(removed.values())
        assert all(path.is_dir() for path in kept.values())
    finally:
        sleeper.kill()
        sleeper.wait()
