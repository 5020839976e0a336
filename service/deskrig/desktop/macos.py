"""The macOS backend: Quartz window lists and captures, over a :class:`QuartzScreen`.

``macos_quartz.QuartzSession`` is the real :class:`QuartzScreen` (pyobjc's Quartz and AppKit);
this module holds what the backend decides, so it is exercised on Linux with recorded window
lists (tests/native/test_macos_backend.py) and on a Mac by the contract suite (tests/native).

- Windows: ``CGWindowListCopyWindowInfo`` (on-screen windows of the normal layer, front to
  back), see ``macos_windows``. Window ids are Quartz window numbers.
- Pixels: ``CGWindowListCreateImage`` at the nominal resolution (one pixel per point): the screen
  for a region, one window alone for a window, which is its own pixels where others cover it
  (``window_capture`` "composite": the window server's copy of it).
- Screen Recording is checked before every capture (``CGPreflightScreenCaptureAccess``): without
  it Quartz hands over the desktop picture instead of windows, and deskrig raises
  PERMISSION_DENIED naming the System Settings pane rather than return that image.
- Video: the recorder's, from these captures (``deskrig.recording.video``), as on every backend.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, Protocol

from PIL import Image

from deskrig.desktop.base import DesktopBackend
from deskrig.desktop.macos_windows import (
    QuartzDisplay,
    accessibility_denied,
    displays_from_quartz,
    screen_recording_denied,
    screen_union,
    visible_region,
    window_not_found,
    windows_from_list,
)
from deskrig.errors import BackendError, ErrorCode
from deskrig.model import Bounds, CursorPosition, DisplayInfo, Point, WindowInfo


class QuartzScreen(Protocol):
    """What the backend asks of Quartz and AppKit (``macos_quartz.QuartzSession``). Blocking."""

    #: The program macOS grants permissions to, for the remediation text.
    program: str

    def screen_capture_allowed(self) -> bool:
        """``CGPreflightScreenCaptureAccess``: whether captures show other apps' windows."""
        ...

    def input_allowed(self) -> bool:
        """``AXIsProcessTrusted``: whether posted events and AX requests are honoured."""
        ...

    def window_list(self) -> list[Mapping[str, Any]]:
        """``CGWindowListCopyWindowInfo`` of the on-screen windows, front to back."""
        ...

    def frontmost_pid(self) -> int | None:
        """The pid of the active application (``NSWorkspace.frontmostApplication``)."""
        ...

    def displays(self) -> list[QuartzDisplay]: ...

    def title_bar_height(self) -> int:
        """A standard titled window's title bar, in points, on this macOS version."""
        ...

    def image(self, region: Bounds | None, window_id: int | None) -> Image.Image | None:
        """``CGWindowListCreateImage`` at the nominal resolution: the on-screen windows in
        ``region``, or window ``window_id`` alone (``region`` None: its whole frame, no shadow).
        None when Quartz returns no image."""
        ...

    def cursor(self) -> tuple[int, int]: ...

    def activate(self, pid: int, frame: Bounds) -> None:
        """Make ``pid`` the active app and raise its window at ``frame`` above its others (through
        AX: the caller has checked :meth:`input_allowed`)."""
        ...

    def close(self) -> None: ...


class MacOSBackend(DesktopBackend):
    """The desktop of the logged-in macOS user, through ``quartz``."""

    name = "macos"
    a11y_in_screen_pixels = True
    captures_show_pointer = False  # CGWindowListCreateImage leaves the cursor out

    def __init__(self, quartz: QuartzScreen) -> None:
        super().__init__()
        self._quartz = quartz
        self.window_capture_method = "composite"
        self._serials = itertools.count(1)
        self._title_bar = quartz.title_bar_height()
        if not quartz.screen_capture_allowed():
            raise screen_recording_denied(quartz.program)
        self.note("capture", "CGWindowListCreateImage at the nominal resolution (one image pixel per point)")
        self.note("permissions", "Screen Recording: granted")
        if not quartz.input_allowed():
            self.note(
                "permissions",
                "Accessibility: NOT granted (input and focus_window fail PERMISSION_DENIED until it is)",
            )
        else:
            self.note("permissions", "Accessibility: granted")
        for display in self.displays():
            self.note(
                "scale", f"display {display.id} ({display.name}): {display.scale:g} device pixels per point"
            )
        self.note(
            "windows",
            f"a window's client area is its frame less a standard title bar ({self._title_bar} pt): "
            "Quartz reports frames only",
        )
        self.note("damage", "Quartz gives no damage notification: every capture is taken afresh")

    def displays(self) -> list[DisplayInfo]:
        return displays_from_quartz(self._quartz.displays())

    def screen_bounds(self) -> Bounds:
        return screen_union(self.displays())

    def windows(self) -> list[WindowInfo]:
        return windows_from_list(self._quartz.window_list(), self._quartz.frontmost_pid(), self._title_bar)

    def capture(self, region: Bounds) -> Image.Image:
        visible = visible_region(region, self.screen_bounds())
        return self._image(visible, None, f"screen region {visible.model_dump()}").crop(
            (0, 0, visible.width, visible.height)
        )

    def capture_window(self, window_id: int, include_frame: bool) -> Image.Image:
        window = self._window(window_id)
        assert window.frame_bounds is not None  # every Quartz window has its frame
        frame = window.frame_bounds
        image = self._image(None, window_id, f"window {window_id}")
        if image.size != (frame.width, frame.height):  # a frame at a fractional point position
            image = image.resize((frame.width, frame.height))
        if include_frame:
            return image
        top = window.bounds.y - frame.y
        return image.crop((0, top, window.bounds.width, top + window.bounds.height))

    def cursor_position(self) -> CursorPosition:
        x, y = self._quartz.cursor()
        display_id = next((d.id for d in self.displays() if d.bounds.contains(x, y)), None)
        return CursorPosition(x=x, y=y, display_id=display_id)

    def activate_window(self, window_id: int) -> None:
        window = self._window(window_id)
        if not self._quartz.input_allowed():  # raising one window of an app is AX's to do
            raise accessibility_denied(self._quartz.program, "focus a window")
        if window.pid is None or window.frame_bounds is None:
            raise BackendError(ErrorCode.INPUT_FAILED, f"window {window_id} has no owning process")
        self._quartz.activate(window.pid, window.frame_bounds)

    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]:
        return []  # AX positions are global points, as deskrig's coordinates are

    def damage_serial(self) -> int:
        return next(self._serials)

    def close(self) -> None:
        self._quartz.close()

    def _window(self, window_id: int) -> WindowInfo:
        window = next((w for w in self.windows() if w.id == window_id), None)
        if window is None:
            raise window_not_found(window_id)
        return window

    def _image(self, region: Bounds | None, window_id: int | None, what: str) -> Image.Image:
        # Checked on every capture: the user may revoke the permission while deskrig runs.
        if not self._quartz.screen_capture_allowed():
            raise screen_recording_denied(self._quartz.program)
        image = self._quartz.image(region, window_id)
        if image is None:
            raise BackendError(
                ErrorCode.CAPTURE_FAILED,
                f"Quartz returned no image of the {what}",
                details={"window_id": window_id} if window_id is not None else None,
            )
        return image.convert("RGB") if image.mode != "RGB" else image
