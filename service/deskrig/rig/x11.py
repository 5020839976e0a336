"""The X11 stages: Xvfb, a window manager and an app with an X window.

1. **Xvfb** on a free display (``-displayfd``) with a private cookie. Ready: it reported the
   display number and accepted a connection authenticated with the cookie.
2. **The window manager** (openbox unless ``wm=None``). Ready: the root window carries
   ``_NET_SUPPORTING_WM_CHECK`` pointing at a window that carries it too. It starts up while the
   buses do, and is ready before the app starts.
3. (the buses: :mod:`deskrig.rig.a11y`)
4. **The app.** Ready: one of its top-level windows is mapped. Its process is identified by
   ``_NET_WM_PID`` or, for apps such as Tk that set none, by the X-Resource extension.

X access: the cookie in ``env["XAUTHORITY"]`` is the rig's credential, and every process of the
supervisor's own user may connect without it (a server-interpreted ``localuser`` grant), so
python-xlib and mss in the supervisor need no per-rig ``$XAUTHORITY``. Other users cannot connect.
The window manager's and the app's probes share the display stage's start-up connection, which
is closed once start-up is over.
"""

from __future__ import annotations

import logging
import os
import pwd
import secrets
import select
import signal
from pathlib import Path
from typing import Any

from Xlib import X

from deskrig.desktop.x11_probes import grant_local_user, mapped_windows, write_xauthority
from deskrig.desktop.x11_windows import wm_check_window
from deskrig.errors import ErrorCode
from deskrig.procs import ManagedProcess, PipeLine, descends_from
from deskrig.rig.a11y import SessionA11yStage
from deskrig.rig.options import RigOptions, parse_size
from deskrig.rig.stages import DisplayStage, ExitWatch, RigStages, Stage, StageHost, WindowedAppStage
from deskrig.rig.supervisor import require_executable

X_EXTENSIONS = ("Composite", "DAMAGE", "RANDR", "X-Resource", "MIT-SHM")
#: What a rig's toolkits are told: X11, and Qt's AT-SPI bridge on without a desktop session's say-so.
X11_TOOLKIT_ENV = {"GDK_BACKEND": "x11", "QT_QPA_PLATFORM": "xcb", "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1"}


class XvfbStage(DisplayStage):
    """Xvfb with a private cookie on a display it picks itself."""

    def __init__(self, size: str) -> None:
        super().__init__()
        self._width, self._height = parse_size(size)
        self._xvfb: ManagedProcess | None = None
        self._xauthority: Path | None = None
        self._display: str | None = None
        self._connection: Any = None

    @property
    def display(self) -> str | None:
        return self._display

    @property
    def up(self) -> bool:
        return self._xvfb is not None and self._xvfb.alive

    @property
    def connection(self) -> Any:
        """A python-xlib connection for the later stages' probes, open during start-up."""
        assert self._connection is not None, "the display stage has not started"
        return self._connection

    def env(self) -> dict[str, str]:
        env = dict(X11_TOOLKIT_ENV)
        if self._xauthority is not None:
            env["XAUTHORITY"] = str(self._xauthority)
        if self._display is not None:
            env["DISPLAY"] = self._display
        return env

    def start(self, host: StageHost) -> None:
        require_executable(
            "Xvfb", "display", ErrorCode.DISPLAY_NOT_FOUND, "Install xvfb (scripts/setup does)."
        )
        self._xauthority = host.runtime_dir / "Xauthority"
        cookie = secrets.token_bytes(16)
        write_xauthority(self._xauthority, cookie)
        pipe = PipeLine()
        try:
            # The pipe's write end lives in Xvfb from here: Xvfb dying closes it.
            screen = f"{self._width}x{self._height}x24"
            argv = ["Xvfb", "-displayfd", str(pipe.write_fd), "-screen", "0", screen, "-nolisten", "tcp"]
            argv += ["-auth", str(self._xauthority), "-noreset"]
            lost = "the X server (Xvfb, pid %d) exited with status %d: the rig has no display"
            # SIGTERM as death signal lets Xvfb remove its lock file and socket.
            self._xvfb = xvfb = host.spawn(
                self,
                "xvfb",
                argv,
                host.launch_environment(),
                pass_fds=[pipe.write_fd],
                death_signal=signal.SIGTERM,
                watch=ExitWatch("display", lost, logging.ERROR),
            )
            number = host.poll(
                "the display number on -displayfd", pipe.poll, xvfb, lambda: "nothing yet", wake=pipe.wait
            )
        finally:
            pipe.close()
        self._display = f":{int(number)}"
        try:
            user = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            user = None
            host.note("display", f"uid {os.getuid()} has no user name: clients need XAUTHORITY")
        try:
            if user is not None:
                grant_local_user(int(number), cookie, user, host.startup_timeout)
            from Xlib.display import Display

            self._connection = Display(self._display)
        except Exception as exc:  # OSError, Xlib's connection errors
            raise host.failure(
                xvfb, f"cannot connect to {self._display}: {exc}", ErrorCode.DISPLAY_NOT_FOUND
            ) from exc
        # The later stages' probes wait for the root window's events rather than polling.
        self._connection.screen().root.change_attributes(
            event_mask=X.SubstructureNotifyMask | X.PropertyChangeMask
        )
        for name in X_EXTENSIONS:
            if self._connection.query_extension(name) is None:
                host.note("display", f"the X server lacks the {name} extension")

    def root_changed(self, timeout: float) -> None:
        """Until the root window reports a change (a window created, mapped or reparented under
        it; a property such as _NET_SUPPORTING_WM_CHECK or _NET_CLIENT_LIST set on it), or for at
        most ``timeout`` seconds; then drops the events, which the probes read afresh anyway."""
        conn = self.connection
        if not conn.pending_events():
            select.select([conn.fileno()], [], [], timeout)
        while conn.pending_events():
            conn.next_event()

    def end_startup(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class WindowManagerStage(Stage):
    """An EWMH window manager (openbox by default) on the display. It starts while the buses do
    (:attr:`overlaps_next`): they need no window manager, and the app, which does, starts after both."""

    overlaps_next = True

    def __init__(self, wm: str, display: XvfbStage) -> None:
        super().__init__()
        self._wm = wm
        self._display = display
        self._ready = False

    @property
    def up(self) -> bool:
        return bool(self.processes) and self.processes[0].alive and self._ready

    def start(self, host: StageHost) -> None:
        wm = self._wm
        require_executable(
            wm, "wm", ErrorCode.INVALID_ARGUMENT, "Install it, or run without a window manager (--no-wm)."
        )
        argv = [wm, "--sm-disable"] if Path(wm).name == "openbox" else [wm]
        host.spawn(self, "wm", argv, host.launch_environment(), death_signal=signal.SIGTERM)

    def settle(self, host: StageHost) -> None:
        conn = self._display.connection
        host.poll(
            "the root window's _NET_SUPPORTING_WM_CHECK",
            lambda: wm_check_window(conn),
            self.processes[0],
            lambda: "the root window has no valid _NET_SUPPORTING_WM_CHECK",
            wake=self._display.root_changed,
        )
        # openbox sets the check before its event loop runs, and a MapRequest that comes in
        # between is lost: an app mapping its window then was never shown. The WM is ready once it
        # has managed a window: a 1x1 probe, asked to be mapped again at each check until it is.
        probe = conn.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
        try:
            host.poll(
                "the window manager to manage a window",
                lambda: _managed(conn, probe),
                self.processes[0],
                lambda: "a window mapped on the display got no WM_STATE from the window manager",
                wake=self._display.root_changed,
            )
        finally:
            probe.destroy()
            conn.sync()
        self._ready = True


def _managed(conn: Any, window: Any) -> bool | None:
    """True once the window manager manages ``window`` (it sets WM_STATE, ICCCM 4.1.3.1); else
    asks for it to be mapped again, and None."""
    if window.get_full_property(conn.get_atom("WM_STATE"), X.AnyPropertyType) is not None:
        return True
    window.map()
    conn.flush()
    return None


class X11AppStage(WindowedAppStage):
    """The app under test, ready once one of its top-level windows is mapped."""

    def __init__(self, options: RigOptions, display: XvfbStage) -> None:
        super().__init__(options)
        self._display = display

    def start(self, host: StageHost) -> None:
        conn = self._display.connection
        baseline = {wid for wid, _, _ in mapped_windows(conn)}
        self._app = app = self.spawn_app(host, self._options)

        def own_window() -> int | None:
            for wid, pid, _ in mapped_windows(conn):
                # A window with no known pid counts when it is new: some clients are anonymous.
                if descends_from(pid, app.pid) if pid is not None else wid not in baseline:
                    return wid
            return None

        def observed() -> str:
            windows = mapped_windows(conn)
            return "; ".join(f"0x{w:x} {t!r} pid={p}" for w, p, t in windows) or "no mapped top-level window"

        self._window = host.poll(
            "a mapped top-level window of the app",
            own_window,
            app,
            observed,
            code=ErrorCode.WINDOW_NOT_FOUND,
            died_code=ErrorCode.APP_NOT_RUNNING,
            wake=self._display.root_changed,
        )


def x11_stages(options: RigOptions) -> RigStages:
    """The stages of an X11 rig: Xvfb, the window manager (unless none), the buses, the app (if any)."""
    display = XvfbStage(options.size)
    return RigStages(
        display=display,
        wm=WindowManagerStage(options.wm, display) if options.wm is not None else None,
        a11y=SessionA11yStage(a11y=options.a11y),
        app=X11AppStage(options, display) if options.app else None,
        wm_name=options.wm,
    )
