"""Which tools are recorded is declared on each tool's spec, and nowhere else."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel

from deskrig.model import ActionTarget
from deskrig.services import CallInfo, Services, ToolResult, ToolSpec
from deskrig.tools import tools_for_profile

RECORDED = {
    "click",
    "double_click",
    "right_click",
    "drag",
    "move_cursor",
    "scroll",
    "type_text",
    "press_key",
    "hotkey",
    "set_value",
    "key_down",
    "key_up",
    "mouse_down",
    "mouse_up",
    "set_clipboard",
}


class NoArguments(BaseModel):
    pass


async def handler(services: Services, call: CallInfo, args: NoArguments) -> ToolResult:
    raise AssertionError("never called")


async def resolve(services: Services, call: CallInfo, args: NoArguments) -> ActionTarget:
    raise AssertionError("never called")


def test_every_action_tool_and_nothing_else_is_recorded() -> None:
    tools = tools_for_profile("all")
    assert {t.name for t in tools if t.recorded} == RECORDED  # the recording contract's list
    for tool in tools:
        assert bool(tool.recorded) == tool.action, tool.name
        if not tool.read_only:
            assert tool.recorded is not None, tool.name


def test_a_tool_that_changes_the_desktop_must_say_whether_it_is_recorded() -> None:
    with pytest.raises(ValueError, match="say whether it is recorded"):
        ToolSpec("new_action", "d", NoArguments, NoArguments, handler, read_only=False, resolve=resolve)
    with pytest.raises(ValueError, match="needs resolve"):
        ToolSpec("new_action", "d", NoArguments, NoArguments, handler, read_only=False, recorded=True)
    recorded = ToolSpec(
        "new_action", "d", NoArguments, NoArguments, handler, read_only=False, resolve=resolve, recorded=True
    )
    assert recorded.recorded and recorded.action


def test_start_recording_names_exactly_the_recorded_tools() -> None:
    start = next(t for t in tools_for_profile("default") if t.name == "start_recording")
    listed = re.search(r"actions \(([^)]*)\)", start.description)
    assert listed is not None
    assert {name.strip() for name in listed.group(1).split(",")} == RECORDED
