"""The tests' own readers of what fixture apps log: a line still being written is not read."""

from __future__ import annotations

from pathlib import Path

from tests.polling import json_lines


def test_a_half_written_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    assert json_lines(log) == []
    log.write_text('{"event": "ready"}\n\n{"event": "layout", "widgets": {"entry": {"x": 7')
    assert json_lines(log) == [{"event": "ready"}]
    with log.open("a") as out:
        out.write(', "y": 9}}}\n')
    assert json_lines(log) == [
        {"event": "ready"},
        {"event": "layout", "widgets": {"entry": {"x": 7, "y": 9}}},
    ]
