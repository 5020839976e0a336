"""Files a client hands the rig or takes from it, inside the allowed directories only.

The one place the file tools (``deskrig.tools.files``) and the streamed HTTP endpoints
(``deskrig.file_transfer``) check a path and a size: every path goes through the same
:class:`~deskrig.security.PathGuard` as ``save_dir`` (realpath, so ``..`` and symlinks that lead
outside are refused), and every write is atomic (a temp file beside the destination, renamed into
place), so an oversized or broken upload leaves nothing behind and never half a file.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from deskrig.errors import DeskrigError, ErrorCode, file_system_error
from deskrig.files import write_atomic
from deskrig.security import PathGuard

#: Chunk size for hashing and streaming files.
CHUNK = 1024 * 1024


class FileFacts(BaseModel):
    """A file in the allowed directories: its real path, size and SHA-256."""

    path: str = Field(description="Real absolute path of the file")
    size: int = Field(description="Size in bytes")
    sha256: str = Field(description="SHA-256 of the contents, hex")


def too_large(size: int, limit: int, path: str) -> DeskrigError:
    return DeskrigError(
        ErrorCode.INVALID_ARGUMENT,
        f"{size} bytes is more than the rig's file size limit of {limit} bytes",
        details={"path": path, "size": size, "max_file_bytes": limit},
        remediation="Send a smaller file, or start the rig with a larger --max-file-bytes "
        "(DESKRIG_MAX_FILE_BYTES).",
    )


def facts(path: Path, data: bytes) -> FileFacts:
    return FileFacts(path=str(path), size=len(data), sha256=hashlib.sha256(data).hexdigest())


@dataclass(frozen=True)
class FilePolicy:
    """Where files may go and how large they may be."""

    paths: PathGuard
    max_bytes: int
    #: (uid, gid) of the user the rig's apps run as, when that is not the server's (a sway rig
    #: started as root runs them unprivileged): new files and folders go to them, so the app can
    #: open, save and replace what the agent uploads. None: the server's user.
    app_owner: tuple[int, int] | None = None

    def destination(self, path: str, make_parents: bool = False) -> Path:
        """The real path a file may be written to: inside an allowed directory, not a directory,
        with its parent present (or created, with ``make_parents``)."""
        real = self.paths.resolve(path)
        if real.is_dir():
            raise DeskrigError(
                ErrorCode.INVALID_PATH,
                f"{real} is a directory",
                details={"path": path},
                remediation="Name a file inside the directory.",
            )
        if not real.parent.is_dir():
            if not make_parents:
                raise DeskrigError(
                    ErrorCode.INVALID_PATH,
                    f"the directory {real.parent} does not exist",
                    details={"path": path},
                    remediation="Pass make_parents=true to create it, or upload into an existing directory.",
                )
            missing = [real.parent, *(p for p in real.parent.parents if not p.exists())]
            try:
                real.parent.mkdir(parents=True, exist_ok=True)
                if self.app_owner is not None and sys.platform != "win32" and os.geteuid() == 0:
                    for folder in missing:  # the new ones, for the app to save beside the upload
                        os.chown(folder, *self.app_owner)
            except OSError as exc:
                raise file_system_error("create", real.parent, exc) from exc
        return real

    def owner_of(self, path: Path) -> tuple[int, int] | None:
        """Who a write to ``path`` leaves it to: a replaced file keeps its owner, a new one goes to
        :attr:`app_owner`; None: the writer (also whenever the server is not root, which cannot
        give files away)."""
        if sys.platform == "win32" or os.geteuid() != 0:
            return None
        try:
            info = path.stat()
        except FileNotFoundError:
            return self.app_owner
        return info.st_uid, info.st_gid

    def source(self, path: str) -> Path:
        """The real path of an existing regular file inside an allowed directory."""
        real = self.paths.resolve(path)
        if not real.is_file():
            raise DeskrigError(
                ErrorCode.INVALID_PATH,
                f"{real} is not a file" if real.exists() else f"{real} does not exist",
                details={"path": path},
                remediation="Name an existing file inside the allowed directories.",
            )
        return real

    def check_size(self, size: int, path: str) -> None:
        if size > self.max_bytes:
            raise too_large(size, self.max_bytes, path)

    def write(self, path: str, data: bytes, make_parents: bool = False) -> FileFacts:
        """Blocking: replace the file at ``path`` with ``data``, atomically."""
        self.check_size(len(data), path)
        real = self.destination(path, make_parents)
        try:
            write_atomic(real, data, mode=kept_mode(real), owner=self.owner_of(real))
        except OSError as exc:
            raise file_system_error("write", real, exc) from exc
        return facts(real, data)

    def read(self, path: str) -> tuple[FileFacts, Path]:
        """Blocking: the facts of the file at ``path`` (hashed in chunks) and its real path."""
        real = self.source(path)
        try:
            self.check_size(real.stat().st_size, path)
        except OSError as exc:
            raise file_system_error("read", real, exc) from exc
        digest = hashlib.sha256()
        size = 0
        try:
            with real.open("rb") as stream:
                for chunk in iter(lambda: stream.read(CHUNK), b""):
                    digest.update(chunk)
                    size += len(chunk)
        except OSError as exc:
            raise file_system_error("read", real, exc) from exc
        return FileFacts(path=str(real), size=size, sha256=digest.hexdigest()), real


def kept_mode(path: Path) -> int | None:
    """The permission bits of the file a write replaces (an executable stays executable); None
    for a new file (from the umask)."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return None


def read_chunks(path: Path) -> Iterator[bytes]:
    """Blocking: the file's contents, a chunk at a time."""
    with path.open("rb") as stream:
        yield from iter(lambda: stream.read(CHUNK), b"")


def replace_with(temp: Path, destination: Path) -> None:
    """Move a finished temp file (written beside ``destination``) into place."""
    try:
        os.replace(temp, destination)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise file_system_error("write", destination, exc) from exc
