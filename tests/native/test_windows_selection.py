"""Choosing the Windows backend: by platform at run time, and refused by name elsewhere."""

from __future__ import annotations

import sys

import pytest

from deskrig.desktop import choose_backend, open_desktop
from deskrig.errors import DeskrigError, ErrorCode


def test_auto_picks_windows_on_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    assert choose_backend("auto", env={}) == "windows"
    # An explicit X display still means X11 (an X server on Windows, such as VcXsrv).
    assert choose_backend("auto", env={}, display=":0") == "x11"


@pytest.mark.skipif(sys.platform == "win32", reason="on Windows the backend opens (test_native_host.py)")
def test_the_windows_backend_is_refused_off_windows() -> None:
    with pytest.raises(DeskrigError) as caught:
        open_desktop("windows")
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT
    assert caught.value.details == {"backend": "windows", "platform": sys.platform}
