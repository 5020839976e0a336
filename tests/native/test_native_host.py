"""The few real-host checks of the native backends that the Desktop contract (test_native_contract.py)
does not make, on the same scene, parametrized the same way (``NATIVE_BACKENDS``: each on its own
OS, in .github/workflows/macos.yml and windows.yml): ``--backend auto`` picking the backend, a
covered window's own pixels, typing and scrolling into the Tk form, the clipboard, screen video,
the launcher, and accessibility through the source ``open_access`` picks for the desktop.
Every check reads what the app itself logged or showed, so the backend is measured against the
app, not against itself.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.polling import poll

from deskrig.a11y.access import open_access
from deskrig.desktop import open_desktop
from deskrig.desktop.base import Desktop
from deskrig.model import Bounds, WindowInfo

from .conftest import APPS_DIR, NATIVE_BACKENDS, ON_MACOS, NativeScene, launch_tk_color

COVER = (0, 0, 200)


@pytest.fixture(scope="module", params=NATIVE_BACKENDS)
def desktop(request: pytest.FixtureRequest) -> Iterator[Desktop]:
    with open_desktop("auto") as opened:
        assert opened.backend_name == request.param
        yield opened


class Form:
    """The Tk form (tests/apps/tk_form.py) and the JSON lines it logs."""

    def __init__(self, log: Path) -> None:
        self.log = log
        command = [sys.executable, str(APPS_DIR / "tk_form.py"), "--title", "deskrig form", "--log", str(log)]
        self.process = subprocess.Popen(command)

    def last(self, event: str) -> dict[str, Any] | None:
        lines = self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []
        found = [entry for entry in map(json.loads, lines) if entry["event"] == event]
        return found[-1] if found else None


@pytest.fixture(scope="module")
def form(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Form]:
    app = Form(tmp_path_factory.mktemp("form") / "log")
    poll("the form is ready", lambda: app.last("ready"), timeout=60)
    yield app
    app.process.kill()
    app.process.wait(10)


def window_of(desktop: Desktop, pid: int) -> WindowInfo:
    return poll(
        f"a window of pid {pid} listed", lambda: next((w for w in desktop.windows() if w.pid == pid), None)
    )


def test_auto_picks_the_platform_backend_with_its_diagnostics(desktop: Desktop) -> None:
    components = {d.component for d in desktop.diagnostics}
    assert {"capture", "scale"} <= components
    displays = desktop.displays()
    assert displays[0].primary and displays[0].scale >= 1.0


def test_a_covered_window_is_captured_with_its_own_pixels(
    desktop: Desktop, native_scene: NativeScene, tmp_path: Path
) -> None:
    app = native_scene.apps["gtk"]
    covered = window_of(desktop, app.pid)
    cover = launch_tk_color(tmp_path, "cover", COVER, covered.bounds)
    try:
        centre = Bounds(x=covered.bounds.x + 150, y=covered.bounds.y + 100, width=4, height=4)
        desktop.activate_window(window_of(desktop, cover.pid).id)
        poll("the cover over the window", lambda: desktop.capture(centre).getpixel((1, 1))[:3] == COVER)
        own = desktop.capture_window(covered.id).convert("RGB")
        assert all(abs(a - b) <= 6 for a, b in zip(own.getpixel((150, 100)), app.color, strict=True))
    finally:
        cover.proc.kill()
        cover.proc.wait(10)


def test_typing_and_scrolling_reach_the_form(desktop: Desktop, form: Form) -> None:
    ready = form.last("ready")
    assert ready is not None
    desktop.activate_window(window_of(desktop, form.process.pid).id)
    entry, listbox = ready["widgets"]["entry"], ready["widgets"]["listbox"]
    desktop.with_input(lambda device: device.button(entry["x"] + 10, entry["y"] + entry["height"] // 2))
    text = "héllo wörld € ŋ"
    report = desktop.with_input(lambda device: device.type_text(text))
    assert report.chars == len(text)
    poll("the typed text", lambda: (form.last("entry") or {}).get("text") == text)
    centre = (listbox["x"] + listbox["width"] // 2, listbox["y"] + listbox["height"] // 2)
    desktop.with_input(lambda device: device.scroll(*centre, "down", 3))
    poll("the list scrolled", lambda: (form.last("listbox_view") or {}).get("first", 0) > 0)


def test_the_clipboard_round_trips_text(desktop: Desktop) -> None:
    desktop.clipboard.set("clipboard", "déjà vu ✓".encode())
    assert desktop.clipboard.get("clipboard").data.decode() == "déjà vu ✓"


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


def test_the_launcher_sees_an_app_end(desktop: Desktop, tmp_path: Path) -> None:
    from deskrig.launcher import process_alive, terminate

    app = launch_tk_color(tmp_path, "short-lived", (0, 200, 0), Bounds(x=60, y=60, width=100, height=100))
    assert process_alive(app.pid)
    terminate(app.pid)
    poll("the app has ended", lambda: not process_alive(app.pid))
    app.proc.wait(10)


def test_the_accessibility_source_reads_each_window_as_a_frame(
    desktop: Desktop, native_scene: NativeScene
) -> None:
    access = open_access(desktop, None)
    assert access is not None

    async def frames() -> dict[str, list[Bounds | None]]:
        client = await access.client()
        try:
            found = {}
            for kind, app in native_scene.apps.items():
                snapshot = await client.snapshot(app.pid)
                assert snapshot.elements[0].role == "application" and snapshot.elements[0].path == ()
                found[kind] = [
                    e.bounds for e in snapshot.elements if e.role == "frame" and e.name == f"{kind}-native"
                ]
            return found
        finally:
            await access.close()

    for kind, bounds in asyncio.run(frames()).items():
        listed = window_of(desktop, native_scene.apps[kind].pid)
        assert len(bounds) == 1 and bounds[0] is not None and listed.frame_bounds is not None
        assert bounds[0].intersection(listed.frame_bounds) is not None


@ON_MACOS
def test_an_ax_action_raises_a_window(native_scene: NativeScene) -> None:
    """AXRaise through the source (UI Automation has no raise pattern: Windows raises by HWND)."""
    with open_desktop("macos") as mac:
        access = open_access(mac, None)
        assert access is not None

        async def raise_each() -> None:
            client = await access.client()
            try:
                for kind, app in native_scene.apps.items():
                    snapshot = await client.snapshot(app.pid)
                    frame = next(
                        e for e in snapshot.elements if e.role == "frame" and e.name == f"{kind}-native"
                    )
                    assert await client.element_action(frame, "raise") == "AXRaise"
                    poll(f"the {kind} window on top", lambda app=app: mac.windows()[0].pid == app.pid)
            finally:
                await access.close()

        asyncio.run(raise_each())
