"""Real X servers and real apps for the desktop backend tests.

Two session-wide desktops, each on its own Xvfb (display number from ``-displayfd``, so parallel
runs never collide): one managed by openbox, one with no window manager. Each runs the GTK and
the Tk colour fixture apps. ``desktop`` is parametrised over both; ``x11_backend`` is an
X11Backend on it.

``backend`` is parametrised over the desktop backends (x11, sway): a running desktop with the GTK
and the Tk form and an accessibility bus (see ``forms.py``), one per backend for the session. Everything here polls for conditions with a deadline; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from tests.polling import json_lines, poll
from tests.rigprocs import APPS as APPS_DIR
from tests.rigprocs import SYSTEM_PYTHON
from Xlib.display import Display

from deskrig.desktop.x11 import X11Backend
from deskrig.desktop.x11_windows import wm_check_window
from deskrig.model import Bounds, WindowInfo

if TYPE_CHECKING:
    from .forms import Forms

SCREEN = (1280, 800)
TIMEOUT = 15.0


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_xvfb(log_dir: Path, *extra_args: str) -> tuple[subprocess.Popen[bytes], str]:
    """Xvfb on a free display; it writes the number to the -displayfd pipe once it accepts clients."""
    read_fd, write_fd = os.pipe()
    screen = f"{SCREEN[0]}x{SCREEN[1]}x24"
    with (log_dir / "xvfb.log").open("wb") as log:
        proc = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write_fd), "-nolisten", "tcp", "-screen", "0", screen, *extra_args],
            pass_fds=(write_fd,),
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    os.close(write_fd)
    number = b""
    deadline = time.monotonic() + TIMEOUT
    try:
        while not number.endswith(b"\n"):
            ready, _, _ = select.select([read_fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(read_fd, 16) if ready else b""
            if not chunk:
                stop_process(proc)
                raise RuntimeError(f"Xvfb did not report a display: {(log_dir / 'xvfb.log').read_text()}")
            number += chunk
    finally:
        os.close(read_fd)
    return proc, f":{number.decode().strip()}"


@contextlib.contextmanager
def held_display_number() -> Iterator[int]:
    """A display number that no X server has, kept from every other until the block ends.

    A stopped Xvfb's number is the lowest free one, which the next ``-displayfd`` server on the
    machine takes. Every X server here listens on the abstract socket ``@/tmp/.X11-unix/X<n>``,
    and a ``-displayfd`` one moves on to the next number when it cannot: this binds that socket
    without listening, so a client is refused as if no server were there. A test starts its own
    server on the number with ``-nolisten local`` (its file socket alone)."""
    holder = socket.socket(socket.AF_UNIX)
    try:
        for number in range(1, 1000):
            if Path(f"/tmp/.X{number}-lock").exists() or Path(f"/tmp/.X11-unix/X{number}").exists():
                continue  # a server that may not listen on the abstract socket has it, or had it
            try:
                holder.bind(f"\0/tmp/.X11-unix/X{number}")
            except OSError:
                continue
            yield number
            return
        raise RuntimeError("no display number below 1000 is free")
    finally:
        holder.close()


def window_manager_ready(xlib: Display) -> bool:
    """EWMH: the WM has published a check window that names itself."""
    return wm_check_window(xlib) is not None


@dataclass
class FixtureApp:
    """A running colour fixture app and the geometry it reports about itself."""

    kind: str
    title: str
    color: tuple[int, int, int]
    log: Path
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def events(self) -> list[dict[str, Any]]:
        return json_lines(self.log)

    def geometry(self) -> Bounds:
        """The client area the app last reported, in root coordinates."""
        last = self.events()[-1]
        return Bounds(x=last["x"], y=last["y"], width=last["width"], height=last["height"])

    def wait_ready(self) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.kind} app {self.title!r} exited with {self.proc.returncode}")
            return any(event["event"] == "ready" for event in self.events())

        poll(f"{self.kind} app {self.title!r} to report ready", ready)


def hex_color(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


@dataclass
class Desktop:
    """One X server with its window manager (or none), the two standing apps and a test X client."""

    mode: str
    display: str
    log_dir: Path
    xlib: Display
    apps: list[FixtureApp] = field(default_factory=list)

    @property
    def managed(self) -> bool:
        return self.mode == "openbox"

    @property
    def gtk(self) -> FixtureApp:
        return self.apps[0]

    @property
    def tk(self) -> FixtureApp:
        return self.apps[1]

    def launch(
        self,
        kind: str,
        title: str,
        color: tuple[int, int, int],
        pos: tuple[int, int],
        size: tuple[int, int],
    ) -> FixtureApp:
        """Start ``tests/apps/{kind}_color.py`` and wait until it says it is mapped and painted."""
        log = self.log_dir / f"{title}.jsonl"
        env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
        env["DISPLAY"] = self.display
        command = [SYSTEM_PYTHON, str(APPS_DIR / f"{kind}_color.py"), "--title", title]
        command += ["--color", hex_color(color), "--log", str(log)]
        command += ["--size", f"{size[0]}x{size[1]}", "--pos", f"{pos[0]},{pos[1]}"]
        with (self.log_dir / f"{title}.stderr").open("wb") as stderr:
            proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        app = FixtureApp(kind=kind, title=title, color=color, log=log, proc=proc)
        app.wait_ready()
        return app

    def window_of(self, backend: X11Backend, app: FixtureApp) -> WindowInfo | None:
        return next((w for w in backend.windows() if w.pid == app.pid and w.title == app.title), None)

    def settled_window(self, backend: X11Backend, app: FixtureApp) -> WindowInfo:
        """The app's window once the backend's bounds agree with the app's own last report.

        Under a WM the app reports again when the WM moves it; polling waits that out.
        """

        def agreed() -> WindowInfo | None:
            window = self.window_of(backend, app)
            return window if window is not None and window.bounds == app.geometry() else None

        return poll(f"{app.title!r} listed at the geometry it reports", agreed)


@pytest.fixture(scope="session")
def _session_processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Every long-lived process the session starts, stopped newest first at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in reversed(procs):
        stop_process(proc)


def _start_desktop(
    mode: str, tmp_path_factory: pytest.TempPathFactory, procs: list[subprocess.Popen[bytes]]
) -> Iterator[Desktop]:
    log_dir = tmp_path_factory.mktemp(mode)
    xvfb, display = start_xvfb(log_dir)
    procs.append(xvfb)
    xlib = Display(display)
    if mode == "openbox":
        assert shutil.which("openbox"), "openbox is not installed (scripts/setup installs it)"
        with (log_dir / "openbox.log").open("wb") as log:
            procs.append(
                subprocess.Popen(
                    ["openbox", "--sm-disable"],
                    env={**os.environ, "DISPLAY": display},
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            )
        poll("openbox to set _NET_SUPPORTING_WM_CHECK", lambda: window_manager_ready(xlib))
    desktop = Desktop(mode=mode, display=display, log_dir=log_dir, xlib=xlib)
    # Apart from each other, and from where tests open their own windows (x >= 600).
    for kind, color, pos in (("gtk", (0, 200, 0), (40, 60)), ("tk", (200, 0, 0), (40, 400))):
        app = desktop.launch(kind, f"{kind}-{mode}", color, pos, (320, 220))
        procs.append(app.proc)
        desktop.apps.append(app)
    yield desktop
    xlib.close()


@pytest.fixture(scope="session")
def openbox_desktop(
    tmp_path_factory: pytest.TempPathFactory, _session_processes: list[subprocess.Popen[bytes]]
) -> Iterator[Desktop]:
    yield from _start_desktop("openbox", tmp_path_factory, _session_processes)


@pytest.fixture(scope="session")
def bare_desktop(
    tmp_path_factory: pytest.TempPathFactory, _session_processes: list[subprocess.Popen[bytes]]
) -> Iterator[Desktop]:
    yield from _start_desktop("no_wm", tmp_path_factory, _session_processes)


@pytest.fixture(scope="session", params=["openbox", "no_wm"])
def desktop(request: pytest.FixtureRequest) -> Desktop:
    name = "openbox_desktop" if request.param == "openbox" else "bare_desktop"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def x11_backend(desktop: Desktop) -> Iterator[X11Backend]:
    """Opened after the standing apps are up, as a rig's server is."""
    impl = X11Backend(desktop.display)
    yield impl
    impl.close()


@pytest.fixture
def extra_apps(desktop: Desktop) -> Iterator[Callable[..., FixtureApp]]:
    """Launch apps for one test; they are stopped when it ends."""
    started: list[FixtureApp] = []

    def launch(*args: Any, **kwargs: Any) -> FixtureApp:
        app = desktop.launch(*args, **kwargs)
        started.append(app)
        return app

    yield launch
    for app in started:
        stop_process(app.proc)


def _forms(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forms]:
    from .forms import running_forms  # it builds on this module's helpers

    with running_forms(backend, tmp_path_factory.mktemp(f"forms-{backend}")) as forms:
        yield forms


@pytest.fixture(scope="session")
def x11_forms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forms]:
    yield from _forms("x11", tmp_path_factory)


@pytest.fixture(scope="session")
def sway_forms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forms]:
    yield from _forms("sway", tmp_path_factory)


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> Forms:
    """Each desktop backend in turn (tests/conftest.py), running the forms (python-mss style: every
    test on every backend)."""
    return request.getfixturevalue(f"{request.param}_forms")  # type: ignore[no-any-return]
