"""The two form apps (tests/apps/gtk_form.py, tests/apps/tk_form.py) running on a real desktop of
each backend, with a private session bus and AT-SPI bus, behind the Desktop facade a server uses.

- x11: Xvfb with openbox; both forms are X clients.
- sway: a headless sway rig (tests/sway/swayproc.py) with Xwayland; the GTK form is a native
  Wayland client, the Tk form an X client under Xwayland (run as sway's user: Xwayland admits only
  its own user's clients).

Each app logs what it receives as JSON lines; tests read the app's own view of what happened.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tests.a11y.conftest import _stop as stop_session
from tests.a11y.conftest import start_at_spi, start_session_bus
from tests.polling import json_lines, poll
from tests.rigprocs import SYSTEM_PYTHON
from tests.sway.swayproc import SwaySession, start_sway
from Xlib.display import Display

from deskrig.desktop import Desktop, open_desktop
from deskrig.model import Bounds, WindowInfo
from deskrig.rig.sway import run_as_account

from .conftest import APPS_DIR, SCREEN, start_xvfb, stop_process, window_manager_ready

T = TypeVar("T")


@dataclass
class App:
    """A fixture app and its JSON-lines log."""

    title: str
    log: Path
    proc: subprocess.Popen[bytes]
    #: The app reports widget positions relative to its window, not the screen (GTK under Wayland).
    window_relative: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        return [e for e in json_lines(self.log) if name is None or e["event"] == name]

    def wait(self, name: str, check: Callable[[dict[str, Any]], bool], what: str = "") -> dict[str, Any]:
        """The newest ``name`` event once it satisfies ``check``; a timeout says what the newest was."""
        seen: list[dict[str, Any]] = []

        def newest() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.title} exited with {self.proc.returncode}")
            seen[:] = self.events(name)[-1:]
            return seen[0] if seen and check(seen[0]) else None

        try:
            return poll(what or f"{self.title}: {name} event", newest, timeout=10)
        except AssertionError as timed_out:
            raise AssertionError(
                f"{timed_out}; the newest {name} event: {seen[0] if seen else None}"
            ) from None

    def layout(self) -> dict[str, Any]:
        """The newest ready/layout event: widget geometry as the app sees it."""
        return [e for e in self.events() if e["event"] in ("ready", "layout")][-1]


@dataclass
class Forms:
    """One running desktop (``backend`` is x11 or sway) with the GTK and the Tk form on it."""

    backend: str
    desktop: Desktop
    gtk: App
    tk: App
    session_bus: str
    #: The X display the Tk form is on (Xvfb's, or sway's Xwayland).
    x_display: str

    def window(self, app: App) -> WindowInfo:
        return poll(
            f"{app.title!r} listed",
            lambda: next((w for w in self.desktop.windows() if w.pid == app.pid), None),
        )

    def on_screen(self, app: App, point: dict[str, int]) -> tuple[int, int]:
        """A point the app reported, in screen pixels (its window's origin added if it reports
        window-relative positions; taken from the window list, not from the code under test)."""
        if not app.window_relative:
            return point["x"], point["y"]
        origin = self.window(app).bounds
        return origin.x + point["x"], origin.y + point["y"]

    def widget(self, app: App, name: str) -> Bounds:
        """Where the app says its widget is, in screen pixels."""
        geometry = app.layout()["widgets"][name]
        x, y = self.on_screen(app, geometry)
        return Bounds(x=x, y=y, width=geometry["width"], height=geometry["height"])

    def center(self, app: App, name: str) -> tuple[int, int]:
        bounds = self.widget(app, name)
        return bounds.x + bounds.width // 2, bounds.y + bounds.height // 2


def run_as(command: list[str], user: str | None) -> list[str]:
    """``command`` run as ``user`` (None: as ourselves)."""
    if user is None:
        return command
    account = pwd.getpwnam(user)
    return ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", *command]


def launch(
    log_dir: Path, script: str, title: str, env: dict[str, str], *, as_user: str | None = None, **kw: Any
) -> App:
    """Start ``tests/apps/{script}`` (as ``as_user`` if given) and wait until it reports ready."""
    log = log_dir / f"{Path(script).stem}.jsonl"
    command = run_as([SYSTEM_PYTHON, str(APPS_DIR / script), "--title", title, "--log", str(log)], as_user)
    with (log_dir / f"{Path(script).stem}.stderr").open("wb") as stderr:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    app = App(title=title, log=log, proc=proc, **kw)
    app.wait("ready", lambda e: True, f"{script} to report ready")
    return app


def base_env(session_bus: str) -> dict[str, str]:
    """This process's environment without its desktop, with the apps' session bus."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SWAYSOCK")}
    env |= {"LANG": "C.UTF-8", "GSETTINGS_BACKEND": "memory", "GIO_USE_VFS": "local"}
    return env | {"DBUS_SESSION_BUS_ADDRESS": session_bus}


def _overlap(a: Bounds, b: Bounds) -> bool:
    return a.intersection(b) is not None


@contextmanager
def x11_forms(log_dir: Path, stack: ExitStack, session_bus: str) -> Iterator[Forms]:
    xvfb, display = start_xvfb(log_dir)
    stack.callback(stop_process, xvfb)
    env = base_env(session_bus) | {"DISPLAY": display, "GDK_BACKEND": "x11"}
    with (log_dir / "openbox.log").open("wb") as wm_log:
        openbox = subprocess.Popen(
            ["openbox", "--sm-disable"], env=env, stdout=subprocess.DEVNULL, stderr=wm_log
        )
    stack.callback(stop_process, openbox)
    xlib = Display(display)
    stack.callback(xlib.close)
    poll("openbox to set _NET_SUPPORTING_WM_CHECK", lambda: window_manager_ready(xlib))
    tk = launch(log_dir, "tk_form.py", "Tk form", env)
    stack.callback(stop_process, tk.proc)
    gtk = launch(log_dir, "gtk_form.py", "GTK form", env)
    stack.callback(stop_process, gtk.proc)
    desktop = open_desktop("x11", display=display)
    stack.callback(desktop.close)
    forms = Forms("x11", desktop, gtk, tk, session_bus, display)
    tk_widgets = [forms.widget(tk, name) for name in ("entry", "text", "button")]
    assert not any(_overlap(w, forms.widget(gtk, "entry")) for w in tk_widgets), "openbox stacked the forms"
    yield forms


def attached(sway: SwaySession, attach: Callable[[], T]) -> T:
    """What ``attach`` opens from the environment of ``sway``, as ``deskrig serve`` attaches."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in sway.env.items():
            patch.setenv(name, value)
        return attach()


@contextmanager
def sway_forms(log_dir: Path, stack: ExitStack, session_bus: str) -> Iterator[Forms]:
    sway = start_sway(log_dir, SCREEN)
    stack.callback(sway.stop)
    env = base_env(session_bus) | sway.env
    # Tk first: it logs its layout again when tiling resizes it, GTK only once, when ready.
    # Its log goes where sway's user may write; root (the tests) reads it there too.
    x_env = {k: v for k, v in env.items() if k != "WAYLAND_DISPLAY"}  # DISPLAY: sway's Xwayland
    account = run_as_account(None)  # who the rig runs sway (and so Xwayland) as
    tk = launch(sway.runtime_dir, "tk_form.py", "Tk form", x_env, as_user=account.name if account else None)
    stack.callback(stop_process, tk.proc)
    gtk = launch(log_dir, "gtk_form.py", "GTK form", env | {"GDK_BACKEND": "wayland"}, window_relative=True)
    stack.callback(stop_process, gtk.proc)
    desktop = attached(sway, lambda: open_desktop("sway"))
    stack.callback(desktop.close)
    forms = Forms("sway", desktop, gtk, tk, session_bus, x_env["DISPLAY"])
    for app in (gtk, tk):  # sway tiles each window again as the next one maps
        poll(f"{app.title!r} laid out inside its tile", lambda app=app: laid_out(forms, app))
    yield forms


def laid_out(forms: Forms, app: App) -> bool:
    """Every widget the app reports lies inside its listed window."""
    window = forms.window(app).bounds
    widgets = [forms.widget(app, name) for name in app.layout()["widgets"]]
    return all(window.intersection(widget) == widget for widget in widgets)


@contextmanager
def running_forms(backend: str, log_dir: Path) -> Iterator[Forms]:
    """The forms on a fresh desktop of ``backend``, with their own session and AT-SPI buses."""
    with ExitStack() as stack:
        bus_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(log_dir), "LANG": "C.UTF-8"}
        dbus, address = start_session_bus(bus_env)
        stack.callback(stop_session, dbus)
        stack.callback(stop_session, start_at_spi(bus_env | {"DBUS_SESSION_BUS_ADDRESS": address}, address))
        start = x11_forms if backend == "x11" else sway_forms
        with start(log_dir, stack, address) as forms:
            yield forms
