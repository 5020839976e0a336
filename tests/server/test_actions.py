"""Input actions and accessibility state over MCP, on the real GTK, Qt and Tk form fixtures in a
real rig: one suite, run on every toolkit in tests/toolkits.py that has what a test needs.

Each assertion reads the app's own view (its JSON log) and, where it exists, the accessibility tree.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from tests.apps._form_content import BUTTON_DESCRIPTION, LIST_ROWS
from tests.polling import poll
from tests.rigprocs import SYSTEM_PYTHON
from tests.server.helpers import null_fields_described_as_absent
from tests.server.rigproc import APPS, FormRig, read_events
from tests.toolkits import MENU_CLICK_AFTER_S, Capability, Toolkit, needs, only_on, without

UNICODE = "Grüße, Ñandú — 東京 😀\nline 2"
#: How each backend types text: what type_text reports as its ``path``.
TYPING_PATH = {"x11": "xtest", "sway": "virtual-keyboard"}
#: Why the tests of the server's own checks run on one toolkit: the app never sees these calls.
SERVER_CHECK = "checks the server's own handling of the call, which no toolkit takes part in"


def by_role_and_name(elements: list[dict[str, Any]], role: str, name: str) -> dict[str, Any]:
    matches = [e for e in elements if e["role"] == role and e["name"] == name]
    assert len(matches) == 1, [(e["role"], e["name"]) for e in elements]
    return matches[0]


def assert_bounds_near(bounds: dict[str, int], logged: dict[str, int], slack: int) -> None:
    for key in ("x", "y", "width", "height"):
        assert abs(bounds[key] - logged[key]) <= slack, (bounds, logged)


def first_visible_row(form: FormRig, toolkit: Toolkit) -> int:
    last = form.last(toolkit.list_event)
    return int(last[toolkit.list_first_field]) if last else 0


def scroll_the_list_down(form: FormRig, toolkit: Toolkit) -> int:
    """Scroll the list by the mouse wheel; the first visible row (0-based) once it has moved."""
    x, y = form.widget_center(toolkit.list_widget)
    first = first_visible_row(form, toolkit)
    form.ok("scroll", {"x": x, "y": y, "direction": "down", "amount": 5})
    field = toolkit.list_first_field
    return int(form.wait_event(toolkit.list_event, lambda e: e[field] > first)[field])


@needs(Capability.A11Y_TREE)
def test_app_state_lists_the_form_with_bounds_the_app_reports(
    toolkit_form: FormRig, toolkit: Toolkit
) -> None:
    state = toolkit_form.ok("get_app_state", {"pid": toolkit_form.pid, "include_elements": True})
    assert state["text"].splitlines()[0].startswith("app ")
    elements = state["elements"]
    entry = by_role_and_name(elements, "text", "Name")
    button = by_role_and_name(elements, "push button", "Click me")
    slider = by_role_and_name(elements, "slider", "Volume")
    # In screen pixels on every backend (GTK under Wayland gives them relative to its window).
    assert_bounds_near(entry["bounds"], toolkit_form.widget("entry"), toolkit.bounds_slack_px)
    assert_bounds_near(button["bounds"], toolkit_form.widget("button"), toolkit.bounds_slack_px)
    assert_bounds_near(slider["bounds"], toolkit_form.widget("scale"), toolkit.bounds_slack_px)
    assert tuple(a.lower() for a in button["actions"]) == toolkit.button_actions
    assert "editable" in entry["states"] and entry["text"] == ""
    assert (slider["value"]["minimum"], slider["value"]["maximum"]) == (0, 100)
    rows = [e for e in elements if e["role"] == toolkit.list_row_role and e["name"].startswith("Row ")]
    # The list manages its descendants: only the rows on screen are listed, not all of them.
    assert 5 < len(rows) < LIST_ROWS and rows[0]["name"] == "Row 1"


@needs(Capability.A11Y_TREE)
def test_app_state_is_its_text_unless_the_elements_are_asked_for_and_its_snapshot_is_addressed_all_the_same(
    toolkit_form: FormRig,
) -> None:
    """By default the elements' data is left out (a third of the answer): the text rendering names
    each element's index, by which the snapshot's elements are reached; include_elements=true adds
    the data, which the text rendering shows line for line."""
    lean = toolkit_form.ok("get_app_state", {"pid": toolkit_form.pid})
    full = toolkit_form.ok("get_app_state", {"pid": toolkit_form.pid, "include_elements": True})
    assert "elements" not in lean and lean["element_count"] == full["element_count"] == len(full["elements"])
    assert lean["text"].splitlines()[1:] == full["text"].splitlines()[1:]
    button = by_role_and_name(full["elements"], "push button", "Click me")
    (index,) = re.findall(r'\[(\d+)\] push button "Click me"', lean["text"])
    assert int(index) == button["index"]
    # The line shows what the element's data says, its description too.
    (button_line,) = [line for line in lean["text"].splitlines() if f"[{index}] push button" in line]
    assert (
        button["description"] == BUTTON_DESCRIPTION and f'description="{BUTTON_DESCRIPTION}"' in button_line
    )
    before = (toolkit_form.last("button") or {"count": 0})["count"]
    result = toolkit_form.ok("click", {"element": {"snapshot_id": lean["snapshot_id"], "index": int(index)}})
    assert result["target"]["element"]["name"] == "Click me"
    toolkit_form.wait_event("button", lambda e: e["count"] == before + 1)


@only_on("gtk", why=SERVER_CHECK)
def test_app_state_fields_that_are_null_are_not_described_as_absent(toolkit_form: FormRig) -> None:
    """The output schema tells a client what a result carries: a field that comes as null is not
    one the schema says is left out."""

    async def listed(client: Any) -> Any:
        return (await client.list_tools()).tools

    (tool,) = [tool for tool in toolkit_form.rig.session(listed) if tool.name == "get_app_state"]
    for include_elements in (False, True):
        state = toolkit_form.ok(
            "get_app_state", {"pid": toolkit_form.pid, "include_elements": include_elements}
        )
        assert state["pii_masking"] is None and ("elements" in state) == include_elements
        assert null_fields_described_as_absent(tool.output_schema, state) == []


def test_click_by_point_lands_on_the_button(toolkit_form: FormRig) -> None:
    before = (toolkit_form.last("button") or {"count": 0})["count"]
    x, y = toolkit_form.widget_center("button")
    result = toolkit_form.ok("click", {"x": x, "y": y})
    assert result["target"]["point"] == {"x": x, "y": y} and result["target"]["pid"] == toolkit_form.pid
    toolkit_form.wait_event("button", lambda e: e["count"] == before + 1)


@needs(Capability.A11Y_TREE)
def test_click_by_element_updates_the_label(toolkit_form: FormRig) -> None:
    before = (toolkit_form.last("button") or {"count": 0})["count"]
    result = toolkit_form.ok(
        "click", {"element": {"role": "push button", "name": "Click me", "pid": toolkit_form.pid}}
    )
    assert result["target"]["element"]["name"] == "Click me"
    toolkit_form.wait_event("button", lambda e: e["count"] == before + 1)
    label = toolkit_form.element("label", f"clicked {before + 1}")
    assert label["name"] == f"clicked {before + 1}"


@without(Capability.A11Y_TREE)
def test_app_state_without_a11y_is_a11y_unavailable(toolkit_form: FormRig) -> None:
    error = toolkit_form.error("get_app_state", {"pid": toolkit_form.pid})
    assert error["code"] == "A11Y_UNAVAILABLE"


@without(Capability.A11Y_TREE)
def test_typed_text_without_a11y_lands_but_is_unverifiable(toolkit_form: FormRig, toolkit: Toolkit) -> None:
    x, y = toolkit_form.widget_center(toolkit.text_widget)
    toolkit_form.ok("click", {"x": x, "y": y})
    result = toolkit_form.ok("type_text", {"text": UNICODE})
    assert result["effect"] == "unverifiable"
    toolkit_form.wait_event(toolkit.text_widget, lambda e: e["text"].rstrip("\n") == UNICODE)


@needs(Capability.A11Y_TREE)
def test_type_unicode_lands_exactly_in_the_text_view(toolkit_form: FormRig, backend: str) -> None:
    notes = toolkit_form.element("text", "Notes")
    result = toolkit_form.ok(
        "type_text",
        {"text": UNICODE, "element": {"snapshot_id": notes["snapshot_id"], "index": notes["index"]}},
    )
    assert result["effect"] == "confirmed", result["evidence"]
    assert result["detail"]["path"] == TYPING_PATH[backend]
    toolkit_form.wait_event("textview", lambda e: e["text"] == UNICODE)
    assert toolkit_form.element("text", "Notes")["text"] == UNICODE


@needs(Capability.A11Y_TREE)
def test_type_unicode_by_element_lands_exactly_in_the_entry(toolkit_form: FormRig) -> None:
    line = UNICODE.split("\n")[0]
    name = {"role": "text", "name": "Name", "pid": toolkit_form.pid}
    toolkit_form.ok("set_value", {"element": name, "value": ""})
    result = toolkit_form.ok("type_text", {"text": line, "element": name})
    assert result["effect"] == "confirmed", result["evidence"]
    toolkit_form.wait_event("entry", lambda e: e["text"] == line)
    assert toolkit_form.element("text", "Name")["text"] == line


@needs(Capability.A11Y_TREE)
def test_the_next_app_state_shows_each_change_and_says_how_fresh_it_is(toolkit_form: FormRig) -> None:
    """Over MCP, the get_app_state after a change shows it: a row added, a label renamed, an entry
    typed into (the live mirror serves the tree; it must never serve it stale)."""
    pid = toolkit_form.pid
    first = toolkit_form.call("get_app_state", {"pid": pid})  # the live mirror holds the tree
    assert json.loads(first.content[-1].text) == first.structured_content, "the text block is the same JSON"
    added = len(read_events(toolkit_form.log, "row_added")) + 1
    os.kill(pid, signal.SIGUSR1)  # the form inserts a row at the top of its list
    toolkit_form.wait_event("row_added", lambda e: e["name"] == f"Added row {added}")
    state = toolkit_form.ok("get_app_state", {"pid": pid, "include_elements": True})
    assert f"Added row {added}" in {e["name"] for e in state["elements"]}
    assert state["source"] in ("mirror", "fetch") and state["tree_age_ms"] >= 0

    clicks = len(read_events(toolkit_form.log, "button")) + 1
    toolkit_form.ok("click", {"element": {"role": "push button", "name": "Click me", "pid": pid}})
    toolkit_form.wait_event("button", lambda e: e["count"] == clicks)  # the status label is renamed
    labels = toolkit_form.ok(
        "get_app_state", {"pid": pid, "role": "label", "name": "clicked", "include_elements": True}
    )["elements"]
    assert [e["name"] for e in labels] == [f"clicked {clicks}"]

    typed = f"typed {clicks}"
    name = {"role": "text", "name": "Name", "pid": pid}
    toolkit_form.ok("set_value", {"element": name, "value": ""})
    toolkit_form.ok("type_text", {"text": typed, "element": name})
    toolkit_form.wait_event("entry", lambda e: e["text"] == typed)
    state = toolkit_form.ok("get_app_state", {"pid": pid, "include_elements": True})
    assert by_role_and_name(state["elements"], "text", "Name")["text"] == typed
    assert state["newest_event_age_ms"] is not None, "the changes came as events"

    refreshed = toolkit_form.ok("get_app_state", {"pid": pid, "refresh": True})
    assert refreshed["source"] == "fetch" and refreshed["newest_event_age_ms"] is None


@needs(Capability.A11Y_TREE)
def test_select_all_and_type_replaces_the_entry(toolkit_form: FormRig) -> None:
    toolkit_form.ok(
        "set_value",
        {"element": {"role": "text", "name": "Name", "pid": toolkit_form.pid}, "value": "old text"},
    )
    toolkit_form.wait_event("entry", lambda e: e["text"] == "old text")
    x, y = toolkit_form.widget_center("entry")
    toolkit_form.ok("click", {"x": x, "y": y})
    toolkit_form.ok("hotkey", {"keys": ["ctrl", "a"]})
    result = toolkit_form.ok("type_text", {"text": "Grüße new"})
    assert result["effect"] == "confirmed", result["evidence"]
    toolkit_form.wait_event("entry", lambda e: e["text"] == "Grüße new")


@needs(Capability.A11Y_TREE)
def test_set_value_on_entry_and_slider(toolkit_form: FormRig) -> None:
    result = toolkit_form.ok(
        "set_value",
        {"element": {"role": "text", "name": "Name", "pid": toolkit_form.pid}, "value": "set by a11y"},
    )
    assert result["effect"] == "confirmed", result["evidence"]
    toolkit_form.wait_event("entry", lambda e: e["text"] == "set by a11y")
    slider = toolkit_form.element("slider", "Volume")
    result = toolkit_form.ok(
        "set_value",
        {"element": {"snapshot_id": slider["snapshot_id"], "index": slider["index"]}, "value": 42},
    )
    assert result["effect"] == "confirmed", result["evidence"]
    toolkit_form.wait_event("scale", lambda e: e["value"] == 42)


@needs(Capability.A11Y_TREE)
def test_drag_moves_the_slider(toolkit_form: FormRig, toolkit: Toolkit) -> None:
    toolkit_form.ok("set_value", {"element": {"role": "slider", "pid": toolkit_form.pid}, "value": 0})
    toolkit_form.wait_event("scale", lambda e: e["value"] == 0)
    b = toolkit_form.element("slider", "Volume")["bounds"]
    y = b["y"] + b["height"] // 2
    from_x, to_x = b["x"] + toolkit.slider_grab_px, b["x"] + b["width"] * 3 // 4
    toolkit_form.ok("drag", {"from_x": from_x, "from_y": y, "to_x": to_x, "to_y": y, "steps": 15})
    event = toolkit_form.wait_event("scale", lambda e: e["value"] > 30)
    assert event["value"] > 30


def test_scroll_moves_the_list(toolkit_form: FormRig, toolkit: Toolkit) -> None:
    scroll_the_list_down(toolkit_form, toolkit)


@needs(Capability.A11Y_TREE)
def test_scrolled_list_shows_the_rows_now_on_screen(toolkit_form: FormRig, toolkit: Toolkit) -> None:
    first = scroll_the_list_down(toolkit_form, toolkit)
    rows = toolkit_form.ok(
        "get_app_state", {"pid": toolkit_form.pid, "role": toolkit.list_row_role, "include_elements": True}
    )
    on_screen = {r["name"] for r in rows["elements"] if r["bounds"] is not None}
    assert f"Row {first + 1}" in {r["name"] for r in rows["elements"]}
    assert "Row 1" not in on_screen


@needs(Capability.CONTEXT_MENU_IN_TREE)
def test_right_click_opens_a_context_menu_in_the_tree(toolkit_form: FormRig) -> None:
    x, y = toolkit_form.widget_center("entry")
    toolkit_form.ok("right_click", {"x": x, "y": y})
    try:
        found = toolkit_form.ok(
            "wait_for",
            {"role": "menu item", "name": "Select All", "pid": toolkit_form.pid, "timeout_ms": 5000},
        )
        assert found["element"]["name"] == "Select All"
    finally:
        toolkit_form.ok("press_key", {"key": "Escape"})


@needs(Capability.CONTEXT_MENU_IN_TREE)
def test_a_context_menu_item_clicked_by_element_acts(toolkit_form: FormRig) -> None:
    """The menu is a popup (under Wayland a surface of its own, positioned by the compositor at
    the pointer, where GTK does not say): its item's bounds must be screen pixels for the click
    to land on it."""
    name = {"role": "text", "name": "Name", "pid": toolkit_form.pid}
    toolkit_form.ok("set_value", {"element": name, "value": "old text"})
    toolkit_form.wait_event("entry", lambda e: e["text"] == "old text")
    try:
        x, y = toolkit_form.widget_center("entry")
        toolkit_form.ok("click", {"x": x, "y": y})  # the caret lands after the text, nothing selected
        toolkit_form.ok("right_click", {"x": x, "y": y})
        opened_at = time.monotonic()
        select_all = {"role": "menu item", "name": "Select All", "pid": toolkit_form.pid}
        toolkit_form.ok("wait_for", {**select_all, "timeout_ms": 5000})
        # GTK ignores a click on a menu item in the first half second of its menu (as a person's
        # press-drag-release); the app's own timing, so a deadline, not a poll.
        time.sleep(max(0.0, opened_at + MENU_CLICK_AFTER_S - time.monotonic()))
        toolkit_form.ok("click", {"element": select_all})

        def menu_showing() -> bool:
            state = toolkit_form.ok("get_app_state", {"pid": toolkit_form.pid, "include_elements": True})
            return any(
                e["name"] == "Select All" and "showing" in e.get("states", []) for e in state["elements"]
            )

        # Keys typed while the menu still holds the keyboard go to it (seen on sway under load).
        poll("the context menu closed", lambda: not menu_showing())
        result = toolkit_form.ok("type_text", {"text": "new"})
        assert result["effect"] == "confirmed", result["evidence"]
        toolkit_form.wait_event("entry", lambda e: e["text"] == "new")
    finally:
        # Left empty, as the form starts: the rig's tests run in whatever order pytest groups them.
        toolkit_form.ok("press_key", {"key": "Escape"})
        toolkit_form.ok("set_value", {"element": name, "value": ""})
        toolkit_form.wait_event("entry", lambda e: e["text"] == "")


@only_on("gtk", why=SERVER_CHECK)
def test_bad_input_is_refused_and_changes_nothing(toolkit_form: FormRig) -> None:
    events_before = len(read_events(toolkit_form.log))
    assert toolkit_form.error("click", {"x": 5000, "y": 10})["code"] == "INVALID_ARGUMENT"
    error = toolkit_form.error("press_key", {"key": "Retrun"})
    assert error["code"] == "INVALID_ARGUMENT" and "Return" in error["details"]["suggestions"]
    assert toolkit_form.error("hotkey", {"keys": []})["code"] == "INVALID_ARGUMENT"
    assert toolkit_form.error("get_app_state", {"pid": 999_999})["code"] == "APP_NOT_RUNNING"
    assert toolkit_form.error("kill_app", {"pid": 999_999})["code"] == "APP_NOT_RUNNING"
    stale = toolkit_form.error("click", {"element": {"snapshot_id": "0123456789ab", "index": 3}})
    assert stale["code"] == "ELEMENT_NOT_FOUND" and stale["details"]["reason"] == "unknown"
    assert toolkit_form.error("click", {"x": 10})["code"] == "INVALID_ARGUMENT"
    assert len(read_events(toolkit_form.log)) == events_before


@only_on("gtk", why=SERVER_CHECK)
@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("launch_app", {"command": ["xterm"], "env": {"A=B": "1"}}, "env.A=B.[key]"),
        ("launch_app", {"command": ["xterm"], "env": {"A\0B": "1"}}, "env.A\0B.[key]"),
        ("launch_app", {"command": ["xterm"], "env": {"": "1"}}, "env..[key]"),
        ("launch_app", {"command": ["xterm"], "env": {"A": "1\0"}}, "env.A"),
        ("launch_app", {"command": ["xterm"], "cwd": "/tmp\0x"}, "cwd"),
        ("launch_app", {"command": ["xterm\0"]}, "command.0"),
        ("launch_app", {"command": ["xterm", "-T", "a\0b"]}, "command.2"),
        ("launch_app", {"command": [""]}, "command"),
        ("set_value", {"element": {"role": "text", "name": "Name", "pid": 1}, "value": "a\0b"}, "value"),
    ],
)
def test_strings_the_os_cannot_take_are_invalid_arguments(
    toolkit_form: FormRig, tool: str, arguments: dict[str, Any], field: str
) -> None:
    events_before = len(read_events(toolkit_form.log))
    error = toolkit_form.error(
        tool, {**arguments, "wait_for_window": False} if tool == "launch_app" else arguments
    )
    assert error["code"] == "INVALID_ARGUMENT", error
    assert [p["field"] for p in error["details"]["problems"]] == [field]
    assert len(read_events(toolkit_form.log)) == events_before


@only_on("gtk", why=SERVER_CHECK)
def test_nul_in_typed_text_or_key_names_is_invalid_argument(toolkit_form: FormRig) -> None:
    assert toolkit_form.error("type_text", {"text": "a\0b"})["code"] == "INVALID_ARGUMENT"
    assert toolkit_form.error("press_key", {"key": "a\0"})["code"] == "INVALID_ARGUMENT"
    assert toolkit_form.error("hotkey", {"keys": ["ctrl", "\0"]})["code"] == "INVALID_ARGUMENT"


@only_on("gtk", why=SERVER_CHECK)
def test_launch_app_then_wait_for_its_window(toolkit_form: FormRig, tmp_path: Path) -> None:
    log = tmp_path / "late.log"
    launched = toolkit_form.ok(
        "launch_app",
        {
            "command": [
                SYSTEM_PYTHON,
                str(APPS / "tk_color.py"),
                "--title",
                "Late Window",
                "--color",
                "#3040f0",
                "--log",
                str(log),
            ],
            "wait_for_window": False,
        },
    )
    found = toolkit_form.ok("wait_for", {"window_title": "Late Window", "timeout_ms": 15000})
    assert found["window"]["pid"] == launched["pid"]
    focused = toolkit_form.ok("focus_window", {"window_id": found["window"]["id"]})
    assert focused["effect"] == "confirmed"
    killed = toolkit_form.ok("kill_app", {"pid": launched["pid"]})
    assert killed["exited"]
    timeout = toolkit_form.error("wait_for", {"window_title": "Never Appears", "timeout_ms": 300})
    assert timeout["code"] == "TIMEOUT" and timeout["details"]["observed"]


@only_on("gtk", why=SERVER_CHECK)
def test_action_with_screenshot_and_move_cursor(toolkit_form: FormRig) -> None:
    result = toolkit_form.call("move_cursor", {"x": 20, "y": 30, "include_screenshot": True})
    assert not result.is_error
    assert result.structured_content["effect"] == "confirmed"
    assert any(c.type == "image" for c in result.content)
    assert toolkit_form.ok("get_cursor_position", {})["x"] == 20


@only_on("gtk", why="opens a second window of the same title: only the GTK form can")
def test_elements_of_a_second_window_with_the_same_title_are_where_it_is(toolkit_form: FormRig) -> None:
    """Two windows of one app share a title: each element must still be placed in its own window
    (last in this module: the second window makes sway tile the form anew)."""
    twins = len(read_events(toolkit_form.log, "twin"))
    os.kill(toolkit_form.pid, signal.SIGUSR2)  # the form opens a twin window with a "Twin button"
    try:
        toolkit_form.wait_event(
            "twin", lambda e: e["open"] and len(read_events(toolkit_form.log, "twin")) > twins
        )
        # The form tells it opened the twin when GTK shows it; a compositor lists it once mapped.

        def both_windows() -> list[dict[str, Any]] | None:
            windows: list[dict[str, Any]] = toolkit_form.ok("list_windows", {"pid": toolkit_form.pid})[
                "windows"
            ]
            return windows if len(windows) == 2 and any(w["focused"] for w in windows) else None

        windows = poll("the twin window listed beside the form, one of them focused", both_windows)
        assert windows[0]["title"] == windows[1]["title"]
        button = {"role": "push button", "name": "Twin button", "pid": toolkit_form.pid}
        found = toolkit_form.ok("wait_for", {**button, "timeout_ms": 5000})["element"]
        (twin,) = [w["bounds"] for w in windows if w["focused"]]  # a new window takes the focus
        b = found["bounds"]
        assert twin["x"] <= b["x"] and b["x"] + b["width"] <= twin["x"] + twin["width"], (b, twin)
        assert twin["y"] <= b["y"] and b["y"] + b["height"] <= twin["y"] + twin["height"], (b, twin)
        toolkit_form.ok("click", {"element": button})
        toolkit_form.wait_event("twin_button", lambda e: e["count"] >= 1)
    finally:
        os.kill(toolkit_form.pid, signal.SIGUSR2)
        toolkit_form.wait_event("twin", lambda e: not e["open"])
