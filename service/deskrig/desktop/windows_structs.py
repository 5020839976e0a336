"""The Win32 structures the Windows backend passes to user32, gdi32 and dwmapi, and its constants.

Fields are spelled with fixed-width ctypes (``c_int32`` for LONG, ``c_uint32`` for DWORD, ``c_uint16``
for WCHAR), never ``ctypes.wintypes``: ``wintypes.LONG`` is ``c_long``, 8 bytes on 64-bit Linux (and
``c_wchar`` 4 bytes there), so the layouts are
the 64-bit Windows ones on any 64-bit host and their sizes are unit-tested on Linux. Pointer-sized
fields (``ULONG_PTR``, handles) are ``c_size_t`` / ``c_void_p``.
"""

from __future__ import annotations

import ctypes

LONG = ctypes.c_int32
DWORD = ctypes.c_uint32
WORD = ctypes.c_uint16
ULONG_PTR = ctypes.c_size_t

# -- SendInput ---------------------------------------------------------------------------------

INPUT_MOUSE = 0
INPUT_KEYBOARD = 1

MOUSEEVENTF_MOVE = 0x0001
MOUSEEVENTF_LEFTDOWN = 0x0002
MOUSEEVENTF_LEFTUP = 0x0004
MOUSEEVENTF_RIGHTDOWN = 0x0008
MOUSEEVENTF_RIGHTUP = 0x0010
MOUSEEVENTF_MIDDLEDOWN = 0x0020
MOUSEEVENTF_MIDDLEUP = 0x0040
MOUSEEVENTF_WHEEL = 0x0800
MOUSEEVENTF_HWHEEL = 0x1000
MOUSEEVENTF_VIRTUALDESK = 0x4000
MOUSEEVENTF_ABSOLUTE = 0x8000
#: One notch of a mouse wheel, in ``mouseData`` units.
WHEEL_DELTA = 120

KEYEVENTF_EXTENDEDKEY = 0x0001
KEYEVENTF_KEYUP = 0x0002
KEYEVENTF_UNICODE = 0x0004


class MOUSEINPUT(ctypes.Structure):
    _fields_ = (
        ("dx", LONG),
        ("dy", LONG),
        ("mouseData", DWORD),
        ("dwFlags", DWORD),
        ("time", DWORD),
        ("dwExtraInfo", ULONG_PTR),
    )


class KEYBDINPUT(ctypes.Structure):
    _fields_ = (
        ("wVk", WORD),
        ("wScan", WORD),
        ("dwFlags", DWORD),
        ("time", DWORD),
        ("dwExtraInfo", ULONG_PTR),
    )


class HARDWAREINPUT(ctypes.Structure):
    _fields_ = (("uMsg", DWORD), ("wParamL", WORD), ("wParamH", WORD))


class INPUTUNION(ctypes.Union):
    _fields_ = (("mi", MOUSEINPUT), ("ki", KEYBDINPUT), ("hi", HARDWAREINPUT))


class INPUT(ctypes.Structure):
    _fields_ = (("type", DWORD), ("union", INPUTUNION))


# -- windows, monitors, bitmaps ------------------------------------------------------------------


class RECT(ctypes.Structure):
    _fields_ = (("left", LONG), ("top", LONG), ("right", LONG), ("bottom", LONG))


class POINT(ctypes.Structure):
    _fields_ = (("x", LONG), ("y", LONG))


#: ``MONITORINFOEXW.szDevice``: CCHDEVICENAME wide characters.
CCHDEVICENAME = 32


class WINDOWPLACEMENT(ctypes.Structure):
    _fields_ = (
        ("length", DWORD),
        ("flags", DWORD),
        ("showCmd", DWORD),
        ("ptMinPosition", POINT),
        ("ptMaxPosition", POINT),
        ("rcNormalPosition", RECT),
    )


class MONITORINFOEXW(ctypes.Structure):
    _fields_ = (
        ("cbSize", DWORD),
        ("rcMonitor", RECT),
        ("rcWork", RECT),
        ("dwFlags", DWORD),
        # UTF-16 units, not c_wchar: that is 4 bytes on Linux, which would move nothing here but
        # would make the structure's size (checked on Linux) differ from Windows'.
        ("szDevice", WORD * CCHDEVICENAME),
    )

    @property
    def device(self) -> str:
        units = bytes(self.szDevice)
        return units.decode("utf-16-le").split("\0", 1)[0]


class BITMAPINFOHEADER(ctypes.Structure):
    _fields_ = (
        ("biSize", DWORD),
        ("biWidth", LONG),
        ("biHeight", LONG),
        ("biPlanes", WORD),
        ("biBitCount", WORD),
        ("biCompression", DWORD),
        ("biSizeImage", DWORD),
        ("biXPelsPerMeter", LONG),
        ("biYPelsPerMeter", LONG),
        ("biClrUsed", DWORD),
        ("biClrImportant", DWORD),
    )


MONITORINFOF_PRIMARY = 0x1
#: ``GetDpiForMonitor``: the DPI the user's scale setting gives the monitor.
MDT_EFFECTIVE_DPI = 0
BI_RGB = 0
DIB_RGB_COLORS = 0

GWL_STYLE = -16
GWL_EXSTYLE = -20
GW_OWNER = 4
WS_VISIBLE = 0x10000000
WS_MINIMIZE = 0x20000000
WS_EX_TOOLWINDOW = 0x00000080
WS_EX_APPWINDOW = 0x00040000

DWMWA_EXTENDED_FRAME_BOUNDS = 9
DWMWA_CLOAKED = 14

#: ``PrintWindow``'s flag for the content DWM composes (DirectX, Chromium, WPF), which a plain
#: PrintWindow leaves black.
PW_RENDERFULLCONTENT = 0x2

SW_RESTORE = 9

PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
#: GetExitCodeProcess' code for a process that has not exited.
STILL_ACTIVE = 259
MAPVK_VK_TO_VSC = 0

# -- clipboard -----------------------------------------------------------------------------------

CF_UNICODETEXT = 13
GMEM_MOVEABLE = 0x0002
