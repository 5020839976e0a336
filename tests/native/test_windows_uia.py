"""UI Automation trees -> the element model, and actions -> patterns (deskrig.a11y.windows_uia)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from deskrig.a11y.tree import ElementQuery, ElementRef, PathStep, Snapshot
from deskrig.a11y.windows_uia import action_pattern, app_root, bounds_of, elements, runtime_id, value_setting
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

from .windows_data import load


def snapshot_of(root: Any, pid: int, **limits: Any) -> Snapshot:
    found, truncated = elements(root, pid, **limits)
    return Snapshot(
        snapshot_id="s1",
        pid=pid,
        app_name=found[0].name,
        bus_name=f"uia:{pid}",
        created_at=datetime.now(UTC),
        fetch_ms=3.0,
        truncated=truncated,
        elements=found,
    )


def snapshot(**limits: Any) -> Snapshot:
    """The recorded window under the application element the Windows source puts above it."""
    data = load("uia_tk_form")
    return snapshot_of(app_root("python.exe", [data["root"]]), data["pid"], **limits)


def test_the_tree_is_flattened_depth_first_with_parents() -> None:
    tree = snapshot()
    assert [(e.index, e.parent, e.depth, e.role, e.name) for e in tree.elements[:7]] == [
        (0, None, 0, "application", "python.exe"),
        (1, 0, 1, "frame", "deskrig form"),
        (2, 1, 2, "title bar", "deskrig form"),
        (3, 2, 3, "push button", "Minimize"),
        (4, 2, 3, "push button", "Close"),
        (5, 1, 2, "panel", ""),
        (6, 5, 3, "text", "Entry"),
    ]
    assert len(tree.elements) == 16 and not tree.truncated
    assert tree.elements[1].child_count == 2
    assert tree.elements[1].ref == ElementRef("uia:7788", "42.394766")
    assert runtime_id(tree.elements[4].ref) == [4, 394766, 2, 2]


def test_properties_become_states_actions_values_and_bounds() -> None:
    tree = snapshot()

    def named(name: str) -> Any:
        return tree.resolve(ElementQuery(name=name, match="exact"))

    entry = named("Entry")
    assert {"focused", "focusable", "editable", "enabled", "showing"} <= set(entry.states)
    assert entry.text == "héllo" and entry.bounds == Bounds(x=306, y=251, width=370, height=28)
    button = named("Click me")
    assert button.actions == ("click",) and "editable" not in button.states
    assert "enabled" not in named("Save").states
    assert "checked" in named("Remember me").states and named("Remember me").actions == ("toggle",)
    volume = named("Volume")
    assert volume.value is not None and (volume.value.current, volume.value.maximum) == (25.0, 100.0)
    # A read-only Value (the title bar's caption) is neither editable nor text.
    title_bar = tree.elements[2]
    assert "editable" not in title_bar.states and title_bar.text is None
    assert named("clicked 0").role == "label"


def test_pattern_properties_count_only_with_their_pattern() -> None:
    sentinel = object()  # what UIA answers for a property of a pattern the element lacks
    plain = {
        "ControlType": 50000,
        "Name": "b",
        "Patterns": ["Invoke"],
        "ToggleState": sentinel,
        "Value": sentinel,
    }
    tree = snapshot_of(plain, 1)
    assert "checked" not in tree.elements[0].states and tree.elements[0].text is None


def test_an_offscreen_element_has_no_bounds_and_is_hidden() -> None:
    rows = [e for e in snapshot().elements if e.role == "list item"]
    assert [r.bounds is not None for r in rows] == [True, True, False]
    assert "showing" not in rows[2].states
    assert "hidden" in rows[2].render_line()
    assert bounds_of({"BoundingRectangle": [float("inf"), 0, 0, 0]}) is None


def test_paths_count_siblings_of_the_same_role_and_name() -> None:
    rows = [e for e in snapshot().elements if e.role == "list item"]
    assert [r.path[-1] for r in rows] == [PathStep("list item", "row", n) for n in range(3)]
    assert [step.role for step in rows[0].path] == ["frame", "panel", "list", "list item"]
    assert snapshot().elements[0].path == ()  # the application, as on Linux


def test_limits_truncate_the_tree() -> None:
    shallow = snapshot(max_depth=2)
    assert [e.depth for e in shallow.elements] == [0, 1, 2, 2] and shallow.truncated
    assert len(snapshot(max_elements=4).elements) == 4 and snapshot(max_elements=4).truncated


def test_the_rendered_outline_reads_like_the_at_spi_one() -> None:
    text = snapshot().render_text()
    assert '[7] push button "Click me" (enabled, focusable) @ 306,380 120x36 actions=click' in text
    assert "value=25 (0..100)" in text


@pytest.mark.parametrize(
    ("name", "action", "pattern"),
    [
        ("Click me", "click", "Invoke"),
        ("Click me", "Press", "Invoke"),
        ("Remember me", "click", "Toggle"),
        ("Remember me", "toggle", "Toggle"),
    ],
)
def test_an_action_picks_its_pattern(name: str, action: str, pattern: str) -> None:
    element = snapshot().resolve(ElementQuery(name=name, match="exact"))
    assert action_pattern(element, action) == pattern


def test_a_list_item_click_selects_it_and_an_unknown_action_is_refused() -> None:
    tree = snapshot()
    row = next(e for e in tree.elements if e.role == "list item")
    assert action_pattern(row, "click") == "SelectionItem"
    with pytest.raises(DeskrigError) as caught:
        action_pattern(tree.resolve(ElementQuery(name="Entry")), "click")
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT
    assert caught.value.details == {"action": "click", "actions": []}


def test_set_value_writes_text_or_a_number_in_range() -> None:
    tree = snapshot()
    assert value_setting(tree.resolve(ElementQuery(name="Entry")), "new") == ("Value", "new")
    assert value_setting(tree.resolve(ElementQuery(name="Volume")), "75") == ("RangeValue", 75.0)
    for name, value in (("Volume", "150"), ("Volume", "loud"), ("Click me", "x")):
        with pytest.raises(DeskrigError) as caught:
            value_setting(tree.resolve(ElementQuery(name=name, match="exact")), value)
        assert caught.value.code == ErrorCode.INVALID_ARGUMENT
    with pytest.raises(DeskrigError):
        value_setting(tree.elements[2], "read-only caption")
