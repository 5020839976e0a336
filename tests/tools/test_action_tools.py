"""Action tools over the scripted desktop: where each action lands (the resolved target), what the
desktop received (its input log), how bad input is refused, and a recorded turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.desktop.scripted_input import InputEvent

from .conftest import EDITOR_PID, GREEN, TERMINAL_PID, RigFactory

pytestmark = pytest.mark.anyio

#: A point on the editor that the terminal does not cover, and one on the terminal.
ON_EDITOR = {"x": 150, "y": 150}
ON_TERMINAL = {"x": 650, "y": 500}


def ids(world: ScriptedDesktop) -> dict[str, int]:
    return {w.title: w.id for w in world.windows()}


async def test_click_lands_on_the_window_under_the_point_and_focuses_it(
    rig: RigFactory, world: ScriptedDesktop
) -> None:
    editor = ids(world)["Editor"]
    async with rig() as tools:
        result = await tools.ok("click", {**ON_EDITOR, "modifiers": ["ctrl"]})
        windows = (await tools.ok("list_windows"))["windows"]

    assert result["target"] == {
        "pid": EDITOR_PID,
        "window_id": editor,
        "window_title": "Editor",
        "point": {"x": 150, "y": 150},
        "element": None,
    }
    assert result["effect"] == "unverifiable"
    assert "pointer read back at (150, 150)" in result["evidence"]
    assert world.events == [
        InputEvent("button", 150, 150, button="left", modifiers=("Control_L",), window_id=editor)
    ]
    assert [(w["title"], w["focused"]) for w in windows] == [("Editor", True), ("Terminal", False)]


async def test_double_and_right_click_and_the_after_screenshot(
    rig: RigFactory, world: ScriptedDesktop
) -> None:
    async with rig() as tools:
        await tools.ok("double_click", ON_TERMINAL)
        result = await tools.call("right_click", {**ON_EDITOR, "include_screenshot": True})

    assert [(e.button, e.count) for e in world.events] == [("left", 2), ("right", 1)]
    screenshot = result.structured_content["screenshot"]
    assert screenshot["source"] == "window" and screenshot["window"]["title"] == "Editor"
    assert [block.type for block in result.content] == ["image", "text"]


async def test_click_on_the_bare_screen_has_no_target_window(rig: RigFactory, world: ScriptedDesktop) -> None:
    async with rig() as tools:
        result = await tools.ok("click", {"x": 1000, "y": 50})

    assert result["target"] == dict.fromkeys(["pid", "window_id", "window_title", "element"]) | {
        "point": {"x": 1000, "y": 50}
    }
    assert world.events[-1].window_id is None
    assert world.focused is not None and world.focused.title == "Terminal"


async def test_typing_and_keys_go_to_the_focused_window(rig: RigFactory, world: ScriptedDesktop) -> None:
    async with rig() as tools:
        typed = await tools.ok("type_text", {"text": "ls -l\r\n"})
        await tools.ok("click", ON_EDITOR)
        await tools.ok("type_text", {"text": "naïve 東京"})
        await tools.ok("press_key", {"key": "BackSpace"})
        await tools.ok("press_key", {"key": "shift+a"})
        saved = await tools.ok("press_key", {"key": "s", "modifiers": ["ctrl"]})
        await tools.ok("hotkey", {"keys": ["ctrl", "shift", "t"]})

    assert typed["target"] == {
        "pid": TERMINAL_PID,
        "window_id": ids(world)["Terminal"],
        "window_title": "Terminal",
        "point": None,
        "element": None,
    }
    assert typed["detail"] == {"path": "xtest"}
    assert world.window(ids(world)["Terminal"]).text == "ls -l\n"
    assert world.window(ids(world)["Editor"]).text == "naïve 東A", "ctrl+s and the hotkey typed nothing"
    assert saved["target"]["window_title"] == "Editor"
    assert [e.keys for e in world.events if e.kind == "key"] == [
        ("BackSpace",),
        ("Shift_L", "a"),
        ("Control_L", "s"),
        ("Control_L", "Shift_L", "t"),
    ]


async def test_move_scroll_and_drag(rig: RigFactory, world: ScriptedDesktop) -> None:
    editor = ids(world)["Editor"]
    async with rig() as tools:
        moved = await tools.ok("move_cursor", ON_TERMINAL)
        await tools.ok("scroll", {"direction": "down", "amount": 2})  # where the pointer is
        await tools.ok("drag", {"from_x": 150, "from_y": 150, "to_x": 900, "to_y": 700, "steps": 4})
        cursor = await tools.ok("get_cursor_position")

    assert moved["effect"] == "confirmed"
    scroll, drag = world.events[1:]
    assert (scroll.kind, scroll.x, scroll.y, scroll.keys, scroll.count) == ("scroll", 650, 500, ("down",), 2)
    assert (drag.window_id, drag.to, drag.count) == (editor, (900, 700), 4)
    assert world.focused is not None and world.focused.id == editor, "pressing on the editor focused it"
    assert (cursor["x"], cursor["y"]) == (900, 700)


#: Refused by the input model, the target resolver or the input device: each a different layer.
BAD_INPUT: list[tuple[str, dict[str, object]]] = [
    ("click", {"x": 5000, "y": 10}),  # off the screen
    ("click", {"x": 10, "y": -1}),
    ("click", {"x": 10}),  # x without y
    ("click", {"x": 10, "y": 10, "button": "fourth"}),
    ("click", {"x": 10, "y": 10, "count": 11}),
    ("click", {"x": 10, "y": 10, "modifiers": ["a"]}),  # not a modifier
    ("move_cursor", {"x": 1280, "y": 0}),
    ("drag", {"from_x": 10, "from_y": 10, "to_x": 10, "to_y": 900}),
    ("scroll", {"x": 10, "direction": "down"}),
    ("scroll", {"direction": "sideways"}),
    ("scroll", {"direction": "up", "amount": 51}),
    ("type_text", {"text": "bell\x07"}),
    ("type_text", {"text": "x", "delay_ms": 5000}),
    ("press_key", {"key": "Retrun"}),
    ("press_key", {"key": "ctrl+shfit+t"}),
    ("hotkey", {"keys": ["ctrl"]}),
    ("hotkey", {"keys": "ctrl+a"}),
]


async def test_bad_input_is_invalid_argument_and_nothing_is_delivered(
    rig: RigFactory, world: ScriptedDesktop
) -> None:
    async with rig() as tools:
        for tool, arguments in BAD_INPUT:
            error = await tools.error(tool, arguments)

            assert error["code"] == "INVALID_ARGUMENT", (tool, arguments, error)
            assert world.events == [], (tool, arguments)


async def test_refusals_say_why(rig: RigFactory) -> None:
    async with rig() as tools:
        off_screen = await tools.error("click", {"x": 5000, "y": 10})
        typo = await tools.error("press_key", {"key": "Retrun"})

    assert off_screen["details"]["screen"] == {"x": 0, "y": 0, "width": 1280, "height": 800}
    assert off_screen["remediation"]
    assert "Return" in typo["details"]["suggestions"]


async def test_focus_window_raises_it_and_unknown_windows_are_not_found(
    rig: RigFactory, world: ScriptedDesktop
) -> None:
    editor = ids(world)["Editor"]
    world.minimize(editor)
    async with rig(blocked_window_patterns=["^Term"]) as tools:
        focused = await tools.ok("focus_window", {"window_id": editor})
        unknown = await tools.error("focus_window", {"window_id": 999})
        blocked = await tools.error("focus_window", {"window_id": ids(world)["Terminal"]})

    assert focused["effect"] == "confirmed"
    assert world.windows()[0].title == "Editor" and not world.windows()[0].minimized
    assert unknown["code"] == blocked["code"] == "WINDOW_NOT_FOUND"
    assert unknown["details"] == {"window_id": 999}


async def test_element_targets_need_accessibility(rig: RigFactory, world: ScriptedDesktop) -> None:
    async with rig() as tools:
        error = await tools.error("click", {"element": {"role": "push button", "name": "Save"}})

    assert error["code"] == "A11Y_UNAVAILABLE"
    assert world.events == []


async def test_a_recorded_click_writes_a_turn_folder(
    rig: RigFactory, world: ScriptedDesktop, tmp_path: Path
) -> None:
    output = tmp_path / "recording"
    async with rig() as tools:
        started = await tools.ok("start_recording", {"output_dir": str(output)})
        await tools.ok("click", ON_EDITOR)
        refused = await tools.error("click", {"x": 5000, "y": 0})
        stopped = await tools.ok("stop_recording")

    assert started["recording"] is True and stopped["turns"] == 2
    assert refused["code"] == "INVALID_ARGUMENT"
    turn = output / "turn-00001"
    action = json.loads((turn / "action.json").read_text())
    assert action["tool"] == "click" and action["arguments"] == ON_EDITOR
    assert {"before.png", "after.png", "click.png", "screenshot.png", "evidence.json"} <= {
        path.name for path in turn.iterdir()
    }
    # The click's target was the editor, partly under the terminal: its own pixels, whole.
    before = Image.open(turn / "before.png")
    assert before.size == (400, 300) and before.getcolors() == [(400 * 300, GREEN)]
    failed = json.loads((output / "turn-00002" / "action.json").read_text())
    assert failed["tool"] == "click" and failed["error"]
