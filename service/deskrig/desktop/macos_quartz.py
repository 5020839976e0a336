"""The macOS backend's calls into Quartz, AppKit and ApplicationServices (pyobjc): thin on purpose.

Every decision is in ``macos``, ``macos_input``, ``macos_windows``, ``macos_keys`` and
``macos_clipboard``, which are tested on Linux; this module only asks macOS and hands over plain
Python values (dicts, ints, PIL images). It runs on macOS only (tests/native, the macos workflow).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import AppKit
import ApplicationServices
import Quartz
from PIL import Image

from deskrig.desktop.input_limits import ButtonName
from deskrig.desktop.macos_input import MouseAction
from deskrig.desktop.macos_windows import QuartzDisplay, displays_from_quartz, screen_union
from deskrig.errors import BackendError, ErrorCode
from deskrig.model import Bounds

#: How many displays Quartz is asked about (CGGetActiveDisplayList's buffer).
MAX_DISPLAYS = 32

_MOUSE_EVENTS: dict[tuple[MouseAction, ButtonName], int] = {
    ("move", "left"): Quartz.kCGEventMouseMoved,
    ("move", "right"): Quartz.kCGEventMouseMoved,
    ("move", "middle"): Quartz.kCGEventMouseMoved,
    ("down", "left"): Quartz.kCGEventLeftMouseDown,
    ("up", "left"): Quartz.kCGEventLeftMouseUp,
    ("drag", "left"): Quartz.kCGEventLeftMouseDragged,
    ("down", "right"): Quartz.kCGEventRightMouseDown,
    ("up", "right"): Quartz.kCGEventRightMouseUp,
    ("drag", "right"): Quartz.kCGEventRightMouseDragged,
    ("down", "middle"): Quartz.kCGEventOtherMouseDown,
    ("up", "middle"): Quartz.kCGEventOtherMouseUp,
    ("drag", "middle"): Quartz.kCGEventOtherMouseDragged,
}
_MOUSE_BUTTONS: dict[ButtonName, int] = {
    "left": Quartz.kCGMouseButtonLeft,
    "right": Quartz.kCGMouseButtonRight,
    "middle": Quartz.kCGMouseButtonCenter,
}


def responsible_program() -> str:
    """Who macOS asks the user to grant permissions to: the terminal (or IDE) deskrig runs in,
    as it names itself in ``TERM_PROGRAM``, else the Python interpreter."""
    return os.environ.get("TERM_PROGRAM") or sys.executable


def _plain(value: Any) -> Any:
    """An NSDictionary/NSArray/NSString/NSNumber as dict/list/str/int/float/bool."""
    if isinstance(value, Mapping) or hasattr(value, "allKeys"):
        return {str(key): _plain(value[key]) for key in value}
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool | int | float):
        return value
    if hasattr(value, "count") and hasattr(value, "objectAtIndex_"):
        return [_plain(item) for item in value]
    return value


def _rect(rect: Any) -> dict[str, float]:
    return {
        "X": float(rect.origin.x),
        "Y": float(rect.origin.y),
        "Width": float(rect.size.width),
        "Height": float(rect.size.height),
    }


def ax_attribute(element: Any, name: str) -> tuple[int, Any]:
    """``AXUIElementCopyAttributeValue``: (AXError, value)."""
    error, value = ApplicationServices.AXUIElementCopyAttributeValue(element, name, None)
    return int(error), value


def ax_point(value: Any) -> tuple[float, float] | None:
    ok, point = ApplicationServices.AXValueGetValue(value, ApplicationServices.kAXValueCGPointType, None)
    return (float(point.x), float(point.y)) if ok else None


def ax_size(value: Any) -> tuple[float, float] | None:
    ok, size = ApplicationServices.AXValueGetValue(value, ApplicationServices.kAXValueCGSizeType, None)
    return (float(size.width), float(size.height)) if ok else None


class QuartzSession:
    """The real ``macos.QuartzScreen``."""

    def __init__(self) -> None:
        self.program = responsible_program()

    def screen_capture_allowed(self) -> bool:
        return bool(Quartz.CGPreflightScreenCaptureAccess())

    def input_allowed(self) -> bool:
        return bool(ApplicationServices.AXIsProcessTrusted())

    def window_list(self) -> list[Mapping[str, Any]]:
        options = Quartz.kCGWindowListOptionOnScreenOnly | Quartz.kCGWindowListExcludeDesktopElements
        listed = Quartz.CGWindowListCopyWindowInfo(options, Quartz.kCGNullWindowID) or []
        return [_plain(entry) for entry in listed]

    def frontmost_pid(self) -> int | None:
        # NSWorkspace learns of activations through notifications on the main run loop, which a
        # server does not run, so it may be stale; AX asks the window server (with Accessibility).
        if self.input_allowed():
            system = ApplicationServices.AXUIElementCreateSystemWide()
            error, app = ax_attribute(system, "AXFocusedApplication")
            if error == 0 and app is not None:
                error, pid = ApplicationServices.AXUIElementGetPid(app, None)
                if int(error) == 0:
                    return int(pid)
        running = AppKit.NSWorkspace.sharedWorkspace().frontmostApplication()
        return int(running.processIdentifier()) if running is not None else None

    def displays(self) -> list[QuartzDisplay]:
        _error, ids, _count = Quartz.CGGetActiveDisplayList(MAX_DISPLAYS, None, None)
        main = int(Quartz.CGMainDisplayID())
        found = []
        for display_id in ids or []:
            mode = Quartz.CGDisplayCopyDisplayMode(display_id)
            found.append(
                QuartzDisplay(
                    display_id=int(display_id),
                    bounds=_rect(Quartz.CGDisplayBounds(display_id)),
                    pixel_width=int(Quartz.CGDisplayModeGetPixelWidth(mode)),
                    pixel_height=int(Quartz.CGDisplayModeGetPixelHeight(mode)),
                    main=int(display_id) == main,
                )
            )
        return found

    def title_bar_height(self) -> int:
        content = AppKit.NSMakeRect(0, 0, 400, 400)
        frame = AppKit.NSWindow.frameRectForContentRect_styleMask_(content, AppKit.NSWindowStyleMaskTitled)
        return round(float(frame.size.height) - 400)

    def image(self, region: Bounds | None, window_id: int | None) -> Image.Image | None:
        options = Quartz.kCGWindowImageNominalResolution
        if window_id is None:
            assert region is not None
            rect = Quartz.CGRectMake(region.x, region.y, region.width, region.height)
            listing, target = Quartz.kCGWindowListOptionOnScreenOnly, Quartz.kCGNullWindowID
        else:
            rect = Quartz.CGRectNull
            listing, target = Quartz.kCGWindowListOptionIncludingWindow, window_id
            options |= Quartz.kCGWindowImageBoundsIgnoreFraming
        # Deprecated since macOS 14 for ScreenCaptureKit: say so if a macOS no longer has it.
        create_image = getattr(Quartz, "CGWindowListCreateImage", None)
        if create_image is None:
            raise BackendError(
                ErrorCode.CAPTURE_FAILED,
                "this macOS has no CGWindowListCreateImage (deskrig does not capture through "
                "ScreenCaptureKit yet)",
            )
        picture = create_image(rect, listing, target, options)
        if picture is None:
            return None
        bits = int(Quartz.CGImageGetBitsPerPixel(picture))
        if bits != 32:  # an extended-range (HDR) display's 64-bit pixels: not a layout read here
            raise BackendError(
                ErrorCode.CAPTURE_FAILED,
                f"Quartz returned {bits}-bit pixels; deskrig reads 32-bit ones",
                details={"bits_per_pixel": bits},
            )
        width, height = int(Quartz.CGImageGetWidth(picture)), int(Quartz.CGImageGetHeight(picture))
        stride = int(Quartz.CGImageGetBytesPerRow(picture))
        data = bytes(Quartz.CGDataProviderCopyData(Quartz.CGImageGetDataProvider(picture)))
        # 32-bit little-endian, alpha first: B, G, R, A in memory.
        return Image.frombuffer("RGB", (width, height), data, "raw", "BGRX", stride, 1)

    def cursor(self) -> tuple[int, int]:
        location = Quartz.CGEventGetLocation(Quartz.CGEventCreate(None))
        return round(float(location.x)), round(float(location.y))

    def activate(self, pid: int, frame: Bounds) -> None:
        app = AppKit.NSRunningApplication.runningApplicationWithProcessIdentifier_(pid)
        if app is not None:
            app.activateWithOptions_(AppKit.NSApplicationActivateIgnoringOtherApps)
        # macOS 14 may decline a request from a process that is not itself active (cooperative
        # activation); AX's frontmost attribute is honoured for a trusted process.
        element = ApplicationServices.AXUIElementCreateApplication(pid)
        ApplicationServices.AXUIElementSetAttributeValue(element, "AXFrontmost", True)
        error, windows = ax_attribute(element, "AXWindows")
        for window in (windows or []) if error == 0 else []:
            position, size = ax_attribute(window, "AXPosition")[1], ax_attribute(window, "AXSize")[1]
            at = ax_point(position) if position is not None else None
            extent = ax_size(size) if size is not None else None
            if at is None or extent is None:
                continue
            if (round(at[0]), round(at[1]), round(extent[0]), round(extent[1])) == (
                frame.x,
                frame.y,
                frame.width,
                frame.height,
            ):
                ApplicationServices.AXUIElementPerformAction(window, "AXRaise")
                ApplicationServices.AXUIElementSetAttributeValue(window, "AXMain", True)
                return

    def close(self) -> None:
        """Nothing to release: pyobjc frees what it returned."""


class QuartzEvents:
    """The real ``macos_input.EventSink``: events posted at the HID level."""

    def __init__(self, session: QuartzSession) -> None:
        self._session = session
        self.program = session.program
        self._source = Quartz.CGEventSourceCreate(Quartz.kCGEventSourceStateHIDSystemState)

    def input_allowed(self) -> bool:
        return self._session.input_allowed()

    def screen(self) -> Bounds:
        return screen_union(displays_from_quartz(self._session.displays()))

    def cursor(self) -> tuple[int, int]:
        return self._session.cursor()

    def mouse(self, action: MouseAction, x: int, y: int, button: ButtonName, clicks: int, flags: int) -> None:
        event = Quartz.CGEventCreateMouseEvent(
            self._source, _MOUSE_EVENTS[(action, button)], (x, y), _MOUSE_BUTTONS[button]
        )
        if clicks:
            Quartz.CGEventSetIntegerValueField(event, Quartz.kCGMouseEventClickState, clicks)
        Quartz.CGEventSetFlags(event, flags)
        Quartz.CGEventPost(Quartz.kCGHIDEventTap, event)

    def scroll(self, vertical: int, horizontal: int) -> None:
        # A variadic C function: the count says how many wheel values follow.
        wheels = (vertical, horizontal) if horizontal else (vertical,)
        event = Quartz.CGEventCreateScrollWheelEvent(
            self._source, Quartz.kCGScrollEventUnitLine, len(wheels), *wheels
        )
        Quartz.CGEventPost(Quartz.kCGHIDEventTap, event)

    def key(self, code: int, down: bool, flags: int, text: str) -> None:
        event = Quartz.CGEventCreateKeyboardEvent(self._source, code, down)
        if text:
            Quartz.CGEventKeyboardSetUnicodeString(event, len(text.encode("utf-16-le")) // 2, text)
        Quartz.CGEventSetFlags(event, flags)
        Quartz.CGEventPost(Quartz.kCGHIDEventTap, event)

    def close(self) -> None:
        self._source = None


class GeneralPasteboard:
    """The real ``macos_clipboard.Pasteboard``: ``NSPasteboard.generalPasteboard``."""

    def __init__(self) -> None:
        self._board = AppKit.NSPasteboard.generalPasteboard()

    def types(self) -> list[str]:
        return [str(name) for name in self._board.types() or []]

    def data(self, pasteboard_type: str) -> bytes | None:
        found = self._board.dataForType_(pasteboard_type)
        return bytes(found) if found is not None else None

    def replace(self, items: dict[str, bytes]) -> None:
        self._board.clearContents()
        for pasteboard_type, data in items.items():
            self._board.setData_forType_(
                AppKit.NSData.dataWithBytes_length_(data, len(data)), pasteboard_type
            )
