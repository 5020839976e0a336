"""The in-rig supervisor: a virtual display, a window manager, private buses and the app under test.

:meth:`Rig.start` starts each part only once the previous one is ready, polling with a deadline
(``RigOptions.startup_timeout`` per stage), never sleeping a fixed time:

1. **Xvfb** on a free display (``-displayfd``) with a private cookie. Ready: it reported the
   display number and accepted a connection authenticated with the cookie.
2. **The window manager** (openbox unless ``wm=None``). Ready: the root window carries
   ``_NET_SUPPORTING_WM_CHECK`` pointing at a window that carries it too.
3. **A private D-Bus session bus** on a socket in a fresh ``XDG_RUNTIME_DIR`` (mode 0700), then
   **at-spi-bus-launcher** on it. Ready: ``org.a11y.Bus.GetAddress`` answers, after
   ``org.a11y.Status.IsEnabled`` has been switched on. Missing D-Bus or AT-SPI is not fatal: the
   rig carries on without accessibility and says so in its diagnostics.
4. **The app.** Ready: one of its top-level windows is mapped. Its process is identified by
   ``_NET_WM_PID`` or, for apps such as Tk that set none, by the X-Resource extension.

Any failure tears down what was started and raises :class:`RigStartupError`. :meth:`Rig.stop`
ends everything in reverse order (see :mod:`deskrig.procs`). :func:`run_until_signal` runs a
rig until SIGINT/SIGTERM or until the app exits.

X access: the cookie in ``env["XAUTHORITY"]`` is the rig's credential, and every process of the
supervisor's own user may connect without it (a server-interpreted ``localuser`` grant), so
python-xlib and mss in the supervisor need no per-rig ``$XAUTHORITY``. Other users cannot connect.
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, computed_field

from deskrig.a11y.launcher_probe import a11y_bus_address, enable_a11y
from deskrig.desktop.x11_probes import grant_local_user, mapped_windows, write_xauthority
from deskrig.desktop.x11_windows import wm_check_window
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Diagnostic
from deskrig.procs import ManagedProcess, PipeLine, descends_from, spawn
from deskrig.rundirs import make_rig_dir, sweep_stale_dirs

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Where Debian and other distributions install the AT-SPI bus launcher.
A11Y_LAUNCHERS = (
    "/usr/libexec/at-spi-bus-launcher",
    "/usr/lib/at-spi2-core/at-spi-bus-launcher",
    "/usr/lib/at-spi2/at-spi-bus-launcher",
)
#: Variables that would tie a rig's programs to the host's own session.
HOST_SESSION_VARS = (
    "DISPLAY",
    "XAUTHORITY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "AT_SPI_BUS_ADDRESS",
    "SESSION_MANAGER",
    "NO_AT_BRIDGE",
)
X_EXTENSIONS = ("Composite", "DAMAGE", "RANDR", "X-Resource", "MIT-SHM")
POLL_INTERVAL = 0.05
STOP_GRACE = 3.0
SIZE_LIMITS = (64, 8192)
#: :func:`run_until_signal`'s status when the X server died under a running rig (sysexits'
#: EX_UNAVAILABLE): the app usually dies with it, but the display is the cause.
EXIT_DISPLAY_LOST = 69
#: How long ``serve`` may take to return once asked to stop before the rig is stopped under it.
SERVE_STOP_GRACE = 5.0


def parse_size(size: str) -> tuple[int, int]:
    """``"1280x800"`` -> ``(1280, 800)``; each side must lie in 64..8192."""
    match = re.fullmatch(r"(\d+)x(\d+)", size.strip())
    low, high = SIZE_LIMITS
    if match is None or not all(low <= int(side) <= high for side in match.groups()):
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"invalid screen size {size!r}: expected WIDTHxHEIGHT with each side in {low}..{high}",
            details={"argument": "size", "value": size, "min": low, "max": high},
        )
    return int(match[1]), int(match[2])


class RigOptions(BaseModel):
    """What to run in a rig."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    size: str = "1280x800"
    wm: str | None = Field("openbox", description="Window manager executable; None runs none")
    app: list[str] = Field(default_factory=list, description="The app's argv; empty for a bare desktop")
    app_env: dict[str, str] = Field(default_factory=dict)
    app_cwd: str | None = None
    a11y: bool = True
    startup_timeout: float = Field(30.0, gt=0, description="Seconds each start-up stage may take")
    run_dir: str | None = Field(None, description="Logs go here; default: a temp dir removed on stop")


class RigStatus(BaseModel):
    """What is up in a rig right now (shown by /readyz)."""

    display: str | None
    display_up: bool
    wm: str | None
    wm_up: bool
    a11y_bus: str | None
    a11y_up: bool
    app_pid: int | None
    app_up: bool
    app_exit_status: int | None
    diagnostics: list[str]
    pids: dict[str, int] = Field(default_factory=dict, description="Process name -> pid, as started")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ready(self) -> bool:
        return self.display_up and (self.wm is None or self.wm_up) and (self.app_pid is None or self.app_up)


class RigStartupError(DeskrigError):
    """A rig could not start. ``details`` has ``stage`` and, when a process failed, its
    ``exit_status``, ``stderr_tail`` and ``log_file``; the message quotes the last stderr lines."""

    def __init__(
        self,
        message: str,
        *,
        stage: str,
        code: ErrorCode = ErrorCode.INTERNAL_ERROR,
        details: Mapping[str, Any] | None = None,
        remediation: str | None = None,
    ) -> None:
        super().__init__(code, message, details={"stage": stage, **(details or {})}, remediation=remediation)


# --- the rig ----------------------------------------------------------------------------------


class Rig:
    """One virtual desktop with its window manager, buses and app. See the module docstring."""

    def __init__(self, options: RigOptions) -> None:
        self.options = options
        self._width, self._height = parse_size(options.size)
        self._lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._abort = threading.Event()
        self._started = False
        self._stopping = False
        self._procs: list[ManagedProcess] = []
        self._launch_count = 0
        self._diagnostics: list[Diagnostic] = []
        self._spawner: ThreadPoolExecutor | None = None
        self._runtime_dir: Path | None = None
        self._run_dir: Path | None = None
        self._display: str | None = None
        self._session_bus: str | None = None
        self._a11y_bus: str | None = None
        self._xvfb: ManagedProcess | None = None
        self._wm: ManagedProcess | None = None
        self._a11y: ManagedProcess | None = None
        self._app: ManagedProcess | None = None
        self._wm_ready = False
        self._app_window: int | None = None
        #: Who to tell when the display ("xvfb") or the app ("app") exits on its own.
        self._exit_callbacks: dict[str, list[Callable[[int], None]]] = {"xvfb": [], "app": []}

    # --- public API ---

    def start(self) -> None:
        """Start everything and wait until it is ready; on failure tear it down and raise."""
        with self._lock:
            if self._started:
                raise DeskrigError(ErrorCode.INVALID_ARGUMENT, "a rig can only be started once")
            self._started = True
        try:
            self._make_dirs()
            # Children die when the thread that forked them ends: fork from one that lives until stop.
            self._spawner = ThreadPoolExecutor(1, thread_name_prefix="deskrig-spawner")
            conn = self._start_display()
            try:
                self._check_extensions(conn)
                if self.options.wm is not None:
                    self._start_wm(conn, self.options.wm)
                self._start_session_bus()
                if self.options.a11y:
                    self._start_a11y()
                if self.options.app:
                    self._start_app(conn)
            finally:
                conn.close()
        except DeskrigError:
            self.stop()
            raise
        except Exception as exc:  # e.g. the X connection broke because Xvfb died under a probe
            self.stop()
            stage = self._procs[-1].name if self._procs else "setup"
            raise RigStartupError(f"rig start-up failed: {exc!r}", stage=stage) from exc
        except BaseException:
            self.stop()
            raise
        log.info("rig ready on %s: %s", self._display, self.status().model_dump_json())

    def stop(self) -> None:
        """End every process in reverse start order (TERM, then KILL after a grace period), reap
        them all, and remove the runtime dir and the default run dir. Idempotent."""
        with self._stop_lock:
            with self._lock:
                self._stopping = True
                procs = list(self._procs)
            self._abort.set()
            for proc in reversed(procs):
                proc.stop(STOP_GRACE)
            if self._spawner is not None:
                self._spawner.shutdown(wait=True)
            if self._runtime_dir is not None:
                shutil.rmtree(self._runtime_dir, ignore_errors=True)
            if self._run_dir is not None and self.options.run_dir is None:
                shutil.rmtree(self._run_dir, ignore_errors=True)

    def status(self) -> RigStatus:
        """A snapshot of what is up; cheap (no X or D-Bus round trip) and thread-safe."""
        with self._lock:
            xvfb, wm, a11y, app = self._xvfb, self._wm, self._a11y, self._app
            return RigStatus(
                display=self._display,
                display_up=xvfb is not None and xvfb.alive,
                wm=self.options.wm,
                wm_up=wm is not None and wm.alive and self._wm_ready,
                a11y_bus=self._a11y_bus,
                a11y_up=a11y is not None and a11y.alive and self._a11y_bus is not None,
                app_pid=app.pid if app is not None else None,
                app_up=app is not None and app.alive and self._app_window is not None,
                app_exit_status=app.exit_status if app is not None else None,
                diagnostics=[f"{d.component}: {d.message}" for d in self._diagnostics],
                pids={proc.name: proc.pid for proc in self._procs},
            )

    @property
    def display(self) -> str:
        """The X display name, ``":N"``."""
        if self._display is None:
            raise DeskrigError(ErrorCode.DISPLAY_NOT_FOUND, "the rig's display is not up (call start())")
        return self._display

    @property
    def run_dir(self) -> Path | None:
        """Where the processes' logs go (``{name}.log``); None before start."""
        return self._run_dir

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Fallbacks taken during start-up (no D-Bus, no AT-SPI, a missing X extension ...)."""
        return list(self._diagnostics)

    @property
    def app_process(self) -> ManagedProcess | None:
        """The app's process: pid, output tail, log file."""
        return self._app

    @property
    def env(self) -> dict[str, str]:
        """The variables that put a program into this rig (display, cookie, buses, toolkits)."""
        env = {
            "GDK_BACKEND": "x11",
            "QT_QPA_PLATFORM": "xcb",
            "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
        }
        if self._runtime_dir is not None:
            env["XDG_RUNTIME_DIR"] = str(self._runtime_dir)
            env["XAUTHORITY"] = str(self._runtime_dir / "Xauthority")
        if self._display is not None:
            env["DISPLAY"] = self._display
        if self._session_bus is not None:
            env["DBUS_SESSION_BUS_ADDRESS"] = self._session_bus
        if self._a11y_bus is None:
            env["NO_AT_BRIDGE"] = "1"  # else GTK would look for (and try to start) a bus launcher
        return env

    def launch_environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A full environment for a program in this rig: ours minus the host's session, plus
        :attr:`env`, plus ``extra``."""
        env = {key: value for key, value in os.environ.items() if key not in HOST_SESSION_VARS}
        return env | self.env | dict(extra or {})

    def launch(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> ManagedProcess:
        """Start another program in the rig with the same hygiene as the app; it is stopped with
        the rig. Raises OSError (FileNotFoundError for a missing executable)."""
        with self._lock:
            self._launch_count += 1
            name = f"launch-{self._launch_count}"
        return self._spawn(name, argv, self.launch_environment(env), cwd=cwd)

    def wait_app_exit(self, timeout: float | None = None) -> int | None:
        """The app's exit status once it has exited, or None on timeout (or with no app)."""
        return self._app.wait(timeout) if self._app is not None else None

    def on_app_exit(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(status)`` from a watcher thread when the app exits on its own (not when
        :meth:`stop` ends it). Called at once if that already happened."""
        self._on_exit("app", callback)

    def on_display_exit(self, callback: Callable[[int], None]) -> None:
        """Like :meth:`on_app_exit`, for the X server: the rig has no display any more."""
        self._on_exit("xvfb", callback)

    def _on_exit(self, name: str, callback: Callable[[int], None]) -> None:
        with self._lock:
            proc = {"xvfb": self._xvfb, "app": self._app}[name]
            if proc is None or proc.alive or self._stopping:
                self._exit_callbacks[name].append(callback)
                return
        callback(proc.exit_status or 0)

    def __enter__(self) -> Rig:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- start-up stages ---

    def _make_dirs(self) -> None:
        sweep_stale_dirs()  # what SIGKILLed rigs left behind
        # A fresh 0700 dir per rig: its bus socket, a11y bus socket and cookie are nobody else's.
        self._runtime_dir = make_rig_dir("xdg")
        if self.options.run_dir is None:
            self._run_dir = make_rig_dir("rig")
        else:
            self._run_dir = Path(self.options.run_dir)
            self._run_dir.mkdir(parents=True, exist_ok=True)

    def _start_display(self) -> Any:
        """Start Xvfb and return a python-xlib connection to it."""
        assert self._runtime_dir is not None
        _require("Xvfb", "display", ErrorCode.DISPLAY_NOT_FOUND, "Install xvfb (scripts/setup does).")
        cookie = secrets.token_bytes(16)
        write_xauthority(self._runtime_dir / "Xauthority", cookie)
        pipe = PipeLine()
        try:
            # The pipe's write end lives in Xvfb from here: Xvfb dying closes it.
            xauthority = str(self._runtime_dir / "Xauthority")
            screen = f"{self._width}x{self._height}x24"
            argv = ["Xvfb", "-displayfd", str(pipe.write_fd), "-screen", "0", screen, "-nolisten", "tcp"]
            argv += ["-auth", xauthority, "-noreset"]
            # SIGTERM as death signal lets Xvfb remove its lock file and socket.
            self._xvfb = xvfb = self._spawn(
                "xvfb", argv, self.launch_environment(), pass_fds=[pipe.write_fd], death_signal=signal.SIGTERM
            )
            xvfb.on_exit(lambda status: self._exited(xvfb, status))
            number = self._poll("the display number on -displayfd", pipe.poll, xvfb, lambda: "nothing yet")
        finally:
            pipe.close()
        with self._lock:
            self._display = f":{int(number)}"
        try:
            user = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            user = None
            self._note("display", f"uid {os.getuid()} has no user name: clients need XAUTHORITY")
        try:
            if user is not None:
                grant_local_user(int(number), cookie, user, self.options.startup_timeout)
            from Xlib.display import Display

            return Display(self._display)
        except Exception as exc:  # OSError, Xlib's connection errors
            raise self._failure(
                xvfb, f"cannot connect to {self._display}: {exc}", ErrorCode.DISPLAY_NOT_FOUND
            ) from exc

    def _check_extensions(self, conn: Any) -> None:
        for name in X_EXTENSIONS:
            if conn.query_extension(name) is None:
                self._note("display", f"the X server lacks the {name} extension")

    def _start_wm(self, conn: Any, wm: str) -> None:
        _require(
            wm, "wm", ErrorCode.INVALID_ARGUMENT, "Install it, or run without a window manager (--no-wm)."
        )
        argv = [wm, "--sm-disable"] if Path(wm).name == "openbox" else [wm]
        self._wm = wm_proc = self._spawn("wm", argv, self.launch_environment(), death_signal=signal.SIGTERM)
        self._poll(
            "the root window's _NET_SUPPORTING_WM_CHECK",
            lambda: wm_check_window(conn),
            wm_proc,
            lambda: "the root window has no valid _NET_SUPPORTING_WM_CHECK",
        )
        with self._lock:
            self._wm_ready = True

    def _start_session_bus(self) -> None:
        assert self._runtime_dir is not None
        if shutil.which("dbus-daemon") is None:
            self._note("dbus", "dbus-daemon is not installed: no session bus, no accessibility")
            return
        pipe = PipeLine()
        try:
            argv = ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--print-address={pipe.write_fd}"]
            argv.append(f"--address=unix:path={self._runtime_dir / 'bus'}")
            bus = self._spawn(
                "dbus", argv, self.launch_environment(), pass_fds=[pipe.write_fd], death_signal=signal.SIGTERM
            )
            address = self._poll("its address on --print-address", pipe.poll, bus, lambda: "nothing yet")
        finally:
            pipe.close()
        with self._lock:
            self._session_bus = address.strip()

    def _start_a11y(self) -> None:
        launcher = next((path for path in A11Y_LAUNCHERS if os.access(path, os.X_OK)), None)
        session_bus = self._session_bus
        if session_bus is None or launcher is None:
            missing = "a session bus" if session_bus is None else "at-spi-bus-launcher (at-spi2-core)"
            self._note("a11y", f"accessibility is off: {missing} is not available")
            return
        # A memory GSettings backend: switching accessibility on must not write the user's dconf.
        env = self.launch_environment({"GSETTINGS_BACKEND": "memory"})
        # SIGTERM, not SIGKILL, as death signal: the launcher then takes its own bus daemon down.
        self._a11y = launcher_proc = self._spawn(
            "at-spi", [launcher, "--launch-immediately"], env, death_signal=signal.SIGTERM
        )
        try:
            address = self._poll(
                "org.a11y.Bus.GetAddress to answer",
                lambda: a11y_bus_address(session_bus),
                launcher_proc,
                lambda: "org.a11y.Bus has no owner on the session bus",
            )
            enable_a11y(session_bus)
        except RigStartupError:
            raise
        except Exception as exc:  # dbus-fast's errors and OSError
            raise self._failure(launcher_proc, f"the accessibility bus did not come up: {exc}") from exc
        with self._lock:
            self._a11y_bus = address

    def _start_app(self, conn: Any) -> None:
        argv = self.options.app
        baseline = {wid for wid, _, _ in mapped_windows(conn)}
        env = self.launch_environment(self.options.app_env)
        try:
            app = self._spawn("app", argv, env, cwd=self.options.app_cwd)
        except OSError as exc:
            raise RigStartupError(
                f"cannot start the app {argv[0]!r}: {exc.strerror}",
                stage="app",
                code=ErrorCode.INVALID_ARGUMENT,
                details={"argv": argv},
                remediation="Check the app's command line and working directory.",
            ) from exc
        with self._lock:
            self._app = app
        app.on_exit(lambda status: self._exited(app, status))

        def own_window() -> int | None:
            for wid, pid, _ in mapped_windows(conn):
                # A window with no known pid counts when it is new: some clients are anonymous.
                if descends_from(pid, app.pid) if pid is not None else wid not in baseline:
                    return wid
            return None

        def observed() -> str:
            windows = mapped_windows(conn)
            return "; ".join(f"0x{w:x} {t!r} pid={p}" for w, p, t in windows) or "no mapped top-level window"

        window = self._poll(
            "a mapped top-level window of the app", own_window, app, observed, code=ErrorCode.WINDOW_NOT_FOUND
        )
        with self._lock:
            self._app_window = window

    # --- helpers ---

    def _exited(self, proc: ManagedProcess, status: int) -> None:
        """``proc`` (the display or the app) exited on its own: tell whoever asked."""
        with self._lock:
            if self._stopping:
                return
            callbacks = list(self._exit_callbacks[proc.name])
        if proc.name == "app":
            log.info("the app (pid %d) exited with status %d", proc.pid, status)
        else:
            log.error(
                "the X server (Xvfb, pid %d) exited with status %d: the rig has no display", proc.pid, status
            )
        for callback in callbacks:
            try:
                callback(status)
            except Exception:
                log.exception("an on_app_exit callback failed")

    def _spawn(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        cwd: str | None = None,
        pass_fds: Sequence[int] = (),
        death_signal: int = signal.SIGKILL,
    ) -> ManagedProcess:
        assert self._run_dir is not None
        with self._lock:
            if self._stopping or self._spawner is None:
                raise RigStartupError(f"the rig is not running; {name} was not started", stage=name)
            proc = spawn(
                name,
                argv,
                env=env,
                log_dir=self._run_dir,
                cwd=cwd,
                pass_fds=pass_fds,
                death_signal=death_signal,
                spawner=self._spawner,
            )
            self._procs.append(proc)
        return proc

    def _poll(
        self,
        what: str,
        check: Callable[[], T | None],
        proc: ManagedProcess,
        observe: Callable[[], str],
        code: ErrorCode = ErrorCode.INTERNAL_ERROR,
    ) -> T:
        """Call ``check`` until it returns a value; fail if ``proc`` dies or the deadline passes."""
        timeout = self.options.startup_timeout
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result is not None:
                return result
            if not proc.alive:
                status = proc.exit_status
                raise self._failure(
                    proc,
                    f"{proc.name} exited with status {status} during start-up (waiting for {what})",
                    ErrorCode.APP_NOT_RUNNING if proc is self._app else ErrorCode.INTERNAL_ERROR,
                )
            if self._abort.is_set():
                raise RigStartupError(f"start-up interrupted while waiting for {what}", stage=proc.name)
            if time.monotonic() >= deadline:
                seen = observe()
                raise self._failure(
                    proc, f"{proc.name}: no {what} after {timeout:g} s; observed: {seen}", code, observed=seen
                )
            self._abort.wait(POLL_INTERVAL)

    def _failure(
        self, proc: ManagedProcess, message: str, code: ErrorCode = ErrorCode.INTERNAL_ERROR, **extra: Any
    ) -> RigStartupError:
        """A start-up error that quotes the process's last stderr lines."""
        stderr_tail = proc.tail(20, "stderr")
        if stderr_tail:
            message += "\nlast stderr lines of " + proc.name + ":\n  " + "\n  ".join(stderr_tail[-10:])
        details = {
            "argv": proc.argv,
            "pid": proc.pid,
            "exit_status": proc.exit_status,
            "stderr_tail": stderr_tail,
            "log_file": str(proc.log_path),
            **extra,
        }
        return RigStartupError(message, stage=proc.name, code=code, details=details)

    def _note(self, component: str, message: str) -> None:
        log.warning("%s: %s", component, message)
        self._diagnostics.append(Diagnostic(component=component, message=message))


def _require(executable: str, stage: str, code: ErrorCode, remediation: str) -> None:
    if shutil.which(executable) is None:
        raise RigStartupError(
            f"{executable} is not installed (not found on PATH)",
            stage=stage,
            code=code,
            details={"executable": executable},
            remediation=remediation,
        )


def _stop_rig_if_serving_hangs(rig: Rig, stop_event: threading.Event, served: threading.Event) -> None:
    """A wedged X server (alive, not answering) blocks tool calls in X reads, and with them the
    server's shutdown and the desktop's close, while the rig's stop, which would end it, only
    comes after them: then stop the rig first, so that the blocked calls fail and serving ends."""
    stop_event.wait()
    if not served.wait(SERVE_STOP_GRACE):
        log.warning(
            "serving has not ended %g s after the stop (X server wedged?): stopping the rig", SERVE_STOP_GRACE
        )
        rig.stop()


def run_until_signal(rig: Rig, serve: Callable[[Rig, threading.Event], None]) -> int:
    """Start ``rig``, run ``serve(rig, stop_event)``, then stop the rig. Main thread only.

    ``stop_event`` is set on SIGINT/SIGTERM, when the app exits or when the X server dies;
    ``serve`` must return once it is set. Returns 0 after a signal (also one that interrupted
    start-up), else :data:`EXIT_DISPLAY_LOST` if the X server died, else the app's exit status if
    it exited on its own, else 0. Raises :class:`RigStartupError` if start-up fails.
    """
    if threading.current_thread() is not threading.main_thread():
        raise DeskrigError(ErrorCode.INVALID_ARGUMENT, "run_until_signal must be called from the main thread")
    stop_event = threading.Event()
    signals: list[int] = []
    app_statuses: list[int] = []
    display_statuses: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals.append(signum)
        stop_event.set()
        rig._abort.set()  # a start-up in progress gives up at its next poll

    def stop_on_exit(statuses: list[int]) -> Callable[[int], None]:
        def record(status: int) -> None:
            statuses.append(status)
            stop_event.set()

        return record

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        rig.on_app_exit(stop_on_exit(app_statuses))
        rig.on_display_exit(stop_on_exit(display_statuses))
        try:
            rig.start()
        except RigStartupError:
            if signals:
                return 0
            raise
        if not stop_event.is_set():
            served = threading.Event()
            watch = threading.Thread(
                target=_stop_rig_if_serving_hangs, args=(rig, stop_event, served), name="deskrig-stop-watch"
            )
            watch.daemon = True
            watch.start()
            try:
                serve(rig, stop_event)
            finally:
                served.set()
    finally:
        rig.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if signals:
        return 0
    if display_statuses:
        return EXIT_DISPLAY_LOST
    return app_statuses[0] if app_statuses else 0
