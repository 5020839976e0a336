"""The Windows clipboard as a :class:`~deskrig.desktop.clipboard.SelectionStore`.

Text is CF_UNICODETEXT (UTF-16, NUL-terminated), which every Windows app reads and writes; Windows
synthesises it from and into the older text formats itself. Any other MIME type is a clipboard
format registered under that name (RegisterClipboardFormatW), so data set by deskrig as
``image/png`` reads back as ``image/png``; formats other apps put there under other names are not
offered. Windows has no primary selection: it is always empty and cannot be set.

The clipboard is one lock for the whole session: another app may hold it open for a moment, so
opening it is retried for a short while before INPUT_FAILED.

Windows only: mypy checks this module with ``--platform win32``.
"""

from __future__ import annotations

import ctypes
import sys
import time

from deskrig.desktop import windows_structs as w
from deskrig.desktop.clipboard import TEXT_MIME, Selection, is_text
from deskrig.desktop.input_limits import CLIPBOARD_TIMEOUT_S
from deskrig.errors import DeskrigError, ErrorCode

assert sys.platform == "win32"  # the rest of the module is Windows' (mypy skips it elsewhere)

from deskrig.desktop.windows_api import BOOL, HANDLE, UINT, declare, kernel32, last_error, user32  # noqa: E402

_OpenClipboard = declare(user32, "OpenClipboard", BOOL, HANDLE)
_CloseClipboard = declare(user32, "CloseClipboard", BOOL)
_EmptyClipboard = declare(user32, "EmptyClipboard", BOOL)
_EnumClipboardFormats = declare(user32, "EnumClipboardFormats", UINT, UINT)
_GetClipboardFormatNameW = declare(
    user32, "GetClipboardFormatNameW", ctypes.c_int, UINT, ctypes.c_wchar_p, ctypes.c_int
)
_RegisterClipboardFormatW = declare(user32, "RegisterClipboardFormatW", UINT, ctypes.c_wchar_p)
_GetClipboardData = declare(user32, "GetClipboardData", HANDLE, UINT)
_SetClipboardData = declare(user32, "SetClipboardData", HANDLE, UINT, HANDLE)
_GlobalAlloc = declare(kernel32, "GlobalAlloc", HANDLE, UINT, ctypes.c_size_t)
_GlobalFree = declare(kernel32, "GlobalFree", HANDLE, HANDLE)
_GlobalLock = declare(kernel32, "GlobalLock", ctypes.c_void_p, HANDLE)
_GlobalUnlock = declare(kernel32, "GlobalUnlock", BOOL, HANDLE)
_GlobalSize = declare(kernel32, "GlobalSize", ctypes.c_size_t, HANDLE)

#: How often opening a clipboard another app holds is tried again.
_RETRY_S = 0.01


class WindowsClipboard:
    """CF_UNICODETEXT and registered MIME formats; no primary selection."""

    def _open(self) -> None:
        deadline = time.monotonic() + CLIPBOARD_TIMEOUT_S
        while not _OpenClipboard(None):
            if time.monotonic() > deadline:
                raise last_error("OpenClipboard (another app holds the clipboard)", ErrorCode.INPUT_FAILED)
            time.sleep(_RETRY_S)

    def types(self, selection: Selection) -> list[str]:
        if selection == "primary":
            return []
        self._open()
        try:
            found: list[str] = []
            fmt = int(_EnumClipboardFormats(0))
            while fmt:
                if fmt == w.CF_UNICODETEXT:
                    found.append(TEXT_MIME)
                else:
                    buffer = ctypes.create_unicode_buffer(256)
                    if _GetClipboardFormatNameW(fmt, buffer, 256) and "/" in buffer.value:
                        found.append(buffer.value)
                fmt = int(_EnumClipboardFormats(fmt))
            return found
        finally:
            _CloseClipboard()

    def fetch(self, selection: Selection, mime: str) -> bytes:
        fmt = w.CF_UNICODETEXT if is_text(mime) else int(_RegisterClipboardFormatW(mime))
        self._open()
        try:
            handle = _GetClipboardData(fmt)
            if not handle:
                raise last_error("GetClipboardData", ErrorCode.INPUT_FAILED, mime=mime)
            pointer = _GlobalLock(handle)
            try:
                data = ctypes.string_at(pointer, int(_GlobalSize(handle)))
            finally:
                _GlobalUnlock(handle)
        finally:
            _CloseClipboard()
        if fmt == w.CF_UNICODETEXT:
            return data.decode("utf-16-le", "replace").split("\0", 1)[0].encode("utf-8")
        return data

    def offer(self, selection: Selection, data: bytes, types: list[str]) -> None:
        if selection == "primary":
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                "Windows has no primary selection",
                details={"selection": selection},
                remediation="Set the clipboard (selection 'clipboard') instead.",
            )
        text = any(is_text(mime) for mime in types)
        fmt = w.CF_UNICODETEXT if text else int(_RegisterClipboardFormatW(types[0]))
        payload = data.decode("utf-8", "replace").encode("utf-16-le") + b"\0\0" if text else data
        memory = _GlobalAlloc(w.GMEM_MOVEABLE, max(len(payload), 1))
        if not memory:
            raise last_error("GlobalAlloc", ErrorCode.OUT_OF_MEMORY, size=len(payload))
        pointer = _GlobalLock(memory)
        ctypes.memmove(pointer, payload, len(payload))
        _GlobalUnlock(memory)
        self._open()
        try:
            _EmptyClipboard()
            if not _SetClipboardData(fmt, memory):  # on success the clipboard owns the memory
                _GlobalFree(memory)
                raise last_error("SetClipboardData", ErrorCode.INPUT_FAILED)
        finally:
            _CloseClipboard()

    def close(self) -> None:
        """Nothing to release: the clipboard is opened and closed around each call."""
