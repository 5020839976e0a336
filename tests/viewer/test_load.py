"""Reading recording folders as the recorder writes them (the bench's writer): damaged turns, and
the forked readers ``deskrig view`` uses on idle cores."""

from __future__ import annotations

from pathlib import Path

from deskrig.bench.viewer import make_recording
from deskrig.viewer.load import PARALLEL_FROM, load_recording


def test_a_snapshot_that_is_not_one_shows_its_turn_as_damaged(tmp_path: Path) -> None:
    make_recording(tmp_path, turns=3)
    (tmp_path / "turn-00002" / "before_state.json").write_text('{"elements": [{"index": 1, "role": 7}]}')
    (tmp_path / "turn-00003" / "after_state.json").write_text('{"elements": ')
    first, second, third = load_recording(tmp_path).turns
    assert first.problem is None and [c.describe() for c in first.diff.changes]
    assert (
        second.problem is not None
        and "turn-00002 is damaged" in second.problem
        and "parent" in second.problem
    )
    assert third.problem is not None and "turn-00003 is damaged" in third.problem
    assert second.action.tool == third.action.tool == "click"  # what could be read still shows


def test_forked_readers_read_what_one_process_reads(tmp_path: Path) -> None:
    make_recording(tmp_path, turns=PARALLEL_FROM + 5)
    (tmp_path / "turn-00007" / "action.json").write_text("{")
    alone, forked = load_recording(tmp_path, workers=1), load_recording(tmp_path, workers=2)
    assert forked == alone
    assert [turn.number for turn in forked.turns] == list(range(1, PARALLEL_FROM + 6))
    assert forked.turns[6].problem is not None and "action.json" in forked.turns[6].problem
