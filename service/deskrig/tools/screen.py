"""Screen-level discovery and capture: displays, screen size, cursor, full and region captures."""

from __future__ import annotations

import functools
from collections.abc import Callable

from pydantic import BaseModel, Field

from deskrig.capture import CaptureOptions, CaptureTarget, ScreenshotMetadata
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, CursorPosition, DisplayInfo, ScreenSize
from deskrig.privacy import masking_audit
from deskrig.services import AnyTool, CallInfo, ImagePart, Services, ToolResult, ToolSpec, run_blocking

#: display_id 0: every display together (mss's monitor 0), the same as no display_id.
ALL_DISPLAYS = 0


class NoArguments(BaseModel):
    pass


class DisplayList(BaseModel):
    displays: list[DisplayInfo]


class ScreenshotScreenInput(CaptureOptions):
    display_id: int | None = Field(
        None,
        ge=0,
        description="Capture one display, numbered from 1 (1 is the primary; see list_displays); "
        "0 or absent: all displays, the whole screen",
    )


class RegionArguments(BaseModel):
    """A rectangle of the screen to capture."""

    x: int = Field(description="Left edge in screen pixels")
    y: int = Field(description="Top edge in screen pixels")
    width: int = Field(description="Width in screen pixels (> 0)")
    height: int = Field(description="Height in screen pixels (> 0)")


class ScreenshotRegionInput(CaptureOptions, RegionArguments):
    pass


async def list_displays(services: Services, call: CallInfo, args: NoArguments) -> ToolResult:
    displays = await run_blocking(call, services.desktop.displays)
    return ToolResult(DisplayList(displays=displays))


async def get_screen_size(services: Services, call: CallInfo, args: NoArguments) -> ToolResult:
    bounds = await run_blocking(call, services.desktop.screen_bounds)
    return ToolResult(ScreenSize(width=bounds.width, height=bounds.height))


async def get_cursor_position(services: Services, call: CallInfo, args: NoArguments) -> ToolResult:
    return ToolResult(await run_blocking(call, services.desktop.cursor_position))


def find_display(displays: list[DisplayInfo], display_id: int) -> DisplayInfo:
    for display in displays:
        if display.id == display_id:
            return display
    raise DeskrigError(
        ErrorCode.DISPLAY_NOT_FOUND,
        f"no display with id {display_id}",
        details={"display_id": display_id, "available": [d.id for d in displays]},
    )


def screen_target(services: Services, display_id: int | None) -> CaptureTarget:
    """Blocking: the capture target for the whole screen or one monitor."""
    if display_id is None or display_id == ALL_DISPLAYS:
        return CaptureTarget(source="screen", region=services.desktop.screen_bounds())
    display = find_display(services.desktop.displays(), display_id)
    return CaptureTarget(source="screen", region=display.bounds, display=display)


def region_target(services: Services, x: int, y: int, width: int, height: int) -> CaptureTarget:
    """Blocking: validate a region against the screen."""
    screen = services.desktop.screen_bounds()
    details = {"region": {"x": x, "y": y, "width": width, "height": height}, "screen": screen.model_dump()}
    if width <= 0 or height <= 0:
        raise DeskrigError(
            ErrorCode.INVALID_REGION, "region width and height must be positive", details=details
        )
    region = Bounds(x=x, y=y, width=width, height=height)
    if region.intersection(screen) != region:
        raise DeskrigError(ErrorCode.INVALID_REGION, "region extends beyond the screen", details=details)
    return CaptureTarget(source="region", region=region)


async def capture(
    services: Services,
    call: CallInfo,
    target: Callable[[], CaptureTarget],
    options: CaptureOptions,
    *,
    screen_area: bool = True,
) -> ToolResult:
    """Capture what ``target`` (blocking: it asks the desktop) names, both in one worker thread (a
    thread hop costs about as much as the X round trips it would wrap), or none where a screen area
    is captured quickly (:func:`run_blocking`). A window's pixels may wait for windows to be hidden
    and redrawn (``screen_area=False``): always in a thread."""
    quick = screen_area and services.capture.is_quick(options)
    metadata, data = await run_blocking(call, lambda: services.capture.run(target(), options), quick=quick)
    return ToolResult(
        metadata, images=[ImagePart(data, metadata.mime_type)], audit=masking_audit(metadata.pii_masking)
    )


async def screenshot_screen(services: Services, call: CallInfo, args: ScreenshotScreenInput) -> ToolResult:
    return await capture(services, call, functools.partial(screen_target, services, args.display_id), args)


async def screenshot_region(services: Services, call: CallInfo, args: ScreenshotRegionInput) -> ToolResult:
    target = functools.partial(region_target, services, args.x, args.y, args.width, args.height)
    return await capture(services, call, target, args)


TOOLS: list[AnyTool] = [
    ToolSpec(
        "list_displays",
        "List the monitors of the desktop with their bounds in screen pixels.",
        NoArguments,
        DisplayList,
        list_displays,
        title="List displays",
    ),
    ToolSpec(
        "get_screen_size",
        "Size of the whole screen in pixels (the coordinate space of every other tool).",
        NoArguments,
        ScreenSize,
        get_screen_size,
        title="Get the screen size",
    ),
    ToolSpec(
        "get_cursor_position",
        "Where the mouse pointer is, in screen pixels.",
        NoArguments,
        CursorPosition,
        get_cursor_position,
        title="Get the pointer position",
    ),
    ToolSpec(
        "screenshot_screen",
        "Screenshot of the whole screen or one monitor. Returns the image and metadata; with max_width the "
        "image is scaled and metadata.scale/origin map image pixels back to screen pixels.",
        ScreenshotScreenInput,
        ScreenshotMetadata,
        screenshot_screen,
        captures=True,
        title="Screenshot the screen",
    ),
    ToolSpec(
        "screenshot_region",
        "Screenshot of a rectangle of the screen, given in screen pixels.",
        ScreenshotRegionInput,
        ScreenshotMetadata,
        screenshot_region,
        captures=True,
        title="Screenshot a region",
    ),
]
