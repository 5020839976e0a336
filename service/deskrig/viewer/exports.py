"""Portable exports of a recording: the report zipped with every file it shows, and one JSON
line per turn for evaluation and training pipelines.

Both are written to a hidden temp file beside the destination and renamed into place, so a
failure (a full disk, an unwritable folder) leaves nothing half-written behind.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from deskrig.errors import file_system_error
from deskrig.files import write_temp
from deskrig.viewer import DEFAULT_NAME
from deskrig.viewer.models import RecordingView, TurnView
from deskrig.viewer.report import render_report

#: Folder of the recording's files inside the zip, beside report.html.
ZIP_FILES = "files"


@contextmanager
def _atomic_output(out: Path, what: str) -> Iterator[IO[bytes]]:
    """A file to write ``out`` through: renamed into place when the block ends without error."""
    try:
        temp = write_temp(out.parent, b"")
    except OSError as exc:
        raise file_system_error(f"write the {what} to", out, exc) from exc
    try:
        with temp.open("wb") as stream:
            yield stream
        os.replace(temp, out)
    except OSError as exc:
        raise file_system_error(f"write the {what} to", out, exc) from exc
    finally:
        temp.unlink(missing_ok=True)


def _shown_files(view: RecordingView) -> list[str]:
    """Every file of the recording the report links to, relative to its folder."""
    paths: list[str] = list(view.videos)
    for turn in view.turns:
        paths += [path for path in (turn.before, turn.after) if path is not None]
    return paths


def write_zip(view: RecordingView, root: Path, out: Path) -> Path:
    """``out``: report.html and, under files/, the images and videos it shows."""
    page = render_report(view, base=f"{ZIP_FILES}/")
    with _atomic_output(out, "archive") as stream, zipfile.ZipFile(stream, "w") as archive:
        archive.writestr(DEFAULT_NAME, page, compress_type=zipfile.ZIP_DEFLATED)
        for relative in _shown_files(view):
            # PNGs and mp4s are compressed already: stored, not deflated again.
            archive.write(root / relative, f"{ZIP_FILES}/{relative}", compress_type=zipfile.ZIP_STORED)
    return out


def turn_record(turn: TurnView) -> dict[str, Any]:
    """One JSONL line: the action, its outcome, its images and what changed in the a11y tree."""
    action = turn.action
    return {
        "turn": turn.number,
        "timestamp": action.timestamp.isoformat().replace("+00:00", "Z"),
        "tool": action.tool,
        "arguments": action.arguments,
        "result": action.result,
        "is_error": action.is_error,
        "error": action.error.model_dump(mode="json", exclude_none=True) if action.error else None,
        "duration_ms": action.duration_ms,
        "effect": action.effect,
        "effect_evidence": action.effect_evidence,
        "a11y_diff": [change.model_dump(mode="json", exclude_none=True) for change in turn.diff.changes],
        "a11y_note": turn.diff.note,
        "before_image": turn.before,
        "after_image": turn.after,
        "click_point": action.click_point.model_dump() if action.click_point else None,
        "video": turn.video.model_dump() if turn.video else None,
        "evidence": {name: e.dump() for name, e in turn.evidence.items()},
        "problem": turn.problem,
    }


def export_jsonl(view: RecordingView, out: Path) -> Path:
    """``out``: one JSON object per turn, oldest first. Image paths are relative to the recording folder."""
    with _atomic_output(out, "JSONL export") as stream:
        for turn in view.turns:
            stream.write(json.dumps(turn_record(turn), ensure_ascii=False).encode("utf-8") + b"\n")
    return out
