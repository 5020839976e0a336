"""What EnumWindows and EnumDisplayMonitors report, as plain records, and the project's window and
display lists made from them.

The native side (``windows.py``) reads one :class:`WindowRecord` per top-level window, in
EnumWindows' order (top of the z-order first), and one :class:`MonitorRecord` per monitor; the
choices of which windows an agent sees, how they are numbered and ordered, are made here, over
plain data, and unit-tested on any platform with recorded records.

An application window is what Alt+Tab would offer: visible, not cloaked by DWM (a window of
another virtual desktop, a suspended UWP app, a window the shell hides), not a tool window (a
floating palette, a tray helper) unless it asks for a taskbar button, and not the shell's own
desktop and taskbar. Owned windows (dialogs) are listed like their owners, as X11 lists transient
windows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PureWindowsPath

from deskrig.desktop import windows_structs as w
from deskrig.desktop.windows_dpi import scale_for_dpi, to_logical
from deskrig.model import FIRST_DISPLAY_ID, Bounds, DisplayInfo, WindowInfo

#: Window classes of the shell's desktop and taskbars: always visible, never an app's window.
SHELL_CLASSES = frozenset({"Progman", "WorkerW", "Shell_TrayWnd", "Shell_SecondaryTrayWnd"})


@dataclass(frozen=True)
class Rect:
    """A Win32 RECT: left, top, right (exclusive), bottom (exclusive), in physical pixels."""

    left: int
    top: int
    right: int
    bottom: int

    @property
    def bounds(self) -> Bounds:
        return Bounds(x=self.left, y=self.top, width=self.right - self.left, height=self.bottom - self.top)

    @property
    def empty(self) -> bool:
        return self.right <= self.left or self.bottom <= self.top


@dataclass(frozen=True)
class WindowRecord:
    """One top-level window as user32 and DWM describe it."""

    hwnd: int
    title: str
    class_name: str
    pid: int
    #: The full path of the process's executable ("" when the process cannot be opened).
    exe: str
    style: int
    ex_style: int
    #: The owner window (a dialog's main window), 0 for none.
    owner: int
    #: DWMWA_CLOAKED: nonzero when DWM does not draw the window.
    cloaked: int
    #: The client area's corners in screen coordinates (GetClientRect + ClientToScreen).
    client: Rect
    #: DWMWA_EXTENDED_FRAME_BOUNDS: the visible frame, without the invisible resize borders.
    frame: Rect
    #: A minimized window's frame once restored (GetWindowPlacement's rcNormalPosition): it has
    #: no client area on screen then, so this stands for its bounds.
    restored: Rect | None = None

    @property
    def minimized(self) -> bool:
        return bool(self.style & w.WS_MINIMIZE)

    @property
    def app(self) -> str:
        """The executable's name without its extension ("notepad"), else the window class."""
        return PureWindowsPath(self.exe).stem if self.exe else self.class_name


def is_app_window(record: WindowRecord) -> bool:
    """Whether ``record`` is an application window (see the module docstring)."""
    if not record.style & w.WS_VISIBLE or record.cloaked or record.class_name in SHELL_CLASSES:
        return False
    if record.ex_style & w.WS_EX_TOOLWINDOW and not record.ex_style & w.WS_EX_APPWINDOW:
        return False
    # A minimized window keeps no client area on screen; any other needs one to be seen.
    return record.minimized or not record.frame.empty


def window_info(record: WindowRecord, foreground: int, z_order: int) -> WindowInfo:
    if record.minimized:
        bounds, frame = (record.restored or record.client).bounds, None
    else:
        bounds, frame = record.client.bounds, None if record.frame == record.client else record.frame.bounds
    return WindowInfo(
        id=record.hwnd,
        title=record.title,
        app=record.app,
        pid=record.pid or None,
        bounds=bounds,
        frame_bounds=frame,
        minimized=record.minimized,
        focused=record.hwnd == foreground,
        z_order=z_order,
    )


def window_infos(records: Iterable[WindowRecord], foreground: int) -> list[WindowInfo]:
    """The application windows among ``records`` (in z-order, top first) as the tools list them."""
    shown = [r for r in records if is_app_window(r)]
    return [window_info(r, foreground, z) for z, r in enumerate(shown)]


@dataclass(frozen=True)
class MonitorRecord:
    """One monitor as GetMonitorInfoW and GetDpiForMonitor describe it."""

    device: str
    monitor: Rect
    primary: bool
    #: Effective DPI (96 at 100 %), 0 when shcore could not tell.
    dpi: int


def display_infos(monitors: Iterable[MonitorRecord]) -> list[DisplayInfo]:
    """Monitors as displays: the primary first, the rest left to right, top to bottom."""
    ordered = sorted(monitors, key=lambda m: (not m.primary, m.monitor.left, m.monitor.top))
    return [
        DisplayInfo(
            id=number,
            name=m.device,
            bounds=m.monitor.bounds,
            primary=m.primary,
            scale=scale_for_dpi(m.dpi),
        )
        for number, m in enumerate(ordered, start=FIRST_DISPLAY_ID)
    ]


def describe_display(display: DisplayInfo) -> str:
    """One display's physical and logical size, for the diagnostics."""
    b = display.bounds
    text = (
        f"display {display.id} {display.name}: {b.width}x{b.height} at {b.x},{b.y}, scale {display.scale:g}"
    )
    if display.scale != 1.0:
        logical = to_logical(b.model_copy(update={"x": 0, "y": 0}), display.scale)
        text += f" ({logical.width}x{logical.height} logical pixels)"
    return text


def virtual_desktop(displays: Iterable[DisplayInfo]) -> Bounds:
    """The union of the displays' bounds: SM_XVIRTUALSCREEN etc., computed from the monitors."""
    boxes = [d.bounds for d in displays]
    if not boxes:
        return Bounds(x=0, y=0, width=0, height=0)
    left, top = min(b.x for b in boxes), min(b.y for b in boxes)
    right, bottom = max(b.x + b.width for b in boxes), max(b.y + b.height for b in boxes)
    return Bounds(x=left, y=top, width=right - left, height=bottom - top)
