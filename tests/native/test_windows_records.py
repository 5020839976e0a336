"""EnumWindows and monitor records -> the window and display lists (deskrig.desktop.windows_records)."""

from __future__ import annotations

import pytest

from deskrig.desktop.windows_dpi import AwarenessOutcome, scale_for_dpi, to_logical
from deskrig.desktop.windows_records import describe_display, display_infos, virtual_desktop, window_infos
from deskrig.model import Bounds

from .windows_data import monitor_records, window_records


def test_only_application_windows_are_listed_in_z_order() -> None:
    records, foreground = window_records()
    windows = window_infos(records, foreground)
    # Left out: the taskbar and the desktop (shell classes), a cloaked UWP frame, a tool window
    # without a taskbar button, an invisible IME window, and a window with an empty frame.
    assert [w.title for w in windows] == [
        "deskrig form",
        "Save As",
        "notes.txt - Notepad",
        "Palette",
        "Downloads - File Explorer",
    ]
    assert [w.z_order for w in windows] == [0, 1, 2, 3, 4]
    assert [w.focused for w in windows] == [True, False, False, False, False]


def test_a_window_carries_its_process_client_area_and_frame() -> None:
    records, foreground = window_records()
    form, dialog, notepad, palette, _explorer = window_infos(records, foreground)
    assert (form.id, form.pid, form.app) == (394766, 7788, "python")
    assert form.bounds == Bounds(x=300, y=245, width=480, height=450)
    assert form.frame_bounds == Bounds(x=289, y=200, width=502, height=506)
    assert (dialog.app, dialog.pid) == ("notepad", 6120)
    # On the monitor left of the primary: negative screen coordinates, as Windows reports them.
    assert notepad.bounds == Bounds(x=-1800, y=150, width=900, height=600)
    # A tool window that asks for a taskbar button is listed; without a DWM frame, it has no frame.
    assert palette.frame_bounds is None
    assert palette.app == "helper"
    assert not form.minimized and not notepad.minimized


def test_a_minimized_window_reports_where_it_comes_back() -> None:
    records, foreground = window_records()
    explorer = window_infos(records, foreground)[-1]
    assert explorer.minimized
    assert explorer.bounds == Bounds(x=200, y=150, width=1200, height=800)
    assert explorer.frame_bounds is None


def test_an_app_without_executable_path_is_named_by_its_window_class() -> None:
    records, _ = window_records()
    nameless = next(r for r in records if r.title == "Empty frame")
    assert nameless.app == "Chrome_WidgetWin_0"


def test_displays_put_the_primary_first_with_its_scale() -> None:
    displays = display_infos(monitor_records())
    assert [(d.id, d.name, d.primary, d.scale) for d in displays] == [
        (1, "\\\\.\\DISPLAY1", True, 1.5),
        (2, "\\\\.\\DISPLAY2", False, 1.0),
    ]
    assert displays[1].bounds == Bounds(x=-1920, y=0, width=1920, height=1080)
    assert virtual_desktop(displays) == Bounds(x=-1920, y=0, width=5760, height=2160)
    assert virtual_desktop([]) == Bounds(x=0, y=0, width=0, height=0)


def test_a_scaled_display_is_described_with_its_logical_size() -> None:
    primary, secondary = display_infos(monitor_records())
    assert describe_display(primary) == (
        "display 1 \\\\.\\DISPLAY1: 3840x2160 at 0,0, scale 1.5 (2560x1440 logical pixels)"
    )
    assert describe_display(secondary) == "display 2 \\\\.\\DISPLAY2: 1920x1080 at -1920,0, scale 1"


@pytest.mark.parametrize(
    ("dpi", "scale"), [(96, 1.0), (120, 1.25), (144, 1.5), (192, 2.0), (288, 3.0), (0, 1.0)]
)
def test_scale_is_effective_dpi_over_96(dpi: int, scale: float) -> None:
    assert scale_for_dpi(dpi) == scale


@pytest.mark.parametrize(
    ("physical", "scale", "logical"),
    [
        (Bounds(x=0, y=0, width=3840, height=2160), 1.5, Bounds(x=0, y=0, width=2560, height=1440)),
        (Bounds(x=-1920, y=0, width=1920, height=1080), 1.0, Bounds(x=-1920, y=0, width=1920, height=1080)),
        # A rectangle that does not fall on logical pixels is covered, never cut.
        (Bounds(x=301, y=245, width=481, height=451), 1.25, Bounds(x=240, y=196, width=386, height=361)),
        (Bounds(x=-301, y=-5, width=10, height=10), 1.5, Bounds(x=-201, y=-4, width=7, height=8)),
    ],
)
def test_physical_to_logical_covers_the_pixels(physical: Bounds, scale: float, logical: Bounds) -> None:
    assert to_logical(physical, scale) == logical


def test_the_dpi_awareness_outcome_says_what_was_tried() -> None:
    best = AwarenessOutcome("per-monitor-v2")
    assert best.physical and best.describe() == "DPI awareness: per-monitor-v2"
    fallback = AwarenessOutcome(
        "system",
        failures=(
            ("SetProcessDpiAwarenessContext(PER_MONITOR_AWARE_V2)", "not in user32 (before Windows 10 1703)"),
            ("SetProcessDpiAwareness(PROCESS_PER_MONITOR_DPI_AWARE)", "Windows error 0x80070005"),
        ),
    )
    assert not fallback.physical
    text = fallback.describe()
    assert text.startswith("DPI awareness: system; SetProcessDpiAwarenessContext")
    assert "0x80070005" in text and "scaled by Windows" in text
    assert "manifest" in AwarenessOutcome("per-monitor", preset=True).describe()
