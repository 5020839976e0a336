"""The sway stages: a headless sway (display and window manager in one) and an app in it.

1. **sway**, headless (``WLR_BACKENDS=headless``, no input devices, the pixman renderer), with a
   generated config: one output ``HEADLESS-1`` at the rig's size and scale 1, no bar, no
   wallpaper, no idle daemon, no borders, and Xwayland on demand. Its IPC socket (``SWAYSOCK``)
   and Wayland socket are in the rig's private ``XDG_RUNTIME_DIR``. Ready: the IPC socket answers,
   the output has the rig's size, and the config's one ``exec`` has reported Xwayland's
   ``DISPLAY`` (empty without Xwayland).
2. (the buses: :mod:`deskrig.rig.a11y`)
3. **The app**, with the toolkits told to use Wayland. Ready: sway reports (a ``window::new``
   event, on a subscription made before the app starts) a mapped window of the app's process
   tree. X11-only apps (Tk, xterm) run under Xwayland and are reported the same way.

Sway refuses to run as root. A rig running as root runs all its programs as ``run_as`` (default:
``$SUDO_USER``, else ``nobody``) through the supervisor's account; root reaches their sockets all
the same. A rig that is not root (a container's uid 1000) runs them as itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import queue
import shutil
import signal
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from i3ipc import Connection, Event

from deskrig.desktop.sway import close_ipc
from deskrig.errors import ErrorCode
from deskrig.files import write_atomic
from deskrig.procs import Account, ManagedProcess, descends_from
from deskrig.rig.a11y import SessionA11yStage
from deskrig.rig.options import RigOptions, RigStartupError, parse_size
from deskrig.rig.stages import DisplayStage, ExitWatch, RigStages, StageHost, WindowedAppStage
from deskrig.rig.supervisor import require_executable

log = logging.getLogger(__name__)

#: What a rig's toolkits are told: Wayland, and Qt's AT-SPI bridge on without a desktop session's say-so.
WAYLAND_TOOLKIT_ENV = {
    "GDK_BACKEND": "wayland",
    "QT_QPA_PLATFORM": "wayland",
    "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
}
#: sway without a GPU, a seat or a session: wlroots' headless backend and software rendering.
HEADLESS_ENV = {"WLR_BACKENDS": "headless", "WLR_LIBINPUT_NO_DEVICES": "1", "WLR_RENDERER": "pixman"}
#: The run-as user when the rig runs as root, none is named and no $SUDO_USER says who is behind it.
FALLBACK_RUN_AS = "nobody"
OUTPUT = "HEADLESS-1"


def sway_config(width: int, height: int, display_file: Path, xwayland: bool) -> str:
    """A config with one output of ``width`` x ``height`` at scale 1 and nothing else running.

    No ``bar`` block (no swaybar), no ``output * bg`` (no swaybg), no ``exec swayidle``; sway
    itself animates nothing. The output keeps the headless default of 60 Hz: sway 1.7 still wakes
    60 times a second with nothing to draw (wlroots 0.15's headless backend re-arms an output's
    frame timer every frame, and sway's own FALLBACK output, 60 Hz, is one no config may set), so
    a slower output would leave the wake-ups as they are and only delay the frames captures wait
    for. The one ``exec`` writes Xwayland's ``$DISPLAY`` (which sway sets
    before it runs the config's commands) and a newline to ``display_file`` in one write, with
    the shell's builtin ``printf`` only: the line is complete once the newline is there."""
    return "\n".join(
        [
            f"output {OUTPUT} resolution {width}x{height} position 0 0 scale 1",
            "default_border none",
            "default_floating_border none",
            "focus_follows_mouse no",
            f"xwayland {'enable' if xwayland else 'disable'}",  # enable: started on first connection
            f"exec printf '%s\\n' \"$DISPLAY\" > '{display_file}'",
            "",
        ]
    )


def run_as_account(run_as: str | None, env: Mapping[str, str] | None = None) -> Account | None:
    """Who a sway rig's programs run as: None (as the rig itself) unless the rig runs as root,
    then ``run_as``, else ``$SUDO_USER``, else :data:`FALLBACK_RUN_AS`."""
    env = os.environ if env is None else env
    if os.getuid() != 0:
        if run_as is not None and run_as != pwd.getpwuid(os.getuid()).pw_name:
            raise _run_as_refused(
                f"only root can run a rig's programs as another user ({run_as!r})",
                run_as,
                "Drop --run-as (DESKRIG_RUN_AS): the rig runs its programs as you.",
            )
        return None
    sudo_user = env.get("SUDO_USER")
    name = run_as or (sudo_user if sudo_user and sudo_user != "root" else FALLBACK_RUN_AS)
    name_one = "Name an existing unprivileged user with --run-as (DESKRIG_RUN_AS)."
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise _run_as_refused(f"the user {name!r} to run sway as does not exist", name, name_one) from None
    if entry.pw_uid == 0:
        raise _run_as_refused(f"sway refuses to run as root, and {name!r} is root", name, name_one)
    return Account(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def _run_as_refused(message: str, run_as: str, remediation: str) -> RigStartupError:
    return RigStartupError(
        message,
        stage="display",
        code=ErrorCode.INVALID_ARGUMENT,
        details={"run_as": run_as},
        remediation=remediation,
    )


def _line(path: Path) -> str | None:
    """The first line of ``path`` once it is complete (newline-terminated)."""
    try:
        line, newline, _ = path.read_text().partition("\n")
    except FileNotFoundError:
        return None
    return line if newline else None


def _answers(socket: Path) -> Connection | None:
    """An IPC connection once sway's socket accepts one, else None."""
    if not socket.exists():
        return None
    try:
        ipc = Connection(socket_path=str(socket))
        ipc.get_version()
    except OSError:
        return None
    return ipc


class SwayStage(DisplayStage):
    """A headless sway: the display and its window manager."""

    def __init__(self, size: str) -> None:
        super().__init__()
        self._width, self._height = parse_size(size)
        self._sway: ManagedProcess | None = None
        self._runtime_dir: Path | None = None
        self._wayland: str | None = None
        self._xwayland: str | None = None

    @property
    def ipc_socket(self) -> Path:
        assert self._runtime_dir is not None, "the display stage has not started"
        return self._runtime_dir / "sway-ipc.sock"

    @property
    def display(self) -> str | None:
        """The Wayland socket's path (``$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY``)."""
        if self._runtime_dir is None or self._wayland is None:
            return None
        return str(self._runtime_dir / self._wayland)

    @property
    def process(self) -> ManagedProcess:
        assert self._sway is not None, "the display stage has not started"
        return self._sway

    @property
    def up(self) -> bool:
        return self._sway is not None and self._sway.alive and self._wayland is not None

    def env(self) -> dict[str, str]:
        env = dict(WAYLAND_TOOLKIT_ENV)
        if self._wayland is not None:
            env |= {"WAYLAND_DISPLAY": self._wayland, "SWAYSOCK": str(self.ipc_socket)}
        if self._xwayland:
            env["DISPLAY"] = self._xwayland
        return env

    def start(self, host: StageHost) -> None:
        require_executable(
            "sway", "display", ErrorCode.DISPLAY_NOT_FOUND, "Install sway (scripts/setup does)."
        )
        xwayland = shutil.which("Xwayland") is not None
        if not xwayland:
            host.note("display", "Xwayland is not installed: X11-only apps cannot run (install xwayland)")
        self._runtime_dir = host.runtime_dir
        display_file = host.runtime_dir / "xwayland-display"
        config = host.runtime_dir / "sway.config"
        write_atomic(
            config, sway_config(self._width, self._height, display_file, xwayland).encode(), mode=0o644
        )
        # sway names its IPC socket after $SWAYSOCK when that does not exist yet.
        env = host.launch_environment({**HEADLESS_ENV, "SWAYSOCK": str(self.ipc_socket)})
        lost = "sway (pid %d) exited with status %d: the rig has no display"
        self._sway = sway = host.spawn(
            self,
            "sway",
            ["sway", "--config", str(config)],
            env,
            cwd=str(host.runtime_dir),
            death_signal=signal.SIGTERM,
            watch=ExitWatch("display", lost, logging.ERROR),
        )
        ipc = host.poll(
            "sway's IPC socket to answer",
            lambda: _answers(self.ipc_socket),
            sway,
            lambda: "no socket" if not self.ipc_socket.exists() else "the socket refuses connections",
            code=ErrorCode.DISPLAY_NOT_FOUND,
            died_code=ErrorCode.DISPLAY_NOT_FOUND,
        )
        try:
            host.poll(
                f"output {OUTPUT} at {self._width}x{self._height}",
                lambda: True if self._output_ready(ipc) else None,
                sway,
                lambda: repr([(o.name, o.rect.width, o.rect.height) for o in ipc.get_outputs()]),
                code=ErrorCode.DISPLAY_NOT_FOUND,
                died_code=ErrorCode.DISPLAY_NOT_FOUND,
            )
        except OSError as exc:  # the IPC connection broke: sway is going away
            raise host.failure(sway, f"sway's IPC failed: {exc}", ErrorCode.DISPLAY_NOT_FOUND) from exc
        finally:
            close_ipc(ipc)
        self._xwayland = host.poll(
            "the config's exec to report Xwayland's DISPLAY",
            lambda: _line(display_file),
            sway,
            lambda: "nothing written",
        )
        sockets = sorted(p.name for p in host.runtime_dir.glob("wayland-*") if not p.name.endswith(".lock"))
        if not sockets:
            raise host.failure(sway, "sway answers but made no Wayland socket", ErrorCode.DISPLAY_NOT_FOUND)
        self._wayland = sockets[0]

    def _output_ready(self, ipc: Connection) -> bool:
        return any(
            o.name == OUTPUT and o.active and (o.rect.width, o.rect.height) == (self._width, self._height)
            for o in ipc.get_outputs()
        )


class WindowEvents:
    """sway's ``window::new`` events (a view was mapped), read by a thread from one subscription.

    :meth:`subscribed` turns true once sway confirmed the subscription (with the ``tick`` event it
    sends every new tick subscriber), so no window mapped after that is missed."""

    def __init__(self, socket: Path) -> None:
        self._ipc = Connection(socket_path=str(socket))
        self._subscribed = threading.Event()
        self._mapped: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self._ipc.on(Event.TICK, lambda _ipc, _event: self._subscribed.set())
        self._ipc.on(Event.WINDOW_NEW, lambda _ipc, event: self._mapped.put(event.container.ipc_data))
        self._thread = threading.Thread(target=self._run, name="deskrig-sway-events", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._ipc.main()
        except Exception as exc:  # OSError and i3ipc's own when sway goes away: the probes see it
            log.debug("sway's event subscription ended: %r", exc)

    def subscribed(self) -> bool | None:
        return True if self._subscribed.is_set() else None

    def mapped(self) -> list[dict[str, Any]]:
        """The windows mapped since the last call."""
        views = []
        with contextlib.suppress(queue.Empty):
            while True:
                views.append(self._mapped.get_nowait())
        return views

    def close(self) -> None:
        with contextlib.suppress(OSError):
            close_ipc(self._ipc)
        self._thread.join(timeout=2.0)


class SwayAppStage(WindowedAppStage):
    """The app under test, ready once sway maps one of its windows."""

    def __init__(self, options: RigOptions, display: SwayStage) -> None:
        super().__init__(options)
        self._display = display
        self._events: WindowEvents | None = None

    def start(self, host: StageHost) -> None:
        sway = self._display.process
        try:
            self._events = events = WindowEvents(self._display.ipc_socket)
        except OSError as exc:
            raise host.failure(sway, f"cannot subscribe to sway's window events: {exc}") from exc
        host.poll(
            "sway to confirm the window-event subscription", events.subscribed, sway, lambda: "no reply"
        )
        self._app = app = self.spawn_app(host, self._options)
        seen: list[str] = []

        def own_window() -> int | None:
            for view in events.mapped():
                seen.append(f"{view.get('id')} {view.get('name')!r} pid={view.get('pid')}")
                pid = view.get("pid")
                # A window with no known pid counts: it appeared after the app started.
                if not pid or descends_from(int(pid), app.pid):
                    return int(view["id"])
            return None

        self._window = host.poll(
            "a mapped window of the app (sway's window::new event)",
            own_window,
            app,
            lambda: "; ".join(seen) or "no window mapped",
            code=ErrorCode.WINDOW_NOT_FOUND,
            died_code=ErrorCode.APP_NOT_RUNNING,
        )

    def end_startup(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None


def sway_stages(options: RigOptions) -> RigStages:
    """The stages of a sway rig: sway (also the window manager), the buses, the app (if any)."""
    display = SwayStage(options.size)
    return RigStages(
        display=display,
        wm=display,
        a11y=SessionA11yStage(a11y=options.a11y),
        app=SwayAppStage(options, display) if options.app else None,
        wm_name="sway",
        account=run_as_account(options.run_as),
    )
