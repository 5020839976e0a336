"""Input actions and accessibility state over MCP on the Qt form (PySide6) in a real rig.

The same checks as the GTK form's in test_actions.py, against Qt's AT-SPI bridge, which differs:
no AT-SPI Cache content, no peer-to-peer address, no Properties.GetAll, and other action names
("Press", "Set Focus", "Toggle").
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from tests.server.rigproc import FormRig, start_form
from tests.server.test_actions import UNICODE

#: How far accessibility bounds may stray from the geometry the app logs itself.
BOUNDS_SLACK_PX = 3


@pytest.fixture(scope="module")
def qt_form(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FormRig]:
    # PySide6 is a dev dependency of the project, so the app runs in the tests' own interpreter.
    form = start_form(tmp_path_factory.mktemp("qt-form"), "qt_form", "Qt Form", python=sys.executable)
    yield form
    form.rig.stop()


def by_role_and_name(elements: list[dict[str, Any]], role: str, name: str) -> dict[str, Any]:
    matches = [e for e in elements if e["role"] == role and e["name"] == name]
    assert len(matches) == 1, [(e["role"], e["name"]) for e in elements]
    return matches[0]


def assert_bounds_near(bounds: dict[str, int], logged: dict[str, int]) -> None:
    for key in ("x", "y", "width", "height"):
        assert abs(bounds[key] - logged[key]) <= BOUNDS_SLACK_PX, (bounds, logged)


def test_app_state_lists_the_form_with_bounds_the_app_reports(qt_form: FormRig) -> None:
    state = qt_form.ok("get_app_state", {"pid": qt_form.pid})
    elements = state["elements"]
    widgets = qt_form.ready["widgets"]
    entry = by_role_and_name(elements, "text", "Name")
    button = by_role_and_name(elements, "push button", "Click me")
    slider = by_role_and_name(elements, "slider", "Volume")
    assert_bounds_near(entry["bounds"], widgets["entry"])
    assert_bounds_near(button["bounds"], widgets["button"])
    assert_bounds_near(slider["bounds"], widgets["scale"])
    assert "Press" in button["actions"]  # GTK calls it "click"
    assert "editable" in entry["states"] and entry["text"] == ""
    assert (slider["value"]["minimum"], slider["value"]["maximum"]) == (0, 100)
    rows = [e for e in elements if e["role"] == "list item" and e["name"].startswith("Row ")]
    # The list manages its descendants: only the rows on screen are listed, not all 200.
    assert 5 < len(rows) < 200 and rows[0]["name"] == "Row 1"


def test_type_unicode_lands_exactly_in_the_text_edit_and_line_edit(qt_form: FormRig) -> None:
    notes = qt_form.element("text", "Notes")
    result = qt_form.ok(
        "type_text",
        {"text": UNICODE, "element": {"snapshot_id": notes["snapshot_id"], "index": notes["index"]}},
    )
    assert result["effect"] == "confirmed", result["evidence"]
    assert result["detail"]["path"] == "xtest"
    qt_form.wait_event("textview", lambda e: e["text"] == UNICODE)
    assert qt_form.element("text", "Notes")["text"] == UNICODE

    line = UNICODE.split("\n")[0]
    qt_form.ok("set_value", {"element": {"role": "text", "name": "Name", "pid": qt_form.pid}, "value": ""})
    result = qt_form.ok(
        "type_text", {"text": line, "element": {"role": "text", "name": "Name", "pid": qt_form.pid}}
    )
    assert result["effect"] == "confirmed", result["evidence"]
    qt_form.wait_event("entry", lambda e: e["text"] == line)
    assert qt_form.element("text", "Name")["text"] == line


def test_click_by_point_and_by_element_updates_the_label(qt_form: FormRig) -> None:
    before = (qt_form.last("button") or {"count": 0})["count"]
    x, y = qt_form.widget_center("button")
    result = qt_form.ok("click", {"x": x, "y": y})
    assert result["target"]["pid"] == qt_form.pid
    qt_form.wait_event("button", lambda e: e["count"] == before + 1)
    result = qt_form.ok("click", {"element": {"role": "push button", "name": "Click me", "pid": qt_form.pid}})
    assert result["target"]["element"]["name"] == "Click me"
    qt_form.wait_event("button", lambda e: e["count"] == before + 2)
    assert qt_form.element("label", f"clicked {before + 2}")["name"] == f"clicked {before + 2}"


def test_select_all_and_type_replaces_the_line_edit(qt_form: FormRig) -> None:
    qt_form.ok(
        "set_value", {"element": {"role": "text", "name": "Name", "pid": qt_form.pid}, "value": "old text"}
    )
    qt_form.wait_event("entry", lambda e: e["text"] == "old text")
    x, y = qt_form.widget_center("entry")
    qt_form.ok("click", {"x": x, "y": y})
    qt_form.ok("hotkey", {"keys": ["ctrl", "a"]})
    result = qt_form.ok("type_text", {"text": "Grüße new"})
    assert result["effect"] == "confirmed", result["evidence"]
    qt_form.wait_event("entry", lambda e: e["text"] == "Grüße new")


def test_set_value_on_line_edit_and_slider(qt_form: FormRig) -> None:
    result = qt_form.ok(
        "set_value",
        {"element": {"role": "text", "name": "Name", "pid": qt_form.pid}, "value": "set by a11y"},
    )
    assert result["effect"] == "confirmed", result["evidence"]
    qt_form.wait_event("entry", lambda e: e["text"] == "set by a11y")
    slider = qt_form.element("slider", "Volume")
    result = qt_form.ok(
        "set_value",
        {"element": {"snapshot_id": slider["snapshot_id"], "index": slider["index"]}, "value": 42},
    )
    assert result["effect"] == "confirmed", result["evidence"]
    qt_form.wait_event("scale", lambda e: e["value"] == 42)


def test_drag_moves_the_slider(qt_form: FormRig) -> None:
    qt_form.ok("set_value", {"element": {"role": "slider", "pid": qt_form.pid}, "value": 0})
    qt_form.wait_event("scale", lambda e: e["value"] == 0)
    b = qt_form.element("slider", "Volume")["bounds"]
    y = b["y"] + b["height"] // 2
    # Unlike GTK's, a Qt slider does not jump to a press on its groove: start on the handle,
    # which sits at the left end at 0.
    qt_form.ok(
        "drag",
        {"from_x": b["x"] + 4, "from_y": y, "to_x": b["x"] + b["width"] * 3 // 4, "to_y": y, "steps": 15},
    )
    event = qt_form.wait_event("scale", lambda e: e["value"] > 30)
    assert event["value"] > 30


def test_scroll_moves_the_list(qt_form: FormRig) -> None:
    x, y = qt_form.widget_center("list")
    first = (qt_form.last("list_view") or {"first_visible": 0})["first_visible"]
    qt_form.ok("scroll", {"x": x, "y": y, "direction": "down", "amount": 5})
    moved = qt_form.wait_event("list_view", lambda e: e["first_visible"] > first)
    rows = qt_form.ok("get_app_state", {"pid": qt_form.pid, "role": "list item"})["elements"]
    assert f"Row {moved['first_visible'] + 1}" in {r["name"] for r in rows}
    assert "Row 1" not in {r["name"] for r in rows if r["bounds"] is not None}
