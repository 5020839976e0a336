"""A rig's temporary directories, and the sweep of those that a killed rig left behind.

A rig keeps its sockets and cookie in ``$TMPDIR/deskrig-xdg-*`` and, by default, its logs in
``$TMPDIR/deskrig-rig-*``; :meth:`deskrig.rig.Rig.stop` removes both. A SIGKILLed supervisor
cannot, so every rig sweeps, before it creates its own, the directories whose owner is gone.

Ownership must be judged safely: a live rig's directory is never removed. Each directory holds
an owner record, written atomically before the directory is used: the supervisor's pid, its
start time in clock ticks since boot (a reused pid has another), the boot id (after a reboot
every owner is gone) and the pid namespace (from another namespace a live owner's pid means
nothing here, so such a directory is left alone). Directories without a record come from
deskrig versions before it: one is stale only when it is older than :data:`UNRECORDED_GRACE`
and no live process has it as ``XDG_RUNTIME_DIR`` (every process a rig starts does).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from deskrig.files import write_atomic
from deskrig.procs import read_proc

log = logging.getLogger(__name__)

OWNER_FILE = ".deskrig-owner.json"
PREFIXES = {"xdg": "deskrig-xdg-", "rig": "deskrig-rig-"}
#: How old a directory without an owner record must be before it may be swept.
UNRECORDED_GRACE = 600.0

Kind = Literal["xdg", "rig"]


class DirOwner(BaseModel):
    """The process that owns a rig directory, identified beyond its pid."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pid: int
    start_time: int
    boot_id: str
    pid_namespace: str

    @classmethod
    def current(cls) -> DirOwner:
        entry = read_proc(os.getpid())
        assert entry is not None  # our own process
        return cls(
            pid=entry.pid,
            start_time=entry.start_time,
            boot_id=Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
            pid_namespace=os.readlink("/proc/self/ns/pid"),
        )

    def gone(self, observer: DirOwner) -> bool:
        """Whether this owner has certainly exited, as seen from the ``observer`` process."""
        if self.boot_id != observer.boot_id:
            return True
        if self.pid_namespace != observer.pid_namespace:
            return False  # its pid means another process here, or none: we cannot tell
        entry = read_proc(self.pid)
        return entry is None or entry.dead or entry.start_time != self.start_time


def make_rig_dir(kind: Kind, root: Path | None = None) -> Path:
    """A fresh 0700 directory ``deskrig-{kind}-*`` holding this process's owner record."""
    path = Path(tempfile.mkdtemp(prefix=PREFIXES[kind], dir=root))
    record = path / OWNER_FILE
    write_atomic(record, DirOwner.current().model_dump_json().encode())
    return path


def sweep_stale_dirs(root: Path | None = None) -> list[Path]:
    """Remove this user's rig directories under ``root`` (default: the temp dir) whose owner is
    gone; returns what was removed. Never raises for a directory it cannot judge or remove."""
    root = Path(tempfile.gettempdir()) if root is None else root
    me = DirOwner.current()
    runtime_dirs_in_use: set[str] | None = None  # read from /proc only if needed
    removed = []
    for kind, prefix in PREFIXES.items():
        for path in root.glob(prefix + "*"):
            try:
                info = path.lstat()
            except OSError:
                continue
            if not path.is_dir() or path.is_symlink() or info.st_uid != os.getuid():
                continue
            owner = _read_owner(path)
            if owner is not None:
                stale = owner.gone(me)
            else:
                if kind != "xdg" or time.time() - info.st_mtime < UNRECORDED_GRACE:
                    continue
                if runtime_dirs_in_use is None:
                    runtime_dirs_in_use = _runtime_dirs_in_use()
                stale = str(path) not in runtime_dirs_in_use
            if stale:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
                log.info(
                    "removed %s, left behind by a rig that is gone (%s)", path, owner or "unrecorded owner"
                )
    return removed


def _read_owner(path: Path) -> DirOwner | None:
    try:
        return DirOwner.model_validate_json((path / OWNER_FILE).read_bytes())
    except (OSError, ValidationError):
        return None


def _runtime_dirs_in_use() -> set[str]:
    """Every ``XDG_RUNTIME_DIR`` in the environment of a live process we may read."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        for entry in environ.split(b"\0"):
            if entry.startswith(b"XDG_RUNTIME_DIR="):
                found.add(entry.partition(b"=")[2].decode(errors="replace"))
    return found
