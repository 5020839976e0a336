"""Starting and stopping apps on the desktop for ``launch_app`` and ``kill_app``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Protocol

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.procs import Account, read_proc


class AppLauncher(Protocol):
    """Starts a process on the desktop and remembers it, so it can be stopped again."""

    #: The user programs started on this desktop run as; None: the server's own.
    account: Account | None

    def launch(self, command: list[str], env: Mapping[str, str], cwd: str | None) -> int: ...

    def environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        """The full environment a program started on this desktop gets, plus ``extra``."""
        ...

    def launched(self, pid: int) -> bool: ...

    def exit_status(self, pid: int) -> int | None:
        """The exit status of a launched process that has ended; None while it runs."""
        ...


def start_error(command: list[str], exc: OSError) -> DeskrigError:
    return DeskrigError(
        ErrorCode.APP_NOT_RUNNING,
        f"cannot start {command[0]!r}: {exc.strerror or exc}",
        details={"command": command},
        remediation="Check the command name and that it is installed in the rig.",
    )


class SubprocessLauncher:
    """Launches into a given base environment (a display's DISPLAY, buses ...) in its own session."""

    def __init__(self, base_env: Mapping[str, str]) -> None:
        self.account: Account | None = None
        self._base_env = dict(base_env)
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()

    def environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        return {**os.environ, **self._base_env, **extra}

    def launch(self, command: list[str], env: Mapping[str, str], cwd: str | None) -> int:
        try:
            process = subprocess.Popen(
                command,
                env=self.environment(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            raise start_error(command, exc) from exc
        with self._lock:
            self._processes[process.pid] = process
        return process.pid

    def launched(self, pid: int) -> bool:
        with self._lock:
            return pid in self._processes

    def exit_status(self, pid: int) -> int | None:
        with self._lock:
            process = self._processes.get(pid)
        return None if process is None else process.poll()


class CallbackLauncher:
    """Adapts a launch function that returns a handle with ``pid`` and ``exit_status`` (a rig's),
    which starts programs as ``account``."""

    def __init__(
        self,
        launch: Callable[[list[str], Mapping[str, str], str | None], object],
        environment: Callable[[Mapping[str, str]], dict[str, str]],
        account: Account | None = None,
    ) -> None:
        self.account = account
        self._launch = launch
        self._environment = environment
        self._handles: dict[int, object] = {}
        self._lock = threading.Lock()

    def environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        return self._environment(extra)

    def launch(self, command: list[str], env: Mapping[str, str], cwd: str | None) -> int:
        try:
            handle = self._launch(command, env, cwd)
        except OSError as exc:
            raise start_error(command, exc) from exc
        pid = int(handle.pid)  # type: ignore[attr-defined]
        with self._lock:
            self._handles[pid] = handle
        return pid

    def launched(self, pid: int) -> bool:
        with self._lock:
            return pid in self._handles

    def exit_status(self, pid: int) -> int | None:
        with self._lock:
            handle = self._handles.get(pid)
        return None if handle is None else handle.exit_status  # type: ignore[attr-defined]


def process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    if sys.platform == "win32":  # no /proc: ask Windows
        from deskrig.desktop.windows_api import process_running

        return process_running(pid)
    entry = read_proc(pid)
    return entry is not None and not entry.dead


def terminate(pid: int, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to ``pid``: APP_NOT_RUNNING once it is gone (on Windows, a gone process is
    an OSError such as "the parameter is incorrect", not ProcessLookupError)."""
    try:
        os.kill(pid, sig)
    except OSError as exc:
        if isinstance(exc, ProcessLookupError) or not process_alive(pid):
            raise DeskrigError(ErrorCode.APP_NOT_RUNNING, f"no process {pid}", details={"pid": pid}) from exc
        raise DeskrigError(
            ErrorCode.PERMISSION_DENIED,
            f"cannot signal process {pid}: {exc.strerror or exc}",
            details={"pid": pid},
            remediation="kill_app stops apps this rig's user may signal: those it started or that run as it.",
        ) from exc
