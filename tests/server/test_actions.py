"""Input actions and accessibility state over MCP, on real GTK and Tk apps in a real rig.

Each assertion reads the app's own view (its JSON log) and, where it exists, the accessibility tree.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.server.rigproc import APPS, SYSTEM_PYTHON, FormRig, read_events, start_form

UNICODE = "Grüße, Ñandú — 東京 😀\nline 2"


@pytest.fixture(scope="module")
def gtk_form(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FormRig]:
    form = start_form(tmp_path_factory.mktemp("gtk-form"), "gtk_form", "GTK Form")
    yield form
    form.rig.stop()


@pytest.fixture(scope="module")
def tk_form(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FormRig]:
    form = start_form(tmp_path_factory.mktemp("tk-form"), "tk_form", "Tk Form")
    yield form
    form.rig.stop()


def test_app_state_lists_the_form_with_bounds_the_app_reports(gtk_form: FormRig) -> None:
    state = gtk_form.ok("get_app_state", {"pid": gtk_form.pid})
    roles = {(e["role"], e["name"]) for e in state["elements"]}
    assert ("push button", "Click me") in roles
    assert state["text"].splitlines()[0].startswith("app ")
    button = next(e for e in state["elements"] if e["role"] == "push button")
    assert button["bounds"] == gtk_form.ready["widgets"]["button"]
    assert [a.lower() for a in button["actions"]] == ["click"]
    slider = next(e for e in state["elements"] if e["role"] == "slider")
    assert slider["value"]["maximum"] == 100


def test_click_by_point_and_by_element_updates_the_label(gtk_form: FormRig) -> None:
    before = (gtk_form.last("button") or {"count": 0})["count"]
    x, y = gtk_form.widget_center("button")
    result = gtk_form.ok("click", {"x": x, "y": y})
    assert result["target"]["point"] == {"x": x, "y": y} and result["target"]["pid"] == gtk_form.pid
    gtk_form.wait_event("button", lambda e: e["count"] == before + 1)
    result = gtk_form.ok(
        "click", {"element": {"role": "push button", "name": "Click me", "pid": gtk_form.pid}}
    )
    assert result["target"]["element"]["name"] == "Click me"
    gtk_form.wait_event("button", lambda e: e["count"] == before + 2)
    label = gtk_form.element("label", f"clicked {before + 2}")
    assert label["name"] == f"clicked {before + 2}"


def test_type_unicode_lands_exactly_in_the_text_view(gtk_form: FormRig) -> None:
    notes = gtk_form.element("text", "Notes")
    result = gtk_form.ok(
        "type_text",
        {"text": UNICODE, "element": {"snapshot_id": notes["snapshot_id"], "index": notes["index"]}},
    )
    assert result["effect"] == "confirmed", result["evidence"]
    assert result["detail"]["path"] == "xtest"
    gtk_form.wait_event("textview", lambda e: e["text"] == UNICODE)
    assert gtk_form.element("text", "Notes")["text"] == UNICODE


def test_select_all_and_type_replaces_the_entry(gtk_form: FormRig) -> None:
    gtk_form.ok(
        "set_value", {"element": {"role": "text", "name": "Name", "pid": gtk_form.pid}, "value": "old text"}
    )
    gtk_form.wait_event("entry", lambda e: e["text"] == "old text")
    x, y = gtk_form.widget_center("entry")
    gtk_form.ok("click", {"x": x, "y": y})
    gtk_form.ok("hotkey", {"keys": ["ctrl", "a"]})
    result = gtk_form.ok("type_text", {"text": "Grüße new"})
    assert result["effect"] == "confirmed", result["evidence"]
    gtk_form.wait_event("entry", lambda e: e["text"] == "Grüße new")


def test_set_value_on_entry_and_slider(gtk_form: FormRig) -> None:
    result = gtk_form.ok(
        "set_value",
        {"element": {"role": "text", "name": "Name", "pid": gtk_form.pid}, "value": "set by a11y"},
    )
    assert result["effect"] == "confirmed"
    gtk_form.wait_event("entry", lambda e: e["text"] == "set by a11y")
    slider = gtk_form.element("slider")
    result = gtk_form.ok(
        "set_value",
        {"element": {"snapshot_id": slider["snapshot_id"], "index": slider["index"]}, "value": 42},
    )
    assert result["effect"] == "confirmed"
    gtk_form.wait_event("scale", lambda e: e["value"] == 42)


def test_drag_moves_the_slider(gtk_form: FormRig) -> None:
    gtk_form.ok("set_value", {"element": {"role": "slider", "pid": gtk_form.pid}, "value": 0})
    gtk_form.wait_event("scale", lambda e: e["value"] == 0)
    scale = gtk_form.element("slider")
    b = scale["bounds"]
    y = b["y"] + b["height"] // 2
    # GTK sliders jump to the press point with the primary button; the drag carries on from there.
    gtk_form.ok(
        "drag",
        {"from_x": b["x"] + 10, "from_y": y, "to_x": b["x"] + b["width"] * 3 // 4, "to_y": y, "steps": 15},
    )
    event = gtk_form.wait_event("scale", lambda e: e["value"] > 30)
    assert event["value"] > 30


def test_scroll_moves_the_list(gtk_form: FormRig) -> None:
    x, y = gtk_form.widget_center("list")
    first = (gtk_form.last("list_view") or {"first_visible": 0})["first_visible"]
    gtk_form.ok("scroll", {"x": x, "y": y, "direction": "down", "amount": 5})
    gtk_form.wait_event("list_view", lambda e: e["first_visible"] > first)


def test_right_click_opens_a_context_menu_in_the_tree(gtk_form: FormRig) -> None:
    x, y = gtk_form.widget_center("entry")
    gtk_form.ok("right_click", {"x": x, "y": y})
    try:
        found = gtk_form.ok(
            "wait_for", {"role": "menu item", "name": "Select All", "pid": gtk_form.pid, "timeout_ms": 5000}
        )
        assert found["element"]["name"] == "Select All"
    finally:
        gtk_form.ok("press_key", {"key": "Escape"})


def test_bad_input_is_refused_and_changes_nothing(gtk_form: FormRig) -> None:
    events_before = len(read_events(gtk_form.log))
    assert gtk_form.error("click", {"x": 5000, "y": 10})["code"] == "INVALID_ARGUMENT"
    error = gtk_form.error("press_key", {"key": "Retrun"})
    assert error["code"] == "INVALID_ARGUMENT" and "Return" in error["details"]["suggestions"]
    assert gtk_form.error("hotkey", {"keys": []})["code"] == "INVALID_ARGUMENT"
    assert gtk_form.error("get_app_state", {"pid": 999_999})["code"] == "APP_NOT_RUNNING"
    assert gtk_form.error("kill_app", {"pid": 999_999})["code"] == "APP_NOT_RUNNING"
    stale = gtk_form.error("click", {"element": {"snapshot_id": "0123456789ab", "index": 3}})
    assert stale["code"] == "ELEMENT_NOT_FOUND" and stale["details"]["reason"] == "unknown"
    assert gtk_form.error("click", {"x": 10})["code"] == "INVALID_ARGUMENT"
    assert len(read_events(gtk_form.log)) == events_before


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
    gtk_form: FormRig, tool: str, arguments: dict[str, Any], field: str
) -> None:
    events_before = len(read_events(gtk_form.log))
    error = gtk_form.error(tool, {**arguments, "wait_for_window": False} if tool == "launch_app" else arguments)
    assert error["code"] == "INVALID_ARGUMENT", error
    assert [p["field"] for p in error["details"]["problems"]] == [field]
    assert len(read_events(gtk_form.log)) == events_before


def test_nul_in_typed_text_or_key_names_is_invalid_argument(gtk_form: FormRig) -> None:
    assert gtk_form.error("type_text", {"text": "a\0b"})["code"] == "INVALID_ARGUMENT"
    assert gtk_form.error("press_key", {"key": "a\0"})["code"] == "INVALID_ARGUMENT"
    assert gtk_form.error("hotkey", {"keys": ["ctrl", "\0"]})["code"] == "INVALID_ARGUMENT"


def test_launch_app_then_wait_for_its_window(gtk_form: FormRig, tmp_path: Path) -> None:
    log = tmp_path / "late.log"
    launched = gtk_form.ok(
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
    found = gtk_form.ok("wait_for", {"window_title": "Late Window", "timeout_ms": 15000})
    assert found["window"]["pid"] == launched["pid"]
    focused = gtk_form.ok("focus_window", {"window_id": found["window"]["id"]})
    assert focused["effect"] == "confirmed"
    killed = gtk_form.ok("kill_app", {"pid": launched["pid"]})
    assert killed["exited"]
    timeout = gtk_form.error("wait_for", {"window_title": "Never Appears", "timeout_ms": 300})
    assert timeout["code"] == "TIMEOUT" and timeout["details"]["observed"]


def test_tk_has_no_a11y_but_input_lands(tk_form: FormRig) -> None:
    error = tk_form.error("get_app_state", {"pid": tk_form.pid})
    assert error["code"] == "A11Y_UNAVAILABLE"
    before = (tk_form.last("button") or {"count": 0})["count"]
    x, y = tk_form.widget_center("button")
    tk_form.ok("click", {"x": x, "y": y})
    tk_form.wait_event("button", lambda e: e["count"] == before + 1)
    x, y = tk_form.widget_center("text")
    tk_form.ok("click", {"x": x, "y": y})
    result = tk_form.ok("type_text", {"text": UNICODE})
    assert result["effect"] == "unverifiable"
    tk_form.wait_event("text", lambda e: e["text"].rstrip("\n") == UNICODE)


def test_action_with_screenshot_and_move_cursor(gtk_form: FormRig) -> None:
    result = gtk_form.call("move_cursor", {"x": 20, "y": 30, "include_screenshot": True})
    assert not result.is_error
    assert result.structured_content["effect"] == "confirmed"
    assert any(c.type == "image" for c in result.content)
    assert gtk_form.ok("get_cursor_position", {})["x"] == 20
