"""The MCP tool set, one module per tool group; the server registers the list for a profile."""

from __future__ import annotations

from deskrig.config import ToolProfile
from deskrig.services import AnyTool, CallInfo, ImagePart, Services, ToolResult, ToolSpec
from deskrig.tools import (
    a11y,
    acs,
    apps,
    clipboard,
    commands,
    files,
    held_input,
    input,
    recording,
    screen,
    windows,
    zoom,
)

__all__ = ["CallInfo", "ImagePart", "Services", "ToolResult", "ToolSpec", "tools_for_profile"]

ALL_TOOLS: list[AnyTool] = [
    *screen.TOOLS,
    *windows.TOOLS,
    *input.TOOLS,
    *held_input.TOOLS,
    *clipboard.TOOLS,
    *a11y.TOOLS,
    *apps.TOOLS,
    *recording.TOOLS,
    *files.TOOLS,
    *commands.TOOLS,
    *zoom.TOOLS,
    *acs.TOOLS,
]


def tools_for_profile(profile: ToolProfile) -> list[AnyTool]:
    """``default``: deskrig's own tools; ``acs``: the compatibility set; ``all``: both."""
    if profile == "all":
        return list(ALL_TOOLS)
    return [tool for tool in ALL_TOOLS if tool.profile == profile]
