"""Win32 and COM failures as the project's errors: the Windows backend's one translator.

A Win32 call that fails leaves an error code (``GetLastError``, read through ctypes'
``use_last_error``); some return an HRESULT (shcore). UI Automation's own HRESULTs are
``a11y.windows_uia``'s. :func:`win32_error` turns either
into a :class:`~deskrig.errors.BackendError` whose code says what the caller can do about it: a
window that vanished is WINDOW_NOT_FOUND, a process of higher integrity refusing us (UIPI: an
elevated app, the UAC prompt, the lock screen) is PERMISSION_DENIED with the remediation that
names elevation, anything else the operation's own code.
"""

from __future__ import annotations

from deskrig.errors import BackendError, ErrorCode

ERROR_ACCESS_DENIED = 5
ERROR_NOT_ENOUGH_MEMORY = 8
ERROR_OUTOFMEMORY = 14
ERROR_INVALID_WINDOW_HANDLE = 1400
#: SetProcessDpiAwarenessContext: the awareness was already set (manifest or an earlier call).
E_ACCESSDENIED = 0x80070005
E_OUTOFMEMORY = 0x8007000E

_ELEVATION = (
    "Windows keeps input, capture and UI Automation of an elevated (administrator) app, the UAC "
    "prompt and the lock screen from processes of lower integrity: run deskrig elevated too, or "
    "run the app unelevated."
)

#: Error code -> (project code, remediation), whatever the operation.
_KNOWN: dict[int, tuple[ErrorCode, str | None]] = {
    ERROR_ACCESS_DENIED: (ErrorCode.PERMISSION_DENIED, _ELEVATION),
    E_ACCESSDENIED: (ErrorCode.PERMISSION_DENIED, _ELEVATION),
    ERROR_INVALID_WINDOW_HANDLE: (ErrorCode.WINDOW_NOT_FOUND, "List the windows again: this one is gone."),
    ERROR_NOT_ENOUGH_MEMORY: (ErrorCode.OUT_OF_MEMORY, None),
    ERROR_OUTOFMEMORY: (ErrorCode.OUT_OF_MEMORY, None),
    E_OUTOFMEMORY: (ErrorCode.OUT_OF_MEMORY, None),
}


def hresult(value: int) -> int:
    """An HRESULT as the unsigned 32-bit number the tables use (COM hands out signed ones)."""
    return value & 0xFFFFFFFF


def win32_error(code: int, operation: str, fallback: ErrorCode, **details: object) -> BackendError:
    """The error for ``operation`` failing with Win32 error or HRESULT ``code``; ``fallback`` is
    the code of a failure this table does not know."""
    number = hresult(code)
    mapped, remediation = _KNOWN.get(number, (fallback, None))
    shown = f"0x{number:08X}" if number > 0xFFFF else str(number)
    return BackendError(
        mapped,
        f"{operation} failed (Windows error {shown})",
        details={"windows_error": number, **details},
        remediation=remediation,
    )
