"""The supervisor: runs a rig's stages in order and owns what they share.

It makes the rig's directories, forks every program from one long-lived thread, polls readiness
probes with a deadline, turns failures into :class:`RigStartupError` quoting the failed
program's stderr, and on stop tears the stages down in reverse order. It knows nothing of X11 or
any other display protocol: that is the stages' business (:mod:`deskrig.rig.stages`).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Diagnostic
from deskrig.procs import KILL_SIGNAL, Account, ManagedProcess, spawn
from deskrig.rig.options import RigStartupError
from deskrig.rig.stages import ExitWatch, Stage
from deskrig.rundirs import make_rig_dir, sweep_stale_dirs

log = logging.getLogger(__name__)
T = TypeVar("T")

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
POLL_INTERVAL = 0.05
STOP_GRACE = 3.0


def require_executable(executable: str, stage: str, code: ErrorCode, remediation: str) -> None:
    """Fail the start-up of ``stage`` if ``executable`` is not on PATH."""
    if shutil.which(executable) is None:
        raise RigStartupError(
            f"{executable} is not installed (not found on PATH)",
            stage=stage,
            code=code,
            details={"executable": executable},
            remediation=remediation,
        )


class Supervisor:
    """Starts ``stages`` in order, each once the one before is ready; stops them in reverse.

    Implements :class:`deskrig.rig.stages.StageHost` for them. With an ``account``, every program
    of the rig runs as that user (the supervisor stays who it is and reaches their sockets as root),
    with a private runtime dir and home of that user's own."""

    def __init__(
        self,
        stages: Sequence[Stage],
        *,
        startup_timeout: float,
        run_dir: str | None,
        account: Account | None = None,
    ) -> None:
        self._stages = list(stages)
        self._account = account
        self._startup_timeout = startup_timeout
        self._run_dir_option = run_dir
        self._lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._abort = threading.Event()
        self._started = False
        self._stopping = False
        #: Programs started with :meth:`launch`, which belong to no stage.
        self._launched: list[ManagedProcess] = []
        self._launch_count = 0
        self._diagnostics: list[Diagnostic] = []
        self._spawner: ThreadPoolExecutor | None = None
        #: The rig's own 0700 (0711 with an account) directory, which holds the runtime dir.
        self._private_dir: Path | None = None
        self._runtime_dir: Path | None = None
        self._run_dir: Path | None = None
        #: The processes watched per role, and who to tell when one exits on its own.
        self._watched: dict[str, ManagedProcess] = {}
        self._exit_callbacks: dict[str, list[Callable[[int], None]]] = {}
        #: Start-up's progress, for :meth:`wait_started`: how many stages are up, and whether it is over.
        self._progress = threading.Condition()
        self._stages_up = 0
        self._startup_over = False

    # --- life cycle ---

    def start(self) -> None:
        """Start every stage and wait until it is ready; on failure tear all down and raise."""
        with self._lock:
            if self._started:
                raise DeskrigError(ErrorCode.INVALID_ARGUMENT, "a rig can only be started once")
            self._started = True
        try:
            self._make_dirs()
            # Children die when the thread that forked them ends: fork from one that lives until stop.
            self._spawner = ThreadPoolExecutor(1, thread_name_prefix="deskrig-spawner")
            try:
                settling: list[tuple[Stage, float]] = []  # started, to be settled after the next one
                for stage in self._stages:
                    begun = time.monotonic()
                    stage.start(self)
                    settling.append((stage, begun))
                    if not stage.overlaps_next:
                        self._settle(settling)
                self._settle(settling)
            finally:
                for stage in self._stages:
                    stage.end_startup()
        except DeskrigError:
            self.stop()
            raise
        except Exception as exc:  # e.g. a probe's connection broke because its server died under it
            self.stop()
            procs = self.processes
            stage_name = procs[-1].name if procs else "setup"
            raise RigStartupError(f"rig start-up failed: {exc!r}", stage=stage_name) from exc
        except BaseException:
            self.stop()
            raise
        finally:
            with self._progress:
                self._startup_over = True
                self._progress.notify_all()

    def _settle(self, started: list[tuple[Stage, float]]) -> None:
        """Settle ``started`` (stage, when it began) in order, count each as up, and clear the list."""
        for stage, begun in started:
            stage.settle(self)
            log.debug(
                "%s up in %.3f s (%.0f ms of this thread's CPU so far)",
                type(stage).__name__,
                time.monotonic() - begun,
                time.thread_time() * 1000,
            )
            with self._progress:
                self._stages_up += 1
                self._progress.notify_all()
        started.clear()

    def wait_started(self, stage: Stage, timeout: float | None = None) -> bool:
        """Block until ``stage`` has started (True), or until start-up ended without it or
        ``timeout`` passed (False): what needs only the first stages (the server needs the display
        and the buses, not the app) can begin while the later ones start."""
        position = next(index for index, known in enumerate(self._stages) if known is stage)
        with self._progress:
            self._progress.wait_for(lambda: self._stages_up > position or self._startup_over, timeout)
            return self._stages_up > position

    def abort_startup(self) -> None:
        """Make a start-up in progress give up at its next poll (safe from a signal handler)."""
        self._abort.set()

    def stop(self) -> None:
        """End every process in reverse start order (TERM, then KILL after a grace period), reap
        them all, and remove the runtime dir and the default run dir. Idempotent."""
        with self._stop_lock:
            with self._lock:
                self._stopping = True
                launched = list(self._launched)
            self._abort.set()
            for proc in reversed(launched):
                proc.stop(STOP_GRACE)
            for stage in reversed(self._stages):
                stage.stop(STOP_GRACE)
            if self._spawner is not None:
                self._spawner.shutdown(wait=True)
            if self._private_dir is not None:
                shutil.rmtree(self._private_dir, ignore_errors=True)
            if self._run_dir is not None and self._run_dir_option is None:
                shutil.rmtree(self._run_dir, ignore_errors=True)

    def _make_dirs(self) -> None:
        sweep_stale_dirs()  # what SIGKILLed rigs left behind
        # A fresh 0700 dir per rig: its bus socket, a11y bus socket and cookie are nobody else's.
        self._private_dir = self._runtime_dir = make_rig_dir("xdg")
        if self._account is not None:
            # The supervisor's own dir (with the owner record the sweep reads) holds the account's:
            # the account may pass through the first, and only it (and root) into the second.
            self._private_dir.chmod(0o711)
            self._runtime_dir = self._private_dir / "run"
            for path in (self._runtime_dir, self._runtime_dir / "home"):
                path.mkdir(mode=0o700)
                os.chown(path, self._account.uid, self._account.gid)
        if self._run_dir_option is None:
            self._run_dir = make_rig_dir("rig")
        else:
            self._run_dir = Path(self._run_dir_option)
            self._run_dir.mkdir(parents=True, exist_ok=True)

    # --- what the rig shows ---

    @property
    def processes(self) -> list[ManagedProcess]:
        """Every process started, in start order."""
        with self._lock:
            return [proc for stage in self._stages for proc in stage.processes] + self._launched

    @property
    def run_dir(self) -> Path | None:
        """Where the processes' logs go (``{name}.log``); None before start."""
        return self._run_dir

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Fallbacks taken during start-up (no D-Bus, no AT-SPI, a missing X extension ...)."""
        return list(self._diagnostics)

    @property
    def env(self) -> dict[str, str]:
        """The variables that put a program into this rig (display, cookie, buses, toolkits)."""
        env: dict[str, str] = {}
        if self._runtime_dir is not None:
            env["XDG_RUNTIME_DIR"] = str(self._runtime_dir)
            if self._account is not None:  # the supervisor's home is not the account's to write
                home = str(self._runtime_dir / "home")
                env |= {"HOME": home, "USER": self._account.name, "LOGNAME": self._account.name}
        for stage in self._stages:
            env |= stage.env()
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
        proc = self.spawn(None, name, argv, self.launch_environment(env), cwd=cwd)
        proc.on_exit(lambda status: self._launched_exited(proc, status))
        return proc

    def _launched_exited(self, proc: ManagedProcess, status: int) -> None:
        """A launched app ended (crashed, quit or was killed): a warning clients may be sent
        (MCP logging), naming the log of its output."""
        with self._lock:
            if self._stopping:
                return
        log.warning(
            "app %s (%s, pid %d) exited with status %d; its output: %s",
            proc.name,
            proc.argv[0],
            proc.pid,
            status,
            proc.log_path,
        )

    def _on_exit(self, role: str, callback: Callable[[int], None]) -> None:
        """Call ``callback(status)`` when the process watched as ``role`` exits on its own (not
        when :meth:`stop` ends it); at once if that already happened."""
        with self._lock:
            proc = self._watched.get(role)
            if proc is None or proc.alive or self._stopping:
                self._exit_callbacks.setdefault(role, []).append(callback)
                return
        callback(proc.exit_status or 0)

    def _exited(self, proc: ManagedProcess, watch: ExitWatch, status: int) -> None:
        """A watched process exited on its own: tell whoever asked."""
        with self._lock:
            if self._stopping:
                return
            callbacks = list(self._exit_callbacks.get(watch.role, []))
        log.log(watch.level, watch.message, proc.pid, status)
        for callback in callbacks:
            try:
                callback(status)
            except Exception:
                log.exception("an on_app_exit callback failed")

    # --- the StageHost interface ---

    @property
    def runtime_dir(self) -> Path:
        assert self._runtime_dir is not None
        return self._runtime_dir

    @property
    def startup_timeout(self) -> float:
        return self._startup_timeout

    @property
    def account(self) -> Account | None:
        return self._account

    def spawn(
        self,
        stage: Stage | None,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        cwd: str | None = None,
        pass_fds: Sequence[int] = (),
        death_signal: int = KILL_SIGNAL,
        watch: ExitWatch | None = None,
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
                user=self._account,
            )
            (stage.processes if stage is not None else self._launched).append(proc)
            if watch is not None:
                self._watched[watch.role] = proc
        if watch is not None:
            proc.on_exit(lambda status: self._exited(proc, watch, status))
        return proc

    def poll(
        self,
        what: str,
        check: Callable[[], T | None],
        proc: ManagedProcess,
        observe: Callable[[], str],
        code: ErrorCode = ErrorCode.INTERNAL_ERROR,
        died_code: ErrorCode = ErrorCode.INTERNAL_ERROR,
        wake: Callable[[float], object] | None = None,
    ) -> T:
        """Call ``check`` until it returns a value; fail with ``died_code`` if ``proc`` dies, with
        ``code`` if the deadline passes. Between checks, ``wake(POLL_INTERVAL)`` waits for a change
        (an abort or a death is then seen at most that late); without it, a plain wait."""
        timeout = self._startup_timeout
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result is not None:
                return result
            if not proc.alive:
                status = proc.exit_status
                raise self.failure(
                    proc,
                    f"{proc.name} exited with status {status} during start-up (waiting for {what})",
                    died_code,
                )
            if self._abort.is_set():
                raise RigStartupError(f"start-up interrupted while waiting for {what}", stage=proc.name)
            if time.monotonic() >= deadline:
                seen = observe()
                raise self.failure(
                    proc,
                    f"{proc.name}: gave up waiting for {what} after {timeout:g} s; observed: {seen}",
                    code,
                    observed=seen,
                )
            if wake is None:
                self._abort.wait(POLL_INTERVAL)
            else:
                wake(POLL_INTERVAL)

    def failure(
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

    def note(self, component: str, message: str) -> None:
        log.warning("%s: %s", component, message)
        self._diagnostics.append(Diagnostic(component=component, message=message))
