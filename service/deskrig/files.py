"""Files written so that nobody ever reads half of one: the single atomic-write helper.

A file is written to a hidden temp file beside its destination and renamed (or hard-linked) into
place, so a reader, or this process after a crash, sees the old contents or the new ones, never a
part. Nothing is fsync'd: a power cut may lose recent writes. Errors are plain ``OSError``; the
tool layer turns them into FILE_SYSTEM_ERROR (``imaging.save_file``), the orchestrator and the
rig let them propagate.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path


def write_temp(
    directory: Path, data: bytes, mode: int | None = None, owner: tuple[int, int] | None = None
) -> Path:
    """``data`` in a new hidden temp file in ``directory``, for the caller to rename or link into place.

    ``mode`` is set before any data is written, so a secret is never readable by others even for a
    moment; None gives what a new file gets from the umask. ``owner``: the (uid, gid) the file is
    given (a root writer's only); None: the writer's.
    """
    while True:
        temp = directory / f".deskrig-{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if mode is not None else 0o666)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as out:
                if mode is not None and sys.platform != "win32":  # Windows: ACLs, not modes
                    os.fchmod(out.fileno(), mode)  # exactly ``mode``, whatever the umask
                if owner is not None and sys.platform != "win32":
                    os.fchown(out.fileno(), *owner)
                out.write(data)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return temp


def write_atomic(
    path: Path,
    data: bytes,
    *,
    mode: int | None = None,
    owner: tuple[int, int] | None = None,
    parents: bool = False,
) -> None:
    """Replace ``path`` with ``data`` atomically (see the module docstring); no temp file is left.

    ``mode``: the file's permission bits (None: from the umask); ``owner``: its (uid, gid) (None:
    the writer's). ``parents``: create missing parent directories first.
    """
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    temp = write_temp(path.parent, data, mode, owner)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
