"""The Windows backend: Win32 through ctypes (``windows_api``), screen pixels through mss.

At start-up the process becomes per-monitor DPI aware (``windows_dpi``), before mss or any window
call, so every coordinate here is a physical pixel of the virtual desktop, on every monitor
whatever its scale: window bounds, captures, the pointer and SendInput's clicks agree. The virtual
desktop's origin is the top-left of its left-most, top-most monitor, which may be negative (a
monitor left of the primary).

- **Screen**: mss (GDI BitBlt of the desktop), BGRX rows as grabbed.
- **Windows**: EnumWindows, filtered to application windows (``windows_records``).
- **Window capture**: PrintWindow with PW_RENDERFULLCONTENT draws the window into a bitmap of its
  own, so a covered window shows its own pixels (as DWM composes it: DirectX and browser content
  too). A minimized window has nothing to draw: CAPTURE_FAILED.
- **Video**: the recorder's, from these captures (``deskrig.recording.video``), as on every backend.

Windows only: mypy checks this module with ``--platform win32``.
"""

from __future__ import annotations

import sys

import mss
from mss.exception import ScreenShotError
from PIL import Image

from deskrig import grabs
from deskrig.desktop import windows_api as api
from deskrig.desktop import windows_structs as w
from deskrig.desktop.base import DesktopBackend, WindowCapture
from deskrig.desktop.windows_records import (
    describe_display,
    display_infos,
    virtual_desktop,
    window_infos,
)
from deskrig.errors import BackendError, DeskrigError, ErrorCode
from deskrig.model import Bounds, CursorPosition, DisplayInfo, Point, WindowInfo

assert sys.platform == "win32"  # the rest of the module is Windows' (mypy skips it elsewhere)


class WindowsBackend(DesktopBackend):
    """The desktop of the session deskrig runs in."""

    name = "windows"
    a11y_in_screen_pixels = True
    captures_show_pointer = False  # mss (GDI BitBlt) leaves the cursor out

    def __init__(self) -> None:
        super().__init__()
        self.awareness = api.become_dpi_aware()
        self.note("dpi", self.awareness.describe())
        self.window_capture_method = "print_window"
        #: Executable paths by pid: a process keeps its image for life.
        self._images: dict[int, str] = {}
        self._serial = 0
        try:
            self._mss = mss.mss()
        except ScreenShotError as exc:
            raise BackendError(
                ErrorCode.DISPLAY_NOT_FOUND,
                f"cannot open the desktop for capture: {exc}",
                remediation="Run deskrig in an interactive desktop session (not a service's session 0).",
            ) from exc
        self.note(
            "capture",
            "screen: mss (GDI BitBlt); windows: PrintWindow with PW_RENDERFULLCONTENT (correct where "
            "covered); no change notification, so every capture is taken afresh",
        )
        for display in self.displays():
            self.note("scale", describe_display(display))

    # -- the DesktopBackend methods -------------------------------------------------------------

    def displays(self) -> list[DisplayInfo]:
        displays = display_infos(api.monitors())
        if not displays:
            raise DeskrigError(
                ErrorCode.DISPLAY_NOT_FOUND,
                "Windows reports no monitor",
                remediation="Run deskrig in an interactive desktop session with a display.",
            )
        return displays

    def screen_bounds(self) -> Bounds:
        return virtual_desktop(self.displays())

    def windows(self) -> list[WindowInfo]:
        handles = api.top_level_windows()
        records = [r for hwnd in handles if (r := api.window_record(hwnd, self._images)) is not None]
        # A pid no window has now may be reused by another program: forget its executable.
        for gone in self._images.keys() - {r.pid for r in records}:
            del self._images[gone]
        return window_infos(records, api.foreground_window())

    def capture(self, region: Bounds) -> Image.Image:
        return self.grab(region).image()

    def grab(self, region: Bounds) -> grabs.Grab:
        desktop = self.screen_bounds()
        visible = region.intersection(desktop)
        if visible is None:
            raise DeskrigError(
                ErrorCode.INVALID_REGION,
                "the region lies outside the screen",
                details={"region": region.model_dump(), "screen": desktop.model_dump()},
            )
        box = {"left": visible.x, "top": visible.y, "width": visible.width, "height": visible.height}
        try:
            shot = self._mss.grab(box)
        except ScreenShotError as exc:
            raise BackendError(ErrorCode.CAPTURE_FAILED, f"screen grab failed: {exc}") from exc
        return grabs.Grab.from_bgrx(shot.raw, shot.width, shot.height)

    def capture_window(self, window_id: int, include_frame: bool) -> Image.Image:
        return self.grab_window(window_id, include_frame).image

    def grab_window(self, window_id: int, include_frame: bool) -> WindowCapture:
        self._known(window_id)
        if api.is_minimized(window_id):
            raise DeskrigError(
                ErrorCode.CAPTURE_FAILED,
                "the window is minimized: Windows does not draw it",
                details={"window_id": window_id},
                remediation="Restore the window (focus_window) first, then capture it.",
            )
        outer = api.window_rect(window_id)
        wanted = api.frame_rect(window_id) if include_frame else api.client_rect(window_id)
        width, height = outer.right - outer.left, outer.bottom - outer.top
        pixels = api.print_window(window_id, width, height, w.PW_RENDERFULLCONTENT)
        whole = grabs.Grab.from_bgrx(pixels, width, height)
        box = (
            wanted.left - outer.left,
            wanted.top - outer.top,
            wanted.right - outer.left,
            wanted.bottom - outer.top,
        )
        if box == (0, 0, width, height):
            return WindowCapture(whole, "print_window")
        return WindowCapture(grabs.Grab.of(whole.image().crop(box)), "print_window")

    def cursor_position(self) -> CursorPosition:
        x, y = api.cursor()
        display_id = next((d.id for d in self.displays() if d.bounds.contains(x, y)), None)
        return CursorPosition(x=x, y=y, display_id=display_id)

    def activate_window(self, window_id: int) -> None:
        self._known(window_id)
        if not api.activate(window_id):
            raise DeskrigError(
                ErrorCode.INPUT_FAILED,
                "Windows did not bring the window to the foreground",
                details={"window_id": window_id, "foreground": api.foreground_window()},
                remediation="Windows lets only the foreground app hand over the foreground: click "
                "the window instead, or run deskrig from the foreground app (a terminal the user uses).",
            )

    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]:
        # UI Automation reports screen coordinates.
        return []

    def damage_serial(self) -> int:
        self._serial += 1  # no change notification: every capture is fresh
        return self._serial

    def close(self) -> None:
        self._mss.close()

    # -- helpers --------------------------------------------------------------------------------

    def _known(self, window_id: int) -> None:
        """WINDOW_NOT_FOUND unless ``window_id`` is one of the listed application windows."""
        if not any(window.id == window_id for window in self.windows()):
            raise DeskrigError(
                ErrorCode.WINDOW_NOT_FOUND, f"no window with id {window_id}", details={"window_id": window_id}
            )
