"""Reading a recording folder (turn folders as :mod:`deskrig.recording.turns` writes them, and the
mp4s) into :class:`~deskrig.viewer.models.RecordingView`.

A damaged turn (unreadable JSON, a file missing) still shows, with what could be read and a
``problem`` saying what could not; a folder without a single turn is refused with INVALID_PATH.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.recording.turns import VIDEO_FILE, Evidence, TurnVideo, turn_name, turn_numbers
from deskrig.viewer.a11y_diff import diff_states
from deskrig.viewer.models import (
    RECORDED_STATE,
    A11yDiff,
    Marker,
    RecordedAction,
    RecordedState,
    RecordingView,
    TurnView,
)

_ACTION = TypeAdapter(RecordedAction)
_EVIDENCE = TypeAdapter(dict[str, Evidence])
_VIDEO = TypeAdapter(TurnVideo)
#: What a turn whose action.json cannot be read shows (never changed: a turn gets its own on reading).
_UNKNOWN_ACTION = RecordedAction(tool="?", timestamp=datetime(1970, 1, 1, tzinfo=UTC))
T = TypeVar("T")
#: Recordings with fewer turns are read in one process: forking costs more than it saves.
PARALLEL_FROM = 200


def idle_cpus() -> int:
    """How many processes may read a recording: one per CPU the load average leaves idle, at least
    one. Forked readers spend about 40 % more CPU in all (their turns are pickled back), which only
    pays where there are idle cores to run them on; on a busy machine one process finishes sooner."""
    cpus = os.cpu_count() or 1
    if sys.platform == "win32":  # no load average there: one process, which is never the slow choice
        return 1
    return max(1, cpus - round(os.getloadavg()[0]))


class _Unreadable(Exception):
    pass


def _read(path: Path, model: TypeAdapter[T]) -> T | None:
    """``path`` parsed and validated in one pass by pydantic-core; None when there is no such file."""
    try:
        return model.validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _Unreadable(f"{path.name}: {exc}") from exc
    except ValidationError as exc:
        raise _Unreadable(f"{path.name}: {exc}") from exc


def _diff(folder: Path, evidence: dict[str, Evidence]) -> A11yDiff:
    states: list[RecordedState] = []
    for name in ("before_state.json", "after_state.json"):
        try:
            # Parsed and validated in one pass by pydantic-core: the snapshots are most of a turn's bytes.
            states.append(RECORDED_STATE.validate_json((folder / name).read_bytes()))
        except FileNotFoundError:
            why = evidence.get(name)
            reason = (why.message or why.classification) if why is not None else None
            return A11yDiff(note=f"no {name}" + (f" ({reason})" if reason else ""))
        except OSError as exc:
            raise _Unreadable(f"{name}: {exc}") from exc
    changes, more = diff_states(*states)
    return A11yDiff(changes=changes, note=f"{more} more changes not listed" if more else None)


def _marker(evidence: dict[str, Evidence]) -> Marker | None:
    click = evidence.get("click.png")
    if click is None or click.marker is None or click.region is None:
        return None
    region = click.region
    return Marker(x=(click.marker.x + 0.5) / region.width, y=(click.marker.y + 0.5) / region.height)


def load_turn(root: Path, number: int) -> TurnView:
    """Blocking: turn ``number`` of the recording in ``root``."""
    name = turn_name(number)
    folder = root / name
    present = set(os.listdir(folder))

    def relative(file: str) -> str | None:
        return f"{name}/{file}" if file in present else None

    view = TurnView(number=number, folder=name, action=_UNKNOWN_ACTION)
    try:
        action = _read(folder / "action.json", _ACTION)
        if action is None:
            raise _Unreadable("action.json is missing")
        view.action = action
        view.evidence = _read(folder / "evidence.json", _EVIDENCE) or {}
        view.before, view.after = relative("before.png"), relative("after.png")
        view.marker = _marker(view.evidence)
        view.video = _read(folder / VIDEO_FILE, _VIDEO)
        view.diff = _diff(folder, view.evidence)
    except (_Unreadable, ValidationError) as exc:
        view.problem = f"{name} is damaged: {exc}"
    return view


def not_a_recording(path: Path, why: str) -> DeskrigError:
    return DeskrigError(
        ErrorCode.INVALID_PATH,
        f"{path} is not a recording folder: {why}",
        details={"path": str(path)},
        remediation="Name the folder a rig recorded to (--record DIR or start_recording's output_dir): "
        "it holds turn-00001, turn-00002 ... folders.",
    )


def _load_turns(root: Path, numbers: list[int], workers: int) -> list[TurnView]:
    if workers <= 1 or len(numbers) < PARALLEL_FROM:
        return [load_turn(root, number) for number in numbers]
    # Forked workers: only for a single-threaded caller (the command line), where fork is safe.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        chunk = max(1, len(numbers) // (workers * 4))
        return list(pool.map(partial(load_turn, root), numbers, chunksize=chunk))


def load_recording(root: Path, *, live: bool = False, workers: int = 1) -> RecordingView:
    """Blocking: every turn of the recording in ``root`` and its videos. ``live``: a recording
    still being written, which may hold no turn yet. ``workers`` > 1 reads the turns in that many
    forked processes: only from a process that runs no other thread."""
    if not root.is_dir():
        raise not_a_recording(root, "no such folder" if not root.exists() else "not a folder")
    numbers = turn_numbers(root)
    if not numbers and not live:
        raise not_a_recording(root, "it holds no turn folders")
    videos = sorted(p.name for p in root.glob("recording*.mp4") if p.is_file())
    turns = _load_turns(root, numbers, workers)
    return RecordingView(title=root.resolve().name, turns=turns, videos=videos)
