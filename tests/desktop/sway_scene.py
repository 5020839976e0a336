"""The contract's scene on a real headless sway: the green GTK window (native Wayland) and the red
Tk window (an X client under Xwayland), each made floating and placed where the X11 desktops of
``conftest.py`` show them, at the size they ask for.

Tiling would size both windows to their tiles; floating them gives the scene the other subjects
show, so the same assertions hold. The Tk app runs as sway's user (Xwayland admits only its own
user's clients) and logs where that user may write.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from i3ipc import Connection
from tests.polling import poll
from tests.rigprocs import SYSTEM_PYTHON
from tests.sway.conftest import app_env
from tests.sway.swayproc import SwaySession, start_sway, sway_commands

from deskrig.desktop.sway import _views, close_ipc, content_bounds
from deskrig.model import Bounds
from deskrig.rig.sway import run_as_account

from .conftest import APPS_DIR, SCREEN, FixtureApp, hex_color, stop_process
from .forms import run_as


@dataclass
class SwayScene:
    """A sway with the contract's two standing windows, by kind ("gtk", "tk")."""

    sway: SwaySession
    apps: dict[str, FixtureApp]


def launch_color_app(
    sway: SwaySession,
    log_dir: Path,
    kind: str,
    color: tuple[int, int, int],
    size: tuple[int, int],
    title: str = "",
    extra: tuple[str, ...] = (),
) -> FixtureApp:
    """``tests/apps/{kind}_color.py`` under ``sway``: GTK natively, Tk under Xwayland as sway's user.
    ``extra``: more of the app's options."""
    title = title or f"{kind}-sway"
    log = log_dir / f"{title}.jsonl"
    command = [SYSTEM_PYTHON, str(APPS_DIR / f"{kind}_color.py"), "--title", title, "--log", str(log)]
    command += ["--color", hex_color(color), "--size", f"{size[0]}x{size[1]}", *extra]
    env = app_env(sway)
    if kind == "tk":
        env = {k: v for k, v in env.items() if k != "WAYLAND_DISPLAY"}
        account = run_as_account(None)  # who the rig runs sway (and so Xwayland) as
        command = run_as(command, account.name if account else None)
    with (log_dir / f"{title}.stderr").open("wb") as stderr:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    app = FixtureApp(kind=kind, title=title, color=color, log=log, proc=proc)
    app.wait_ready()
    return app


def float_at(sway: SwaySession, title: str, bounds: Bounds) -> None:
    """Have sway show the window titled ``title``, once it maps, floating with its content area at
    ``bounds`` (no borders in a rig): a window that maps floating never changes size after."""
    run_commands(
        sway,
        # Quoted: unquoted, IPC would end the rule at the first comma.
        f'for_window [title="^{title}$"] "floating enable, resize set {bounds.width} {bounds.height}, '
        f'move absolute position {bounds.x} {bounds.y}"',
    )


def run_commands(sway: SwaySession, commands: str) -> None:
    sway_commands(sway.env, commands)


def wait_placed(sway: SwaySession, app: FixtureApp, bounds: Bounds) -> None:
    """Until sway lists ``app``'s one window with its content area at ``bounds``."""
    ipc = Connection(socket_path=sway.env["SWAYSOCK"])
    try:

        def placed() -> bool:
            views = [v for v, _ in _views(ipc.get_tree().ipc_data) if v.get("pid") == app.pid]
            return [content_bounds(v) for v in views] == [bounds]

        poll(f"{app.title!r} at {bounds}", placed)
    finally:
        close_ipc(ipc)


@contextmanager
def sway_scene(log_dir: Path, scene: dict[str, tuple[tuple[int, int, int], Bounds]]) -> Iterator[SwayScene]:
    """A fresh sway showing ``scene`` (kind -> (colour, bounds)), stopped on leaving."""
    with ExitStack() as stack:
        sway = start_sway(log_dir, SCREEN)
        stack.callback(sway.stop)
        apps: dict[str, FixtureApp] = {}
        for kind, (color, bounds) in scene.items():
            float_at(sway, f"{kind}-sway", bounds)
            app = launch_color_app(sway, sway.runtime_dir, kind, color, (bounds.width, bounds.height))
            stack.callback(stop_process, app.proc)
            wait_placed(sway, app, bounds)
            apps[kind] = app
        yield SwayScene(sway, apps)
