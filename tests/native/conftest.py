"""The native backends' real-host suite: the contract scene on the desktop of the machine running
the tests, with the backend ``--backend auto`` picks there.

``NATIVE_BACKENDS`` lists each native backend with the platform it needs: on any other platform its
tests are skipped, the one skip this suite has, because only that OS has its window server (the
pure logic of each backend is tested everywhere: tests/native/test_macos_*.py, test_windows_*.py).
The scene is the contract's two windows (tests/contract.py), both the Tk colour app
(tests/apps/tk_color.py) run by this Python, which has Tk on macOS and Windows. The contract
(test_native_contract.py) and the few host-only checks (test_native_host.py) run on it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.contract import SCENE, Subject
from tests.polling import poll
from tests.rigprocs import APPS as APPS_DIR

from deskrig.desktop.base import DesktopBackend, InputDevice
from deskrig.model import Bounds, WindowInfo

#: How far in from a window's corners its colour starts, per backend (macOS rounds windows' corners).
ROUNDED = {"macos": 12}
#: How far a captured channel may be from the painted colour, per backend (macOS converts colours
#: to the display's profile).
TOLERANCE = {"macos": 6}
#: The real-host tests of the macOS backend: they need its window server.
ON_MACOS = pytest.mark.skipif(
    sys.platform != "darwin",
    reason="real-host suite: needs macOS's window server (Quartz), with Screen Recording and "
    "Accessibility granted; runs in .github/workflows/macos.yml",
)
#: The real-host tests of the Windows backend: they need its desktop.
ON_WINDOWS = pytest.mark.skipif(
    sys.platform != "win32",
    reason="real-host suite: needs a Windows desktop (Win32, UI Automation); runs in "
    ".github/workflows/windows.yml",
)
#: Each native backend's parameter, with the platform it runs on.
NATIVE_BACKENDS = [pytest.param("macos", marks=ON_MACOS), pytest.param("windows", marks=ON_WINDOWS)]


@dataclass
class NativeApp:
    """A running Tk colour app and its geometry log."""

    kind: str
    color: tuple[int, int, int]
    log: Path
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def events(self) -> list[dict[str, Any]]:
        lines = self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []
        return [json.loads(line) for line in lines]

    def geometry(self) -> Bounds:
        """The client area the app last reported (winfo_rootx/rooty/width/height)."""
        last = self.events()[-1]
        return Bounds(x=last["x"], y=last["y"], width=last["width"], height=last["height"])


@dataclass
class NativeScene:
    apps: dict[str, NativeApp]
    #: The screen as Tk sees it (winfo_screenwidth/height): independent of the backend under test.
    screen: Bounds


def tk_screen() -> Bounds:
    script = "import tkinter; r = tkinter.Tk(); print(r.winfo_screenwidth(), r.winfo_screenheight())"
    width, height = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=60
    ).stdout.split()
    return Bounds(x=0, y=0, width=int(width), height=int(height))


def launch_tk_color(log_dir: Path, kind: str, color: tuple[int, int, int], bounds: Bounds) -> NativeApp:
    log = log_dir / f"{kind}.jsonl"
    command = [sys.executable, str(APPS_DIR / "tk_color.py"), "--title", f"{kind}-native", "--log", str(log)]
    command += ["--color", "#{:02x}{:02x}{:02x}".format(*color), "--size", f"{bounds.width}x{bounds.height}"]
    command += ["--pos", f"{bounds.x},{bounds.y}"]
    with (log_dir / f"{kind}.stderr").open("wb") as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    app = NativeApp(kind, color, log, proc)

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(
                f"tk_color.py exited with {proc.returncode}: {(log_dir / f'{kind}.stderr').read_text()}"
            )
        return any(event["event"] == "ready" for event in app.events())

    poll(f"the {kind} window to report ready", ready, timeout=60)
    return app


@pytest.fixture(scope="session")
def native_scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeScene]:
    log_dir = tmp_path_factory.mktemp("native-scene")
    apps: dict[str, NativeApp] = {}
    try:
        for kind, (color, bounds) in SCENE.items():
            apps[kind] = launch_tk_color(log_dir, kind, color, bounds)
        yield NativeScene(apps, tk_screen())
    finally:
        for app in apps.values():
            app.proc.terminate()
            app.proc.wait(timeout=10)


def open_macos() -> tuple[DesktopBackend, InputDevice, Callable[[], InputDevice]]:
    """The macOS backend and input device a server opens (``open_desktop("macos")``'s parts)."""
    from deskrig.desktop.macos import MacOSBackend
    from deskrig.desktop.macos_input import MacOSInput
    from deskrig.desktop.macos_quartz import QuartzEvents, QuartzSession

    session = QuartzSession()
    return (
        MacOSBackend(session),
        MacOSInput(QuartzEvents(session)),
        lambda: MacOSInput(QuartzEvents(QuartzSession())),
    )


def open_windows() -> tuple[DesktopBackend, InputDevice, Callable[[], InputDevice]]:
    """The Windows backend and input device a server opens (``open_desktop("windows")``'s parts)."""
    from deskrig.desktop.windows import WindowsBackend
    from deskrig.desktop.windows_input import WindowsInput

    return WindowsBackend(), WindowsInput(), WindowsInput


#: How each native backend is opened on its host.
OPENERS: dict[str, Callable[[], tuple[DesktopBackend, InputDevice, Callable[[], InputDevice]]]] = {
    "macos": open_macos,
    "windows": open_windows,
}


@pytest.fixture(scope="session")
def native_devices() -> Iterator[dict[str, tuple[DesktopBackend, InputDevice, Callable[[], InputDevice]]]]:
    """One backend and input device per native backend, opened on first use, closed at the end."""
    opened: dict[str, tuple[DesktopBackend, InputDevice, Callable[[], InputDevice]]] = {}
    yield opened
    for backend, device, _ in opened.values():
        device.close()
        backend.close()


def native_subject(
    name: str,
    scene: NativeScene,
    devices: dict[str, tuple[DesktopBackend, InputDevice, Callable[[], InputDevice]]],
) -> Subject:
    if name not in devices:
        devices[name] = OPENERS[name]()
    backend, device, new_input = devices[name]

    def settled(kind: str) -> WindowInfo:
        app = scene.apps[kind]
        return poll(
            f"the {kind} window listed where Tk says its client area is",
            lambda: next(
                (w for w in backend.windows() if w.pid == app.pid and w.bounds == app.geometry()), None
            ),
        )

    return Subject(
        name=name,
        backend=backend,
        input=device,
        colours={kind: app.color for kind, app in scene.apps.items()},
        settled=settled,
        new_input=new_input,
        screen=scene.screen,
        scale=None,
        rounded=ROUNDED.get(name, 0),
        tolerance=TOLERANCE.get(name, 0),
    )
