"""A real headless sway for tests, started the way a rig's sway stage will start it.

Sway refuses to run as root, and the tests run as root: it runs as the unprivileged user
``scripts/setup`` creates, with a private ``XDG_RUNTIME_DIR`` that only that user owns (root, the
server's side, reaches the sockets in it anyway). The generated config has no bar, no wallpaper,
no idle daemon and no borders, one output at scale 1. Ready means its IPC socket answers and its
Wayland socket exists; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from i3ipc import Connection
from tests.polling import poll

#: The user scripts/setup creates for running sway (it refuses root).
SWAY_USER = "deskrig-test"
STARTUP_TIMEOUT_S = 30.0


def sway_config(width: int, height: int, xwayland: bool = False) -> str:
    # No `bar` block (no swaybar), no `output * bg` (no swaybg), no `exec` (no swayidle).
    return "\n".join(
        [
            f"output HEADLESS-1 resolution {width}x{height} position 0 0 scale 1",
            "default_border none",
            "default_floating_border none",
            "focus_follows_mouse no",
            # enable: started on the first X client's connection.
            f"xwayland {'enable' if xwayland else 'disable'}",
            "",
        ]
    )


@dataclass
class SwaySession:
    """A running sway: its process, private runtime dir and the environment that reaches it."""

    proc: subprocess.Popen[bytes]
    work_dir: Path
    runtime_dir: Path
    ipc_socket: str
    wayland_display: str

    @property
    def env(self) -> dict[str, str]:
        """What a client of this sway needs (a server attaching to it, or an app inside it)."""
        return {
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
            "WAYLAND_DISPLAY": self.wayland_display,
            "SWAYSOCK": self.ipc_socket,
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)


def _answers(socket: Path) -> bool:
    try:
        Connection(socket_path=str(socket)).get_version()
    except OSError:
        return False
    return True


def start_sway(
    work_dir: Path, size: tuple[int, int], user: str = SWAY_USER, xwayland: bool = False
) -> SwaySession:
    """Start a headless sway as ``user`` under ``work_dir`` and wait until it answers (with an
    Xwayland for X11 clients if ``xwayland``)."""
    account = pwd.getpwnam(user)  # KeyError: run scripts/setup, which creates the user
    # Not under work_dir: pytest's temporary folders are root's alone, and sway must reach this.
    runtime_dir = Path(tempfile.mkdtemp(prefix="deskrig-sway-"))
    config = runtime_dir / "sway.config"
    config.write_text(sway_config(*size, xwayland=xwayland))
    os.chown(runtime_dir, account.pw_uid, account.pw_gid)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(runtime_dir),
        "XDG_RUNTIME_DIR": str(runtime_dir),
        "WLR_BACKENDS": "headless",
        "WLR_LIBINPUT_NO_DEVICES": "1",
        "WLR_RENDERER": "pixman",  # no GPU here; say so rather than let wlroots probe for one
    }
    command = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups"]
    command += ["sway", "--config", str(config)]
    with (work_dir / "sway.log").open("wb") as log:
        # setpriv execs sway: the child's pid is sway's, which names its IPC socket.
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log, cwd=runtime_dir)
    ipc_socket = runtime_dir / f"sway-ipc.{account.pw_uid}.{proc.pid}.sock"

    def ready() -> str | None:
        if proc.poll() is not None:
            raise RuntimeError(f"sway exited with {proc.returncode}: {(work_dir / 'sway.log').read_text()}")
        sockets = sorted(p.name for p in runtime_dir.glob("wayland-*") if not p.name.endswith(".lock"))
        return sockets[0] if sockets and ipc_socket.exists() and _answers(ipc_socket) else None

    try:
        wayland_display = poll("sway's IPC and Wayland sockets", ready, timeout=STARTUP_TIMEOUT_S)
    except BaseException:
        proc.kill()
        proc.wait()
        shutil.rmtree(runtime_dir, ignore_errors=True)
        raise
    return SwaySession(
        proc=proc,
        work_dir=work_dir,
        runtime_dir=runtime_dir,
        ipc_socket=str(ipc_socket),
        wayland_display=wayland_display,
    )
