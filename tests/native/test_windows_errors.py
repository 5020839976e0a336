"""Win32 error codes and HRESULTs as the project's errors (deskrig.desktop.windows_errors)."""

from __future__ import annotations

import pytest

from deskrig.a11y.windows_uia import uia_error
from deskrig.desktop.windows_errors import win32_error
from deskrig.errors import BackendError, ErrorCode


@pytest.mark.parametrize(
    ("code", "expected", "shown"),
    [
        (5, ErrorCode.PERMISSION_DENIED, "5"),  # ERROR_ACCESS_DENIED: UIPI, an elevated target
        (-2147024891, ErrorCode.PERMISSION_DENIED, "0x80070005"),  # E_ACCESSDENIED as COM signs it
        (1400, ErrorCode.WINDOW_NOT_FOUND, "1400"),  # ERROR_INVALID_WINDOW_HANDLE
        (8, ErrorCode.OUT_OF_MEMORY, "8"),
        (1418, ErrorCode.CAPTURE_FAILED, "1418"),  # unknown here: the operation's own code
    ],
)
def test_codes_map_to_what_the_caller_can_do(code: int, expected: ErrorCode, shown: str) -> None:
    error = win32_error(code, "PrintWindow", ErrorCode.CAPTURE_FAILED, window_id=394766)
    assert isinstance(error, BackendError)
    assert error.code == expected
    assert error.message == f"PrintWindow failed (Windows error {shown})"
    assert error.details == {"windows_error": code & 0xFFFFFFFF, "window_id": 394766}
    assert error.remediation


def test_access_denied_names_elevation() -> None:
    assert "elevated" in (win32_error(5, "SendInput", ErrorCode.INPUT_FAILED).remediation or "")


@pytest.mark.parametrize(
    ("hresult", "expected"),
    [
        (-2147220991, ErrorCode.ELEMENT_NOT_FOUND),  # UIA_E_ELEMENTNOTAVAILABLE, signed as COM hands it
        (0x80040200, ErrorCode.INVALID_ARGUMENT),  # UIA_E_ELEMENTNOTENABLED
        (0x80131505, ErrorCode.TIMEOUT),  # UIA_E_TIMEOUT
        (0x80070005, ErrorCode.PERMISSION_DENIED),
        (0x80004005, ErrorCode.A11Y_UNAVAILABLE),  # E_FAIL: the operation's own code
    ],
)
def test_ui_automation_hresults(hresult: int, expected: ErrorCode) -> None:
    error = uia_error(hresult, "Invoke", ErrorCode.A11Y_UNAVAILABLE)
    assert error.code == expected
    assert error.details == {"hresult": hresult & 0xFFFFFFFF}
    assert error.message == f"Invoke failed (HRESULT 0x{hresult & 0xFFFFFFFF:08X})"
