"""The Win32 calls the Windows backend makes, through ctypes: thin, typed, and failing loudly.

Every function here is one or two Win32 calls with their argument and result types declared
(handles are pointer-sized: an undeclared argument would be truncated to a C int) and a failure
turned into the project's error (``windows_errors.win32_error``) with GetLastError's code. What
to do with the results is decided in the pure modules (``windows_records``, ``windows_keys``,
``windows_events``, ``windows_dpi``), which are unit-tested on any platform.

Windows only: mypy checks this module with ``--platform win32`` (tests/native/test_windows_mypy.py).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Any

from deskrig.desktop import windows_dpi as dpi
from deskrig.desktop import windows_structs as w
from deskrig.desktop.windows_errors import E_ACCESSDENIED, ERROR_ACCESS_DENIED, hresult, win32_error
from deskrig.desktop.windows_records import MonitorRecord, Rect, WindowRecord
from deskrig.errors import BackendError, ErrorCode

assert sys.platform == "win32"  # the rest of the module is Windows' (mypy skips it elsewhere)

from ctypes import wintypes  # noqa: E402  (after the platform check, as mypy reads it)

HANDLE = ctypes.c_void_p
BOOL = wintypes.BOOL
UINT = ctypes.c_uint32

user32 = ctypes.WinDLL("user32", use_last_error=True)
gdi32 = ctypes.WinDLL("gdi32", use_last_error=True)
kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
dwmapi = ctypes.WinDLL("dwmapi")


def declare(dll: ctypes.WinDLL, name: str, restype: Any, *argtypes: Any) -> Any:
    function = getattr(dll, name)
    function.restype = restype
    function.argtypes = argtypes
    return function


WNDENUMPROC = ctypes.WINFUNCTYPE(BOOL, HANDLE, HANDLE)
MONITORENUMPROC = ctypes.WINFUNCTYPE(BOOL, HANDLE, HANDLE, ctypes.POINTER(w.RECT), HANDLE)

_EnumWindows = declare(user32, "EnumWindows", BOOL, WNDENUMPROC, HANDLE)
_GetWindowTextLengthW = declare(user32, "GetWindowTextLengthW", ctypes.c_int, HANDLE)
_GetWindowTextW = declare(user32, "GetWindowTextW", ctypes.c_int, HANDLE, ctypes.c_wchar_p, ctypes.c_int)
_GetClassNameW = declare(user32, "GetClassNameW", ctypes.c_int, HANDLE, ctypes.c_wchar_p, ctypes.c_int)
_GetWindowThreadProcessId = declare(
    user32, "GetWindowThreadProcessId", w.DWORD, HANDLE, ctypes.POINTER(w.DWORD)
)
_GetWindowLongW = declare(user32, "GetWindowLongW", ctypes.c_int32, HANDLE, ctypes.c_int)
_GetWindow = declare(user32, "GetWindow", HANDLE, HANDLE, UINT)
_GetClientRect = declare(user32, "GetClientRect", BOOL, HANDLE, ctypes.POINTER(w.RECT))
_GetWindowRect = declare(user32, "GetWindowRect", BOOL, HANDLE, ctypes.POINTER(w.RECT))
_ClientToScreen = declare(user32, "ClientToScreen", BOOL, HANDLE, ctypes.POINTER(w.POINT))
_GetWindowPlacement = declare(user32, "GetWindowPlacement", BOOL, HANDLE, ctypes.POINTER(w.WINDOWPLACEMENT))
_IsWindow = declare(user32, "IsWindow", BOOL, HANDLE)
_IsIconic = declare(user32, "IsIconic", BOOL, HANDLE)
_ShowWindow = declare(user32, "ShowWindow", BOOL, HANDLE, ctypes.c_int)
_SetForegroundWindow = declare(user32, "SetForegroundWindow", BOOL, HANDLE)
_BringWindowToTop = declare(user32, "BringWindowToTop", BOOL, HANDLE)
_GetForegroundWindow = declare(user32, "GetForegroundWindow", HANDLE)
_AttachThreadInput = declare(user32, "AttachThreadInput", BOOL, w.DWORD, w.DWORD, BOOL)
_GetCurrentThreadId = declare(kernel32, "GetCurrentThreadId", w.DWORD)
_GetCursorPos = declare(user32, "GetCursorPos", BOOL, ctypes.POINTER(w.POINT))
_SetCursorPos = declare(user32, "SetCursorPos", BOOL, ctypes.c_int, ctypes.c_int)
_SendInput = declare(user32, "SendInput", UINT, UINT, ctypes.POINTER(w.INPUT), ctypes.c_int)
_VkKeyScanW = declare(user32, "VkKeyScanW", ctypes.c_short, ctypes.c_wchar)
_MapVirtualKeyW = declare(user32, "MapVirtualKeyW", UINT, UINT, UINT)
_GetAsyncKeyState = declare(user32, "GetAsyncKeyState", ctypes.c_short, ctypes.c_int)
_EnumDisplayMonitors = declare(user32, "EnumDisplayMonitors", BOOL, HANDLE, HANDLE, MONITORENUMPROC, HANDLE)
_GetMonitorInfoW = declare(user32, "GetMonitorInfoW", BOOL, HANDLE, ctypes.POINTER(w.MONITORINFOEXW))
_GetDC = declare(user32, "GetDC", HANDLE, HANDLE)
_ReleaseDC = declare(user32, "ReleaseDC", ctypes.c_int, HANDLE, HANDLE)
_PrintWindow = declare(user32, "PrintWindow", BOOL, HANDLE, HANDLE, UINT)
_CreateCompatibleDC = declare(gdi32, "CreateCompatibleDC", HANDLE, HANDLE)
_CreateCompatibleBitmap = declare(gdi32, "CreateCompatibleBitmap", HANDLE, HANDLE, ctypes.c_int, ctypes.c_int)
_SelectObject = declare(gdi32, "SelectObject", HANDLE, HANDLE, HANDLE)
_DeleteObject = declare(gdi32, "DeleteObject", BOOL, HANDLE)
_DeleteDC = declare(gdi32, "DeleteDC", BOOL, HANDLE)
_GetDIBits = declare(
    gdi32, "GetDIBits", ctypes.c_int, HANDLE, HANDLE, UINT, UINT, ctypes.c_void_p, ctypes.c_void_p, UINT
)
_DwmGetWindowAttribute = declare(
    dwmapi, "DwmGetWindowAttribute", ctypes.c_long, HANDLE, w.DWORD, ctypes.c_void_p, w.DWORD
)
_OpenProcess = declare(kernel32, "OpenProcess", HANDLE, w.DWORD, BOOL, w.DWORD)
_CloseHandle = declare(kernel32, "CloseHandle", BOOL, HANDLE)
_GetExitCodeProcess = declare(kernel32, "GetExitCodeProcess", BOOL, HANDLE, ctypes.POINTER(w.DWORD))
_QueryFullProcessImageNameW = declare(
    kernel32, "QueryFullProcessImageNameW", BOOL, HANDLE, w.DWORD, ctypes.c_wchar_p, ctypes.POINTER(w.DWORD)
)


def last_error(operation: str, fallback: ErrorCode, **details: object) -> BackendError:
    return win32_error(ctypes.get_last_error(), operation, fallback, **details)


# -- DPI awareness -------------------------------------------------------------------------------


def _try_awareness_context() -> bool:
    set_context = declare(user32, "SetProcessDpiAwarenessContext", BOOL, HANDLE)
    if set_context(HANDLE(dpi.DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2)):
        return True
    raise OSError(ctypes.get_last_error())


def _try_process_awareness() -> bool:
    shcore = ctypes.WinDLL("shcore")
    result = int(
        declare(shcore, "SetProcessDpiAwareness", ctypes.c_long, ctypes.c_int)(
            dpi.PROCESS_PER_MONITOR_DPI_AWARE
        )
    )
    if result == 0:
        return True
    raise OSError(hresult(result))


def _try_system_awareness() -> bool:
    return bool(declare(user32, "SetProcessDPIAware", BOOL)())


def _current_awareness() -> dpi.Awareness:
    """The awareness already in force (set by the app's manifest or an earlier call)."""
    get_context = declare(user32, "GetThreadDpiAwarenessContext", HANDLE)
    equal = declare(user32, "AreDpiAwarenessContextsEqual", BOOL, HANDLE, HANDLE)
    awareness_of = declare(user32, "GetAwarenessFromDpiAwarenessContext", ctypes.c_int, HANDLE)
    context = get_context()
    if equal(context, HANDLE(dpi.DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2)):
        return "per-monitor-v2"
    return dpi.DPI_AWARENESS.get(int(awareness_of(context)), "unaware")


def become_dpi_aware() -> dpi.AwarenessOutcome:
    """Ask for the best DPI awareness this Windows has (``windows_dpi`` says why), before any
    window, DC or mss grabber exists: awareness is fixed at a process's first use of them."""
    steps: list[Callable[[], bool]] = [_try_awareness_context, _try_process_awareness, _try_system_awareness]
    failures: list[tuple[str, str]] = []
    for (api, awareness), step in zip(dpi.AWARENESS_STEPS, steps, strict=True):
        try:
            if step():
                return dpi.AwarenessOutcome(awareness, tuple(failures))
            failures.append((api, "refused"))
        except AttributeError:
            failures.append((api, "not available on this Windows"))
        except OSError as exc:
            code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
            if code in (ERROR_ACCESS_DENIED, E_ACCESSDENIED):
                return dpi.AwarenessOutcome(_current_awareness(), tuple(failures), preset=True)
            failures.append((api, f"Windows error {code:#x}"))
    return dpi.AwarenessOutcome("unaware", tuple(failures))


# -- windows -------------------------------------------------------------------------------------


def top_level_windows() -> list[int]:
    """Every top-level window's handle, top of the z-order first."""
    handles: list[int] = []

    def collect(hwnd: int | None, _param: int | None) -> bool:
        handles.append(hwnd or 0)
        return True

    if not _EnumWindows(WNDENUMPROC(collect), None):
        raise last_error("EnumWindows", ErrorCode.CAPTURE_FAILED)
    return handles


def _text(hwnd: int) -> str:
    length = int(_GetWindowTextLengthW(hwnd))
    buffer = ctypes.create_unicode_buffer(length + 1)
    _GetWindowTextW(hwnd, buffer, length + 1)
    return buffer.value


def _class_name(hwnd: int) -> str:
    buffer = ctypes.create_unicode_buffer(256)
    _GetClassNameW(hwnd, buffer, 256)
    return buffer.value


def window_pid(hwnd: int) -> tuple[int, int]:
    """(process id, thread id) of a window's creator."""
    pid = w.DWORD()
    thread = int(_GetWindowThreadProcessId(hwnd, ctypes.byref(pid)))
    return pid.value, thread


def process_image(pid: int) -> str:
    """The full path of a process's executable; "" when it cannot be opened (another user's)."""
    process = _OpenProcess(w.PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not process:
        return ""
    try:
        size = w.DWORD(32768)
        buffer = ctypes.create_unicode_buffer(size.value)
        return buffer.value if _QueryFullProcessImageNameW(process, 0, buffer, ctypes.byref(size)) else ""
    finally:
        _CloseHandle(process)


def process_running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (one another user runs counts)."""
    process = _OpenProcess(w.PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not process:
        return ctypes.get_last_error() == ERROR_ACCESS_DENIED
    try:
        code = w.DWORD()
        return bool(_GetExitCodeProcess(process, ctypes.byref(code))) and code.value == w.STILL_ACTIVE
    finally:
        _CloseHandle(process)


def _rect(r: w.RECT) -> Rect:
    return Rect(r.left, r.top, r.right, r.bottom)


def _dwm_rect(hwnd: int, attribute: int) -> Rect | None:
    rect = w.RECT()
    if _DwmGetWindowAttribute(hwnd, attribute, ctypes.byref(rect), ctypes.sizeof(rect)) != 0:
        return None
    return _rect(rect)


def _cloaked(hwnd: int) -> int:
    value = w.DWORD()
    if _DwmGetWindowAttribute(hwnd, w.DWMWA_CLOAKED, ctypes.byref(value), ctypes.sizeof(value)) != 0:
        return 0
    return value.value


def client_rect(hwnd: int) -> Rect:
    """The client area in screen coordinates."""
    rect, origin = w.RECT(), w.POINT(0, 0)
    if not _GetClientRect(hwnd, ctypes.byref(rect)) or not _ClientToScreen(hwnd, ctypes.byref(origin)):
        raise last_error("GetClientRect", ErrorCode.CAPTURE_FAILED, window_id=hwnd)
    return Rect(origin.x, origin.y, origin.x + rect.right, origin.y + rect.bottom)


def window_rect(hwnd: int) -> Rect:
    """GetWindowRect: the frame including the invisible resize borders (what PrintWindow draws)."""
    rect = w.RECT()
    if not _GetWindowRect(hwnd, ctypes.byref(rect)):
        raise last_error("GetWindowRect", ErrorCode.CAPTURE_FAILED, window_id=hwnd)
    return _rect(rect)


def frame_rect(hwnd: int) -> Rect:
    """The visible frame (DWM's extended frame bounds; the window rect where DWM has none)."""
    return _dwm_rect(hwnd, w.DWMWA_EXTENDED_FRAME_BOUNDS) or window_rect(hwnd)


def _restored(hwnd: int) -> Rect | None:
    placement = w.WINDOWPLACEMENT()
    placement.length = ctypes.sizeof(placement)
    if not _GetWindowPlacement(hwnd, ctypes.byref(placement)):
        return None
    return _rect(placement.rcNormalPosition)


def window_record(hwnd: int, images: dict[int, str]) -> WindowRecord | None:
    """One window as a record (None when it closed meanwhile); ``images`` caches executables by pid."""
    if not _IsWindow(hwnd):
        return None
    pid, _thread = window_pid(hwnd)
    if pid not in images:
        images[pid] = process_image(pid)
    style = int(_GetWindowLongW(hwnd, w.GWL_STYLE)) & 0xFFFFFFFF
    try:
        client, frame = client_rect(hwnd), frame_rect(hwnd)
    except BackendError:  # closed since IsWindow
        return None
    return WindowRecord(
        hwnd=hwnd,
        title=_text(hwnd),
        class_name=_class_name(hwnd),
        pid=pid,
        exe=images[pid],
        style=style,
        ex_style=int(_GetWindowLongW(hwnd, w.GWL_EXSTYLE)) & 0xFFFFFFFF,
        owner=int(_GetWindow(hwnd, w.GW_OWNER) or 0),
        cloaked=_cloaked(hwnd),
        client=client,
        frame=frame,
        restored=_restored(hwnd) if style & w.WS_MINIMIZE else None,
    )


def is_minimized(hwnd: int) -> bool:
    return bool(_IsIconic(hwnd))


def foreground_window() -> int:
    return int(_GetForegroundWindow() or 0)


def activate(hwnd: int) -> bool:
    """Restore and bring a window to the foreground; True when it is the foreground window.

    Windows lets only the foreground process (or one it allows) take the foreground; attaching our
    input queue to the foreground window's thread for the call is the documented way in."""
    if _IsIconic(hwnd):
        _ShowWindow(hwnd, w.SW_RESTORE)
    current = foreground_window()
    ours = int(_GetCurrentThreadId())
    theirs = window_pid(current)[1] if current else 0
    attached = bool(theirs and theirs != ours and _AttachThreadInput(ours, theirs, True))
    try:
        _BringWindowToTop(hwnd)
        _SetForegroundWindow(hwnd)
    finally:
        if attached:
            _AttachThreadInput(ours, theirs, False)
    return foreground_window() == hwnd


# -- monitors and the pointer --------------------------------------------------------------------


def _monitor_dpi(monitor: int) -> int:
    try:
        shcore = ctypes.WinDLL("shcore")
    except OSError:  # before Windows 8.1: one system DPI
        return 0
    get_dpi = declare(
        shcore,
        "GetDpiForMonitor",
        ctypes.c_long,
        HANDLE,
        ctypes.c_int,
        ctypes.POINTER(UINT),
        ctypes.POINTER(UINT),
    )
    x, y = UINT(), UINT()
    return x.value if get_dpi(monitor, w.MDT_EFFECTIVE_DPI, ctypes.byref(x), ctypes.byref(y)) == 0 else 0


def monitors() -> list[MonitorRecord]:
    handles: list[int] = []

    def collect(monitor: int | None, _dc: int | None, _rect: Any, _param: int | None) -> bool:
        handles.append(monitor or 0)
        return True

    if not _EnumDisplayMonitors(None, None, MONITORENUMPROC(collect), None):
        raise last_error("EnumDisplayMonitors", ErrorCode.DISPLAY_NOT_FOUND)
    records = []
    for monitor in handles:
        info = w.MONITORINFOEXW()
        info.cbSize = ctypes.sizeof(info)
        if not _GetMonitorInfoW(monitor, ctypes.byref(info)):
            continue  # unplugged meanwhile
        records.append(
            MonitorRecord(
                device=info.device,
                monitor=_rect(info.rcMonitor),
                primary=bool(info.dwFlags & w.MONITORINFOF_PRIMARY),
                dpi=_monitor_dpi(monitor),
            )
        )
    return records


def cursor() -> tuple[int, int]:
    point = w.POINT()
    if not _GetCursorPos(ctypes.byref(point)):
        raise last_error("GetCursorPos", ErrorCode.INPUT_FAILED)
    return point.x, point.y


def set_cursor(x: int, y: int) -> None:
    if not _SetCursorPos(x, y):
        raise last_error("SetCursorPos", ErrorCode.INPUT_FAILED, x=x, y=y)


# -- input ---------------------------------------------------------------------------------------


def send_input(inputs: ctypes.Array[w.INPUT]) -> None:
    """Insert the events into the input stream, all or none (SendInput is atomic per call)."""
    if not len(inputs):
        return
    sent = int(_SendInput(len(inputs), inputs, ctypes.sizeof(w.INPUT)))
    if sent != len(inputs):
        raise last_error("SendInput", ErrorCode.INPUT_FAILED, sent=sent, events=len(inputs))


def vk_scan(char: str) -> int:
    return int(_VkKeyScanW(char))


def scan_code(vk: int) -> int:
    return int(_MapVirtualKeyW(vk, w.MAPVK_VK_TO_VSC))


def key_is_down(vk: int) -> bool:
    return bool(int(_GetAsyncKeyState(vk)) & 0x8000)


# -- window capture ------------------------------------------------------------------------------


def print_window(hwnd: int, width: int, height: int, flags: int) -> bytearray:
    """A window's pixels as PrintWindow draws them into a bitmap of ``width`` x ``height``: BGRX
    rows, top down. PW_RENDERFULLCONTENT has DWM render it, so covered parts are its own."""
    screen = _GetDC(None)
    memory = _CreateCompatibleDC(screen)
    bitmap = _CreateCompatibleBitmap(screen, width, height)
    try:
        if not (screen and memory and bitmap):
            raise last_error("CreateCompatibleBitmap", ErrorCode.OUT_OF_MEMORY, width=width, height=height)
        previous = _SelectObject(memory, bitmap)
        printed = _PrintWindow(hwnd, memory, flags)
        _SelectObject(memory, previous)
        if not printed:
            raise last_error("PrintWindow", ErrorCode.CAPTURE_FAILED, window_id=hwnd)
        header = w.BITMAPINFOHEADER(
            ctypes.sizeof(w.BITMAPINFOHEADER), width, -height, 1, 32, w.BI_RGB, 0, 0, 0, 0, 0
        )
        pixels = bytearray(width * height * 4)
        buffer = (ctypes.c_char * len(pixels)).from_buffer(pixels)
        if _GetDIBits(memory, bitmap, 0, height, buffer, ctypes.byref(header), w.DIB_RGB_COLORS) != height:
            raise last_error("GetDIBits", ErrorCode.CAPTURE_FAILED, window_id=hwnd)
        return pixels
    finally:
        if bitmap:
            _DeleteObject(bitmap)
        if memory:
            _DeleteDC(memory)
        if screen:
            _ReleaseDC(None, screen)
