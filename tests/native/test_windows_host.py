"""The Windows backend on a real Windows desktop, driving the Tk fixture apps under tests/apps/.

Runs in .github/workflows/windows.yml on ``windows-latest`` (Python there ships Tk). Linux cannot
run it: there is no Win32 to call. Every check reads what the app itself logged (its own geometry,
the text its entry holds, its clicks), so the backend is measured against the app, not itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.polling import poll

from deskrig.desktop import open_desktop
from deskrig.desktop.base import Desktop
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, WindowInfo

pytestmark = pytest.mark.skipif(
    sys.platform != "win32", reason="drives a Windows desktop (.github/workflows/windows.yml runs it)"
)

APPS = Path(__file__).resolve().parents[1] / "apps"
RED, BLUE = (200, 0, 0), (0, 0, 200)


class App:
    """A fixture app in its own process, with the JSON lines it logs."""

    def __init__(self, script: str, log: Path, *args: str) -> None:
        self.log = log
        self.process = subprocess.Popen([sys.executable, str(APPS / script), "--log", str(log), *args])

    def events(self, name: str) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [event for event in map(json.loads, lines) if event["event"] == name]

    def last(self, name: str) -> dict[str, Any] | None:
        found = self.events(name)
        return found[-1] if found else None

    def close(self) -> None:
        self.process.kill()
        self.process.wait(10)


def window_of(desktop: Desktop, title: str) -> WindowInfo:
    return poll(
        f"window {title!r} listed", lambda: next((w for w in desktop.windows() if w.title == title), None)
    )


@pytest.fixture(scope="module")
def desktop() -> Iterator[Desktop]:
    with open_desktop("auto") as opened:
        yield opened


@pytest.fixture(scope="module")
def red(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    options = ["--title", "deskrig red", "--color", "#c80000", "--size", "320x220", "--pos", "100,120"]
    app = App("tk_color.py", tmp_path_factory.mktemp("red") / "log", *options)
    poll("the red window is ready", lambda: app.last("ready"))
    yield app
    app.close()


@pytest.fixture(scope="module")
def form(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    app = App("tk_form.py", tmp_path_factory.mktemp("form") / "log", "--title", "deskrig form")
    poll("the form is ready", lambda: app.last("ready"))
    yield app
    app.close()


def test_the_backend_is_chosen_by_platform_and_reports_dpi_and_capture(desktop: Desktop) -> None:
    assert desktop.backend_name == "windows"
    components = {d.component for d in desktop.diagnostics}
    assert {"dpi", "capture", "scale"} <= components
    displays = desktop.displays()
    assert displays[0].primary and displays[0].id == 1 and displays[0].scale >= 1.0
    screen = desktop.screen_bounds()
    assert all(screen.intersection(d.bounds) == d.bounds for d in displays)


def test_a_window_is_listed_with_its_process_and_client_area(desktop: Desktop, red: App) -> None:
    ready = red.last("ready")
    assert ready is not None
    window = window_of(desktop, "deskrig red")
    assert window.pid == red.process.pid
    assert window.app.lower().startswith("python")
    assert window.bounds == Bounds(x=ready["x"], y=ready["y"], width=ready["width"], height=ready["height"])
    assert window.frame_bounds is not None and window.frame_bounds.width >= window.bounds.width


def test_screen_and_window_captures_show_the_window(desktop: Desktop, red: App) -> None:
    window = window_of(desktop, "deskrig red")
    desktop.activate_window(window.id)
    centre = Bounds(x=window.bounds.x + 150, y=window.bounds.y + 100, width=4, height=4)
    poll("the red window on screen", lambda: desktop.capture(centre).getpixel((1, 1)) == RED)
    captured = desktop.grab_window(window.id)
    assert captured.method == "print_window"
    assert captured.image.size == (window.bounds.width, window.bounds.height)
    assert captured.image.getpixel((150, 100)) == RED


def test_a_covered_window_is_captured_with_its_own_pixels(desktop: Desktop, red: App, tmp_path: Path) -> None:
    red_window = window_of(desktop, "deskrig red")
    options = ["--title", "deskrig cover", "--color", "#0000c8", "--size", "320x220", "--pos", "100,120"]
    cover = App("tk_color.py", tmp_path / "log", *options)
    try:
        poll("the cover is ready", lambda: cover.last("ready"))
        covering = window_of(desktop, "deskrig cover")
        desktop.activate_window(covering.id)
        centre = Bounds(x=red_window.bounds.x + 150, y=red_window.bounds.y + 100, width=4, height=4)
        poll("the cover over the red window", lambda: desktop.capture(centre).getpixel((1, 1)) == BLUE)
        assert desktop.capture_window(red_window.id).getpixel((150, 100)) == RED
    finally:
        cover.close()


def test_unknown_windows_are_refused(desktop: Desktop) -> None:
    for unknown in (0, -1, 1 << 40, 0x1FFFFF00):
        with pytest.raises(DeskrigError) as caught:
            desktop.capture_window(unknown)
        assert caught.value.code == ErrorCode.WINDOW_NOT_FOUND


def test_clicks_and_typing_reach_the_app(desktop: Desktop, form: App) -> None:
    window = window_of(desktop, "deskrig form")
    desktop.activate_window(window.id)
    ready = form.last("ready")
    assert ready is not None
    button, entry = ready["widgets"]["button"], ready["widgets"]["entry"]
    desktop.with_input(
        lambda device: device.button(button["x"] + button["width"] // 2, button["y"] + button["height"] // 2)
    )
    poll("the click", lambda: form.last("button"))
    desktop.with_input(lambda device: device.button(entry["x"] + 10, entry["y"] + entry["height"] // 2))
    poll("the entry has the focus", lambda: form.last("focus") == {"event": "focus", "widget": "entry"})
    text = "héllo wörld € ŋ"
    report = desktop.with_input(lambda device: device.type_text(text))
    assert report.path == "sendinput" and report.chars == len(text)
    poll("the typed text", lambda: (form.last("entry") or {}).get("text") == text)
    desktop.with_input(lambda device: device.press_key("ctrl+a"))
    desktop.with_input(lambda device: device.press_key("BackSpace"))
    poll("the entry emptied", lambda: (form.last("entry") or {}).get("text") == "")


def test_the_pointer_goes_where_it_is_sent(desktop: Desktop) -> None:
    for display in desktop.displays():
        x, y = display.bounds.x + 37, display.bounds.y + 41
        desktop.with_input(lambda device, x=x, y=y: device.move(x, y))
        position = desktop.cursor_position()
        assert (position.x, position.y, position.display_id) == (x, y, display.id)


def test_scrolling_moves_the_list(desktop: Desktop, form: App) -> None:
    ready = form.last("ready")
    assert ready is not None
    listbox = ready["widgets"]["listbox"]
    centre = (listbox["x"] + listbox["width"] // 2, listbox["y"] + listbox["height"] // 2)
    desktop.with_input(lambda device: device.scroll(*centre, "down", 3))
    poll("the list scrolled", lambda: (form.last("listbox_view") or {}).get("first", 0) > 0)


def test_the_clipboard_round_trips_text(desktop: Desktop) -> None:
    desktop.clipboard.set("clipboard", "déjà vu ✓".encode())
    got = desktop.clipboard.get("clipboard")
    assert got.data.decode() == "déjà vu ✓"
    with pytest.raises(DeskrigError):
        desktop.clipboard.set("primary", b"x")


def test_the_launcher_sees_an_app_end(tmp_path: Path) -> None:
    from deskrig.launcher import process_alive, terminate

    options = ["--title", "deskrig short-lived", "--color", "#00c800", "--size", "100x100"]
    app = App("tk_color.py", tmp_path / "log", *options)
    poll("the app is ready", lambda: app.last("ready"))
    assert process_alive(app.process.pid)
    terminate(app.process.pid)
    poll("the app has ended", lambda: not process_alive(app.process.pid))
    app.process.wait(10)


def test_the_screen_records_as_video(desktop: Desktop, tmp_path: Path) -> None:
    from tests.recording.conftest import ffprobe_duration, mp4_boxes

    from deskrig.observation import Observer
    from deskrig.recording.video import VideoRecorder
    from deskrig.security import WindowBlocklist

    video = tmp_path / "screen.mp4"
    recorder = VideoRecorder(Observer(desktop, WindowBlocklist([])), video)
    recorder.start()
    try:
        poll("ffmpeg writing fragments", lambda: video.exists() and video.stat().st_size > 4096)
    finally:
        assert recorder.stop() == 0, recorder.stderr_tail()
    assert mp4_boxes(video)[-1] == "mfra"  # finished by the end of its input, not killed
    assert ffprobe_duration(video) > 0


def test_ui_automation_reads_the_window_tree(desktop: Desktop, form: App) -> None:
    from deskrig.a11y.windows_uia import action_pattern, snapshot_from_uia
    from deskrig.a11y.windows_uia_native import UiaReader

    window = window_of(desktop, "deskrig form")
    tree = snapshot_from_uia(
        UiaReader().window_tree(window.id),
        pid=form.process.pid,
        app_name="python",
        snapshot_id="host",
        fetch_ms=0.0,
    )
    root = tree.elements[0]
    assert (root.role, root.name) == ("frame", "deskrig form")
    close = next(e for e in tree.elements if e.role == "push button" and e.name == "Close")
    assert action_pattern(close, "click") == "Invoke"
    assert close.bounds is not None and window.frame_bounds is not None
    assert window.frame_bounds.intersection(close.bounds) is not None
