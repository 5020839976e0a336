"""A session's artifacts on the host: listing them, and resolving one without escaping the folder."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.mirror import INCOMING


class ArtifactFile(BaseModel):
    path: str
    size: int


class ArtifactListing(BaseModel):
    session: str
    artifacts_dir: str
    files: list[ArtifactFile]


def list_artifacts(directory: Path) -> list[ArtifactFile]:
    """Every file under a session directory, sorted, without the mirror's staging area."""
    files = []
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if rel.parts[0] != INCOMING and path.is_file():
            files.append(ArtifactFile(path=rel.as_posix(), size=path.stat().st_size))
    return files


def resolve_artifact(directory: Path, relative: str) -> Path:
    """``relative`` inside ``directory``, or INVALID_PATH (no escaping by ``..`` or symlinks)."""
    root = directory.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise DeskrigError(
            ErrorCode.INVALID_PATH,
            f"no artifact {relative!r} in this session",
            details={"path": relative},
            remediation="GET /sessions/{id}/artifacts lists the session's files.",
        )
    return target
