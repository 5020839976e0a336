"""The macOS backend's pure logic: Quartz's window and display descriptions as deskrig's models,
regions in points, and the errors a missing privacy permission becomes.

Nothing here imports pyobjc: every function takes the plain dictionaries and numbers Quartz hands
over (``CGWindowListCopyWindowInfo`` entries, keyed by Apple's documented ``kCGWindow*`` names;
a display's bounds in points and its mode's size in pixels), so it is tested on Linux with
recorded structures (tests/native/data). ``macos_quartz`` makes the calls.

Coordinates are Quartz's global display space in points: the main display's top-left is the
origin, y grows downwards, as deskrig's screen pixels do. Captures are taken at the nominal
resolution (one image pixel per point), so a screenshot's pixels are click coordinates on a
Retina display too; each display's ``scale`` says how many device pixels a point has there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import FIRST_DISPLAY_ID, Bounds, DisplayInfo, WindowInfo

# Keys of a CGWindowListCopyWindowInfo entry (Apple: "Required Window List Keys", "Optional ...").
WINDOW_NUMBER = "kCGWindowNumber"
WINDOW_LAYER = "kCGWindowLayer"
WINDOW_BOUNDS = "kCGWindowBounds"
WINDOW_OWNER_PID = "kCGWindowOwnerPID"
WINDOW_OWNER_NAME = "kCGWindowOwnerName"
WINDOW_NAME = "kCGWindowName"
WINDOW_IS_ONSCREEN = "kCGWindowIsOnscreen"
WINDOW_ALPHA = "kCGWindowAlpha"

#: The layer of ordinary application windows (kCGNormalWindowLevel); menus, the Dock, the menu bar
#: and status items sit on higher layers and are not windows an app under test owns.
NORMAL_WINDOW_LAYER = 0

#: The System Settings panes that grant what deskrig needs, as the remediation names them.
SCREEN_RECORDING_PANE = "System Settings > Privacy & Security > Screen Recording"
ACCESSIBILITY_PANE = "System Settings > Privacy & Security > Accessibility"


def _rect(bounds: Mapping[str, Any]) -> Bounds:
    """A ``kCGWindowBounds`` / CGRect dictionary ({X, Y, Width, Height}, floats in points) as the
    whole pixels it covers."""
    x, y = math.floor(float(bounds["X"])), math.floor(float(bounds["Y"]))
    right = math.ceil(float(bounds["X"]) + float(bounds["Width"]))
    bottom = math.ceil(float(bounds["Y"]) + float(bounds["Height"]))
    return Bounds(x=x, y=y, width=right - x, height=bottom - y)


def content_bounds(frame: Bounds, title_bar: int) -> Bounds:
    """The content area of a titled window whose whole frame is ``frame``: Quartz reports only the
    frame, and a standard window's title bar is ``title_bar`` points tall across its top."""
    if frame.height <= title_bar:
        return frame
    return Bounds(x=frame.x, y=frame.y + title_bar, width=frame.width, height=frame.height - title_bar)


def is_app_window(entry: Mapping[str, Any]) -> bool:
    """An on-screen, visible, non-empty window on the normal layer. (The list asks Quartz for
    on-screen windows only, so an entry without the optional ``kCGWindowIsOnscreen`` is one.)"""
    if int(entry.get(WINDOW_LAYER, -1)) != NORMAL_WINDOW_LAYER:
        return False
    if not entry.get(WINDOW_IS_ONSCREEN, True) or float(entry.get(WINDOW_ALPHA, 1.0)) <= 0.0:
        return False
    frame = _rect(entry[WINDOW_BOUNDS])
    return frame.width > 0 and frame.height > 0


def windows_from_list(
    entries: Sequence[Mapping[str, Any]], frontmost_pid: int | None, title_bar: int
) -> list[WindowInfo]:
    """``CGWindowListCopyWindowInfo`` entries (front to back, as Quartz lists them) as the app
    windows, top-most first; the top-most window of the frontmost app is the focused one.

    A window's title is missing from the list without the Screen Recording permission; it is ""
    then (the backend refuses to start without the permission, so this is for other apps' windows
    that have no title)."""
    windows: list[WindowInfo] = []
    focus_given = False
    for entry in entries:
        if not is_app_window(entry):
            continue
        frame = _rect(entry[WINDOW_BOUNDS])
        pid = entry.get(WINDOW_OWNER_PID)
        focused = not focus_given and frontmost_pid is not None and pid == frontmost_pid
        focus_given = focus_given or focused
        windows.append(
            WindowInfo(
                id=int(entry[WINDOW_NUMBER]),
                title=str(entry.get(WINDOW_NAME) or ""),
                app=str(entry.get(WINDOW_OWNER_NAME) or ""),
                pid=int(pid) if pid is not None else None,
                bounds=content_bounds(frame, title_bar),
                frame_bounds=frame,
                focused=focused,
                z_order=len(windows),
            )
        )
    return windows


@dataclass(frozen=True)
class QuartzDisplay:
    """One active display as Quartz describes it: ``CGDisplayBounds`` (points, global space) and
    its current mode's size in pixels (``CGDisplayModeGetPixelWidth``/``Height``)."""

    display_id: int
    bounds: Mapping[str, float]
    pixel_width: int
    pixel_height: int
    main: bool


def displays_from_quartz(displays: Sequence[QuartzDisplay]) -> list[DisplayInfo]:
    """Numbered from 1, the main display first, each with its Retina scale (device pixels per point)."""
    ordered = sorted(displays, key=lambda d: not d.main)  # stable: Quartz's order otherwise
    infos = []
    for number, display in enumerate(ordered, start=FIRST_DISPLAY_ID):
        bounds = _rect(display.bounds)
        scale = display.pixel_width / bounds.width if bounds.width else 1.0
        infos.append(
            DisplayInfo(
                id=number,
                name=f"Quartz display {display.display_id}",
                bounds=bounds,
                primary=number == FIRST_DISPLAY_ID,
                scale=round(scale, 4),
            )
        )
    return infos


def screen_union(displays: Sequence[DisplayInfo]) -> Bounds:
    """The whole desktop: the smallest box holding every display."""
    if not displays:
        raise DeskrigError(ErrorCode.DISPLAY_NOT_FOUND, "Quartz reports no active display")
    boxes = [d.bounds for d in displays]
    x0, y0 = min(b.x for b in boxes), min(b.y for b in boxes)
    x1, y1 = max(b.right for b in boxes), max(b.bottom for b in boxes)
    return Bounds(x=x0, y=y0, width=x1 - x0, height=y1 - y0)


def visible_region(region: Bounds, screen: Bounds) -> Bounds:
    """The part of ``region`` on the screen; INVALID_REGION when there is none."""
    visible = region.intersection(screen)
    if visible is None:
        raise DeskrigError(
            ErrorCode.INVALID_REGION,
            "the region lies outside the screen",
            details={"region": region.model_dump(), "screen": screen.model_dump()},
        )
    return visible


def window_not_found(window_id: int) -> DeskrigError:
    return DeskrigError(
        ErrorCode.WINDOW_NOT_FOUND, f"no window with id {window_id}", details={"window_id": window_id}
    )


def screen_recording_denied(program: str) -> DeskrigError:
    """Without Screen Recording, Quartz returns the desktop picture where windows are (and no
    window titles): deskrig refuses rather than hand over that image."""
    return DeskrigError(
        ErrorCode.PERMISSION_DENIED,
        "macOS has not granted Screen Recording to this program: captures would show only the "
        "desktop picture",
        details={"permission": "screen_recording", "program": program, "settings": SCREEN_RECORDING_PANE},
        remediation=f"Open {SCREEN_RECORDING_PANE}, turn it on for {program} (the terminal or app "
        "that starts deskrig), then quit and restart that program.",
    )


def accessibility_denied(program: str, action: str) -> DeskrigError:
    """Without Accessibility, macOS drops synthetic input and answers no AX request."""
    return DeskrigError(
        ErrorCode.PERMISSION_DENIED,
        f"macOS has not granted Accessibility to this program: cannot {action}",
        details={"permission": "accessibility", "program": program, "settings": ACCESSIBILITY_PANE},
        remediation=f"Open {ACCESSIBILITY_PANE}, turn it on for {program} (the terminal or app that "
        "starts deskrig), then quit and restart that program.",
    )


# AXError codes (AXError.h) the accessibility calls answer with.
AX_ERROR_ILLEGAL_ARGUMENT = -25201
AX_ERROR_INVALID_UI_ELEMENT = -25202
AX_ERROR_CANNOT_COMPLETE = -25204
AX_ERROR_ATTRIBUTE_UNSUPPORTED = -25205
AX_ERROR_ACTION_UNSUPPORTED = -25206
AX_ERROR_API_DISABLED = -25211
AX_ERROR_NO_VALUE = -25212


def ax_failure(code: int, action: str, program: str) -> DeskrigError:
    """An AXError from ``action`` as deskrig's error: no permission, a stale element, an element
    that does not do that, or an app that did not answer."""
    details = {"ax_error": code, "action": action}
    if code == AX_ERROR_API_DISABLED:
        return accessibility_denied(program, action)
    if code == AX_ERROR_INVALID_UI_ELEMENT:
        return DeskrigError(
            ErrorCode.ELEMENT_NOT_FOUND, f"{action}: the element no longer exists", details=details
        )
    if code in (AX_ERROR_ACTION_UNSUPPORTED, AX_ERROR_ATTRIBUTE_UNSUPPORTED, AX_ERROR_ILLEGAL_ARGUMENT):
        return DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"{action}: the element does not support it",
            details=details,
            remediation="Call get_app_state for the element's actions, or click its bounds.",
        )
    return DeskrigError(
        ErrorCode.A11Y_UNAVAILABLE,
        f"{action}: the app did not answer the accessibility request (AXError {code})",
        details=details,
        remediation="The app may be busy: try again, or use coordinates from a screenshot.",
    )
