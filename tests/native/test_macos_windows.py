"""Quartz's window lists and displays as deskrig's models, and the permission and AX errors
(deskrig.desktop.macos_windows), on recorded structures (data/)."""

from __future__ import annotations

import pytest

from deskrig.desktop.macos_windows import (
    ACCESSIBILITY_PANE,
    AX_ERROR_ACTION_UNSUPPORTED,
    AX_ERROR_API_DISABLED,
    AX_ERROR_CANNOT_COMPLETE,
    AX_ERROR_INVALID_UI_ELEMENT,
    SCREEN_RECORDING_PANE,
    accessibility_denied,
    ax_failure,
    content_bounds,
    displays_from_quartz,
    screen_recording_denied,
    screen_union,
    visible_region,
    windows_from_list,
)
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, WindowInfo

from .recorded import load, quartz_displays


def listed() -> list[WindowInfo]:
    recorded = load("cgwindowlist_sonoma.json")
    return windows_from_list(recorded["windows"], recorded["frontmost_pid"], recorded["title_bar"])


def test_only_visible_app_windows_are_listed_front_to_back() -> None:
    windows = listed()

    # Not the status item, menu bar, Dock (higher layers) nor the transparent overlay.
    assert [w.id for w in windows] == [6120, 6118, 2207, 3301]
    assert [w.z_order for w in windows] == [0, 1, 2, 3]
    assert [(w.title, w.app, w.pid) for w in windows[:3]] == [
        ("tk-macos", "Python", 48213),
        ("green-macos", "Python", 48210),
        ("runner — -zsh — 80×24", "Terminal", 1894),
    ]


def test_an_entry_without_the_optional_onscreen_key_is_listed() -> None:
    recorded = load("cgwindowlist_sonoma.json")
    entries = [{k: v for k, v in e.items() if k != "kCGWindowIsOnscreen"} for e in recorded["windows"]]

    assert [w.id for w in windows_from_list(entries, None, 28)] == [6120, 6118, 2207, 3301]


def test_a_window_without_a_name_has_an_empty_title() -> None:
    assert listed()[3].title == ""


def test_the_frontmost_apps_top_window_is_the_focused_one() -> None:
    assert [w.focused for w in listed()] == [True, False, False, False]


def test_no_window_is_focused_when_the_frontmost_app_shows_none() -> None:
    recorded = load("cgwindowlist_sonoma.json")

    windows = windows_from_list(recorded["windows"], frontmost_pid=640, title_bar=28)  # the Dock

    assert not any(w.focused for w in windows)


def test_client_bounds_are_the_frame_less_the_title_bar() -> None:
    tk = listed()[0]

    assert tk.frame_bounds == Bounds(x=40, y=372, width=320, height=248)
    # Where the contract scene puts the Tk window's client area (tests/desktop/test_contract.py).
    assert tk.bounds == Bounds(x=40, y=400, width=320, height=220)


def test_fractional_frames_round_to_the_pixels_they_cover() -> None:
    terminal = listed()[2]

    assert terminal.frame_bounds == Bounds(x=210, y=140, width=586, height=481)


def test_a_frame_no_taller_than_a_title_bar_is_all_content() -> None:
    strip = Bounds(x=0, y=0, width=100, height=20)

    assert content_bounds(strip, 28) == strip


def test_displays_are_numbered_main_first_with_their_retina_scale() -> None:
    displays = displays_from_quartz(quartz_displays())

    assert [(d.id, d.primary, d.scale) for d in displays] == [(1, True, 2.0), (2, False, 1.0)]
    assert displays[0].bounds == Bounds(x=0, y=0, width=1512, height=982)
    assert displays[1].bounds == Bounds(x=-1920, y=-200, width=1920, height=1080)
    assert [d.name for d in displays] == ["Quartz display 1", "Quartz display 4"]


def test_the_screen_is_the_union_of_the_displays() -> None:
    screen = screen_union(displays_from_quartz(quartz_displays()))

    assert screen == Bounds(x=-1920, y=-200, width=3432, height=1182)


def test_no_display_is_display_not_found() -> None:
    with pytest.raises(DeskrigError) as caught:
        screen_union([])

    assert caught.value.code is ErrorCode.DISPLAY_NOT_FOUND


def test_regions_are_clipped_to_the_screen_and_refused_outside_it() -> None:
    screen = Bounds(x=0, y=0, width=1512, height=982)

    assert visible_region(Bounds(x=1500, y=970, width=50, height=50), screen) == Bounds(
        x=1500, y=970, width=12, height=12
    )
    with pytest.raises(DeskrigError) as caught:
        visible_region(Bounds(x=1600, y=0, width=10, height=10), screen)
    assert caught.value.code is ErrorCode.INVALID_REGION
    assert caught.value.details == {
        "region": {"x": 1600, "y": 0, "width": 10, "height": 10},
        "screen": screen.model_dump(),
    }


@pytest.mark.parametrize(
    ("error", "permission", "pane"),
    [
        (screen_recording_denied("iTerm.app"), "screen_recording", SCREEN_RECORDING_PANE),
        (accessibility_denied("iTerm.app", "click"), "accessibility", ACCESSIBILITY_PANE),
    ],
    ids=["screen recording", "accessibility"],
)
def test_a_missing_permission_names_its_settings_pane(
    error: DeskrigError, permission: str, pane: str
) -> None:
    assert error.code is ErrorCode.PERMISSION_DENIED
    assert error.details == {"permission": permission, "program": "iTerm.app", "settings": pane}
    assert error.remediation is not None
    assert "Privacy & Security" in pane and pane in error.remediation and "iTerm.app" in error.remediation


@pytest.mark.parametrize(
    ("ax_error", "code"),
    [
        (AX_ERROR_API_DISABLED, ErrorCode.PERMISSION_DENIED),
        (AX_ERROR_INVALID_UI_ELEMENT, ErrorCode.ELEMENT_NOT_FOUND),
        (AX_ERROR_ACTION_UNSUPPORTED, ErrorCode.INVALID_ARGUMENT),
        (AX_ERROR_CANNOT_COMPLETE, ErrorCode.A11Y_UNAVAILABLE),
    ],
)
def test_ax_errors_become_deskrig_errors(ax_error: int, code: ErrorCode) -> None:
    error = ax_failure(ax_error, "perform AXPress", "Terminal")

    assert error.code is code
    assert error.remediation
    if code is ErrorCode.PERMISSION_DENIED:
        assert ACCESSIBILITY_PANE in error.remediation
    else:
        assert error.details == {"ax_error": ax_error, "action": "perform AXPress"}
