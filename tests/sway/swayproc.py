"""A real headless sway for tests: a sway rig with no app (the rig's own sway stage,
:mod:`deskrig.rig.sway`), so the tests run sway exactly as ``deskrig rig run --backend sway`` does.

Sway refuses to run as root, and the tests run as root: the rig runs it as its default user (see
:func:`deskrig.rig.sway.run_as_account`), with a private ``XDG_RUNTIME_DIR`` only that user owns;
root, the server's side and the fixture apps', reaches the sockets in it anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from i3ipc import Connection

from deskrig.desktop.sway import close_ipc
from deskrig.procs import ManagedProcess
from deskrig.rig import Rig, RigOptions

STARTUP_TIMEOUT_S = 30.0
#: What a client of the sway needs (a server attaching to it, or an app inside it).
CLIENT_VARS = ("XDG_RUNTIME_DIR", "WAYLAND_DISPLAY", "SWAYSOCK", "DISPLAY")


@dataclass
class SwaySession:
    """A running sway rig: its sway process, private runtime dir and the environment that reaches it."""

    rig: Rig
    work_dir: Path

    @property
    def proc(self) -> ManagedProcess:
        return self.rig.processes[0]

    @property
    def runtime_dir(self) -> Path:
        return Path(self.rig.env["XDG_RUNTIME_DIR"])

    @property
    def env(self) -> dict[str, str]:
        """What a client of this sway needs (a server attaching to it, or an app inside it)."""
        return {key: value for key, value in self.rig.env.items() if key in CLIENT_VARS}

    def stop(self) -> None:
        self.rig.stop()


def start_sway(work_dir: Path, size: tuple[int, int], run_as: str | None = None) -> SwaySession:
    """Start a headless sway of ``size`` (logs in ``work_dir``) and wait until it answers."""
    width, height = size
    options = RigOptions(
        backend="sway",
        size=f"{width}x{height}",
        wm=None,
        a11y=False,
        startup_timeout=STARTUP_TIMEOUT_S,
        run_dir=str(work_dir),
        run_as=run_as,
    )
    rig = Rig(options)
    rig.start()
    return SwaySession(rig=rig, work_dir=work_dir)


def sway_commands(env: Mapping[str, str], commands: str) -> None:
    """Run sway ``commands`` (``swaymsg``'s) on the sway that ``env``'s ``SWAYSOCK`` reaches; each must succeed."""
    ipc = Connection(socket_path=env["SWAYSOCK"])
    try:
        replies = ipc.command(commands)
    finally:
        close_ipc(ipc)
    assert all(r.success for r in replies), [r.error for r in replies]
