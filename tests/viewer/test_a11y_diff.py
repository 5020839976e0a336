"""The accessibility diff on snapshots shaped like the recorder's (the real one: test_report.py)."""

from __future__ import annotations

from typing import Any

from deskrig.viewer.a11y_diff import MAX_CHANGES, diff_states
from deskrig.viewer.models import RECORDED_STATE, RecordedState


def state(*children: dict[str, Any]) -> RecordedState:
    elements = [{"index": 0, "parent": None, "role": "frame", "name": "Form", "states": ["active"]}]
    elements += [{"index": i, "parent": 0, **child} for i, child in enumerate(children, start=1)]
    return RECORDED_STATE.validate_python({"app_name": "Form", "elements": elements})


def described(before: RecordedState, after: RecordedState) -> list[str]:
    changes, more = diff_states(before, after)
    assert more == 0
    return [change.describe() for change in changes]


def test_each_kind_of_change_is_named_once() -> None:
    before = state(
        {"role": "label", "name": "clicked 0", "text": "clicked 0"},
        {"role": "check box", "name": "Subscribe", "states": ["enabled"]},
        {"role": "text", "name": "Name", "text": ""},
        {"role": "slider", "name": "Volume", "value": {"current": 0, "minimum": 0, "maximum": 100}},
        {"role": "push button", "name": "Gone"},
    )
    after = state(
        {"role": "label", "name": "clicked 1", "text": "clicked 1"},
        {"role": "check box", "name": "Subscribe", "states": ["checked", "enabled"]},
        {"role": "text", "name": "Name", "text": "hello"},
        {"role": "slider", "name": "Volume", "value": {"current": 40, "minimum": 0, "maximum": 100}},
        {"role": "dialog", "name": "Saved"},
    )
    assert described(before, after) == [
        'removed push button "Gone"',
        'added dialog "Saved"',
        "label \"clicked 1\": renamed 'clicked 0' → 'clicked 1'",
        "check box \"Subscribe\": states None → 'checked'",
        "text \"Name\": text '' → 'hello'",
        "slider \"Volume\": value '0' → '40'",
    ]
    changes, _ = diff_states(before, after)
    assert {change.where for change in changes} == {'frame "Form"'}


def test_an_unchanged_tree_has_no_changes_and_a_huge_one_is_capped() -> None:
    rows = [{"role": "list item", "name": f"Row {n}"} for n in range(MAX_CHANGES + 50)]
    assert described(state(*rows), state(*rows)) == []
    changes, more = diff_states(state(), state(*rows))
    assert len(changes) == MAX_CHANGES and more == 50
