"""The macOS backend's decisions (deskrig.desktop.macos) over a Quartz stand-in answering from a
recorded window list: permissions first, never a desktop-picture image; window crops; video;
what ``deskrig doctor`` shows."""

from __future__ import annotations

import json
import sys

import pytest

import deskrig.desktop as desktop_module
from deskrig.cli import main
from deskrig.desktop import open_desktop
from deskrig.desktop.base import Desktop
from deskrig.desktop.macos import MacOSBackend
from deskrig.desktop.macos_windows import SCREEN_RECORDING_PANE
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

from .recorded import RecordedQuartz


@pytest.fixture
def quartz() -> RecordedQuartz:
    return RecordedQuartz()


@pytest.fixture
def backend(quartz: RecordedQuartz) -> MacOSBackend:
    return MacOSBackend(quartz)


def assert_screen_recording_denied(caught: pytest.ExceptionInfo[DeskrigError]) -> None:
    assert caught.value.code is ErrorCode.PERMISSION_DENIED
    assert caught.value.details is not None and caught.value.details["permission"] == "screen_recording"
    assert caught.value.remediation is not None and SCREEN_RECORDING_PANE in caught.value.remediation


def test_without_screen_recording_the_backend_does_not_start(quartz: RecordedQuartz) -> None:
    quartz.screen_recording = False

    with pytest.raises(DeskrigError) as caught:
        MacOSBackend(quartz)

    assert_screen_recording_denied(caught)


def test_a_permission_revoked_later_refuses_captures_rather_than_returning_an_image(
    backend: MacOSBackend, quartz: RecordedQuartz
) -> None:
    quartz.screen_recording = False

    for capture in (
        lambda: backend.capture(Bounds(x=0, y=0, width=10, height=10)),
        lambda: backend.capture_window(6120, include_frame=False),
    ):
        with pytest.raises(DeskrigError) as caught:
            capture()
        assert_screen_recording_denied(caught)
    assert quartz.images == []  # Quartz was not even asked


def test_doctor_sees_permissions_scale_and_the_capture_path(quartz: RecordedQuartz) -> None:
    quartz.accessibility = False

    notes = {(d.component, d.message) for d in MacOSBackend(quartz).diagnostics}

    assert ("permissions", "Screen Recording: granted") in notes
    assert any(c == "permissions" and "Accessibility: NOT granted" in m for c, m in notes)
    assert ("scale", "display 1 (Quartz display 1): 2 device pixels per point") in notes
    assert any(c == "capture" and "CGWindowListCreateImage" in m for c, m in notes)
    assert any(c == "windows" and "28 pt" in m for c, m in notes)


def test_deskrig_doctor_prints_them(
    quartz: RecordedQuartz, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(desktop_module, "open_desktop", lambda *args, **kwargs: Desktop(MacOSBackend(quartz)))

    assert main(["doctor"]) == 0

    report = json.loads(capsys.readouterr().out)
    assert report["backend"] == "macos"
    assert [d["scale"] for d in report["displays"]] == [2.0]
    assert {"component": "permissions", "message": "Screen Recording: granted"} in report["diagnostics"]
    assert {d["component"] for d in report["diagnostics"]} >= {"capture", "permissions", "scale", "windows"}


def test_a_region_is_captured_in_points_as_rgb(backend: MacOSBackend, quartz: RecordedQuartz) -> None:
    image = backend.capture(Bounds(x=1500, y=970, width=50, height=50))

    assert (image.mode, image.size) == ("RGB", (12, 12))
    assert quartz.images == [(Bounds(x=1500, y=970, width=12, height=12), None)]


def test_a_window_is_captured_alone_without_or_with_its_title_bar(
    backend: MacOSBackend, quartz: RecordedQuartz
) -> None:
    own = quartz.colour_of(6120)

    client = backend.capture_window(6120, include_frame=False)
    framed = backend.capture_window(6120, include_frame=True)

    assert client.size == (320, 220) and client.getcolors() == [(320 * 220, own)]
    assert framed.size == (320, 248) and framed.getpixel((5, 5)) == quartz.TITLE_BAR_COLOUR
    assert quartz.images == [(None, 6120), (None, 6120)]
    assert backend.window_capture_method == "composite"


@pytest.mark.parametrize("window_id", [43, 5021, 0, -1, 1 << 40])
def test_menu_bars_hidden_and_unknown_windows_are_window_not_found(
    backend: MacOSBackend, quartz: RecordedQuartz, window_id: int
) -> None:
    for call in (
        lambda: backend.capture_window(window_id, False),
        lambda: backend.activate_window(window_id),
    ):
        with pytest.raises(DeskrigError) as caught:
            call()
        assert caught.value.code is ErrorCode.WINDOW_NOT_FOUND
        assert caught.value.details == {"window_id": window_id}
    assert quartz.images == [] and quartz.activated == []


def test_activating_a_window_activates_its_app_at_its_frame(
    backend: MacOSBackend, quartz: RecordedQuartz
) -> None:
    backend.activate_window(2207)

    assert quartz.activated == [(1894, Bounds(x=210, y=140, width=586, height=481))]


def test_without_accessibility_focusing_a_window_is_permission_denied(
    backend: MacOSBackend, quartz: RecordedQuartz
) -> None:
    quartz.accessibility = False

    with pytest.raises(DeskrigError) as caught:
        backend.activate_window(2207)

    assert caught.value.code is ErrorCode.PERMISSION_DENIED
    assert caught.value.details is not None and caught.value.details["permission"] == "accessibility"
    assert quartz.activated == []


def test_every_damage_serial_is_new(backend: MacOSBackend) -> None:
    serials = [backend.damage_serial() for _ in range(3)]

    assert len(set(serials)) == 3


def test_the_cursor_is_on_the_display_under_it(backend: MacOSBackend) -> None:
    position = backend.cursor_position()

    assert (position.x, position.y, position.display_id) == (700, 30, 1)


def test_close_releases_quartz(backend: MacOSBackend, quartz: RecordedQuartz) -> None:
    backend.close()

    assert quartz.closed == 1


def test_the_macos_backend_without_pyobjc_is_a_structured_error_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As on Linux, or on a Mac where pyobjc is missing: importing AppKit fails.
    monkeypatch.delitem(sys.modules, "deskrig.desktop.macos_quartz", raising=False)
    monkeypatch.setitem(sys.modules, "AppKit", None)

    with pytest.raises(DeskrigError) as caught:
        open_desktop("macos")

    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert caught.value.details == {"backend": "macos", "platform": sys.platform}
    assert caught.value.remediation
