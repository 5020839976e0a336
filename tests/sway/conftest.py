"""A real headless sway (see ``swayproc``) with GTK fixture apps in it under native Wayland.

``sway`` is the session's compositor; ``sway_desktop`` a Desktop attached to it the way
``deskrig serve --backend sway`` attaches (from SWAYSOCK and WAYLAND_DISPLAY); ``color_app`` the
GTK colour app and ``form_app`` the GTK form, tiled side by side.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest
from tests.desktop.conftest import APPS_DIR, SCREEN, FixtureApp, hex_color, stop_process
from tests.polling import poll
from tests.rigprocs import SYSTEM_PYTHON
from tests.sway.swayproc import SwaySession, start_sway

from deskrig.desktop import Desktop, open_desktop
from deskrig.grabs import Grab
from deskrig.model import Bounds, WindowInfo

COLOR = (0, 180, 90)


@pytest.fixture(scope="session")
def sway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwaySession]:
    session = start_sway(tmp_path_factory.mktemp("sway"), SCREEN)
    yield session
    session.stop()


def app_env(sway: SwaySession) -> dict[str, str]:
    """A GTK app under sway, native Wayland, with no accessibility bus of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS")}
    return {**env, **sway.env, "GDK_BACKEND": "wayland", "NO_AT_BRIDGE": "1"}


def _launch(sway: SwaySession, name: str, script: str, *args: str) -> FixtureApp:
    log = sway.work_dir / f"{name}.jsonl"
    command = [SYSTEM_PYTHON, str(APPS_DIR / script), "--title", name, "--log", str(log), *args]
    with (sway.work_dir / f"{name}.stderr").open("wb") as stderr:
        proc = subprocess.Popen(command, env=app_env(sway), stdout=subprocess.DEVNULL, stderr=stderr)
    app = FixtureApp(kind="gtk", title=name, color=COLOR, log=log, proc=proc)
    app.wait_ready()
    return app


@pytest.fixture(scope="session")
def color_app(sway: SwaySession) -> Iterator[FixtureApp]:
    app = _launch(sway, "sway-color", "gtk_color.py", "--color", hex_color(COLOR), "--size", "320x220")
    yield app
    stop_process(app.proc)


@pytest.fixture(scope="session")
def form_app(sway: SwaySession, color_app: FixtureApp) -> Iterator[FixtureApp]:
    app = _launch(sway, "sway-form", "gtk_form.py")
    yield app
    stop_process(app.proc)


@pytest.fixture(scope="session")
def sway_desktop(sway: SwaySession, form_app: FixtureApp) -> Iterator[Desktop]:
    """Attached from the environment, as ``deskrig serve --backend sway`` is."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in sway.env.items():
            patch.setenv(name, value)
        desktop = open_desktop("sway")
    yield desktop
    desktop.close()


@pytest.fixture
def grab_times(sway_desktop: Desktop, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each grab of ``sway_desktop`` happened (time.monotonic()), for the rest of the test."""
    grabs: list[float] = []
    real_grab = sway_desktop.grab

    def counted(region: Bounds) -> Grab:
        grabs.append(time.monotonic())
        return real_grab(region)

    monkeypatch.setattr(sway_desktop, "grab", counted)
    return grabs


def window_of(desktop: Desktop, app: FixtureApp) -> WindowInfo:
    return poll(
        f"{app.title!r} listed", lambda: next((w for w in desktop.windows() if w.pid == app.pid), None)
    )
