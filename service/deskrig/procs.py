"""Child processes of a rig: each has its own session, a death signal, captured output and a
thorough teardown.

Every child starts in a new session (so it leads its own process group) with
``PR_SET_PDEATHSIG`` set, so it dies with the supervisor even when the supervisor is SIGKILLed.
Its stdout and stderr go to a bounded ring buffer and a log file. A waiter thread reaps it the
moment it exits, so no zombie is ever left behind. :meth:`ManagedProcess.stop` ends the child
and everything it started: its process group, its session, and descendants that left both
(xterm's shell, for example, gets a session of its own).

:class:`PipeLine` reads the first line a child writes to an inherited pipe, which is how Xvfb and
dbus-daemon say they are ready. The X11 and D-Bus readiness probes belong to their own packages:
:mod:`deskrig.desktop.x11_probes` and :mod:`deskrig.a11y.launcher_probe`.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

log = logging.getLogger(__name__)

if sys.platform == "win32":
    #: The signal that ends a process for sure: on Windows every signal but CTRL_* events is
    #: TerminateProcess, which SIGTERM names (Windows has no SIGKILL).
    KILL_SIGNAL = signal.SIGTERM
else:
    KILL_SIGNAL = signal.SIGKILL

Stream = Literal["stdout", "stderr"]

#: Lines of output kept in memory per process.
RING_LINES = 200
#: How long :meth:`ManagedProcess.tail` of an exited process waits for the output it wrote before
#: exiting to be read from the pipes (a child of its that holds them open would hold it that long).
OUTPUT_DRAIN_S = 0.5

_PR_SET_PDEATHSIG = 1


def normalize_status(returncode: int) -> int:
    """A process exit status as a shell reports it: killed by signal N becomes 128 + N."""
    return returncode if returncode >= 0 else 128 - returncode


def die_with_parent(death_signal: int) -> Callable[[], None]:
    """A ``preexec_fn`` that ties the child's life to the thread forking it (call it in that thread).

    Every child of the rig, ffmpeg included, is started with it: ``PR_SET_PDEATHSIG`` delivers
    ``death_signal`` to the child when that thread ends, so no child outlives a supervisor that
    was SIGKILLed and could not stop it. The death signal fires when the *thread* ends, not the
    process: fork from a long-lived thread (see :func:`spawn`'s ``spawner``).
    """
    parent_pid = os.getpid()
    # Loaded here, in the parent: the forked child only calls it. Not at import, since Windows
    # (which forks nothing and has no preexec_fn) has no C library to load by no name.
    libc = ctypes.CDLL(None, use_errno=True)

    def setup() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        # The supervisor may have died between fork and prctl; no death signal would come then.
        if os.getppid() != parent_pid:
            os._exit(127)

    return setup


@dataclass(frozen=True)
class ProcEntry:
    """One line of the process table, from /proc/PID/stat."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start_time: int

    @property
    def dead(self) -> bool:
        return self.state in ("Z", "X")


def read_proc(pid: int) -> ProcEntry | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name may contain spaces and parentheses; the fields start after the last ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    return ProcEntry(
        pid=pid,
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        sid=int(fields[3]),
        state=fields[0],
        start_time=int(fields[19]),
    )


def process_table() -> list[ProcEntry]:
    entries = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (entry := read_proc(int(name))) is not None:
            entries.append(entry)
    return entries


def process_family(leader: ProcEntry, known: Collection[int] = ()) -> dict[int, ProcEntry]:
    """Live processes that belong to ``leader``: its group, its session and all descendants.

    ``known`` pids (found by earlier scans) are followed too, so a grandchild whose parent has
    already exited is still found through its own children. Processes older than the leader
    cannot be its own and are left out, which guards against reused pids.
    """
    table = [e for e in process_table() if not e.dead and e.start_time >= leader.start_time]
    children: dict[int, list[ProcEntry]] = {}
    for entry in table:
        children.setdefault(entry.ppid, []).append(entry)
    family = {
        e.pid: e
        for e in table
        if e.pid == leader.pid or e.pgid == leader.pid or e.sid == leader.pid or e.pid in known
    }
    pending = list(family)
    while pending:
        for child in children.get(pending.pop(), []):
            if child.pid not in family:
                family[child.pid] = child
                pending.append(child.pid)
    return family


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``pid`` is ``ancestor``, one of its descendants, or in its session."""
    for _ in range(64):  # a bound, in case of a cycle through a reused pid
        if pid == ancestor:
            return True
        entry = read_proc(pid)
        if entry is None or entry.ppid <= 1:
            return False
        if entry.sid == ancestor:
            return True
        pid = entry.ppid
    return False


class ManagedProcess:
    """A running child: its output, its exit status, and a teardown that leaves nothing behind."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], log_path: Path) -> None:
        self.name = name
        self.pid = popen.pid
        self.log_path = log_path
        self.argv = [str(arg) for arg in popen.args] if isinstance(popen.args, list) else [str(popen.args)]
        self._popen = popen
        self._entry = read_proc(popen.pid)
        self._ring: deque[tuple[Stream, str]] = deque(maxlen=RING_LINES)
        self._ring_lock = threading.Lock()
        self._log_file = log_path.open("ab")
        self._exited = threading.Event()
        self._status: int | None = None
        self._exit_callbacks: list[Callable[[int], None]] = []
        self._callback_lock = threading.Lock()
        #: Whether :meth:`tail` has waited for the output of the exited process to be read.
        self._drained = False
        self._readers = [
            self._thread(f"{name}-{stream}", self._read, stream, pipe)
            for stream, pipe in (("stdout", popen.stdout), ("stderr", popen.stderr))
            if pipe is not None
        ]
        self._waiter = self._thread(f"{name}-waiter", self._wait)

    @staticmethod
    def _thread(name: str, target: Callable[..., None], *args: object) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=f"deskrig-{name}", daemon=True)
        thread.start()
        return thread

    def _read(self, stream: Stream, pipe: IO[bytes]) -> None:
        with pipe:
            for raw in pipe:
                with self._ring_lock:
                    self._ring.append((stream, raw.decode("utf-8", "replace").rstrip("\r\n")))
                    if not self._log_file.closed:
                        self._log_file.write(raw)
                        self._log_file.flush()

    def _wait(self) -> None:
        self._status = normalize_status(self._popen.wait())
        with self._callback_lock:
            self._exited.set()
            callbacks = list(self._exit_callbacks)
        for callback in callbacks:
            try:
                callback(self._status)
            except Exception:
                log.exception("exit callback of %s failed", self.name)

    @property
    def alive(self) -> bool:
        return not self._exited.is_set()

    @property
    def exit_status(self) -> int | None:
        """The exit status (128 + N when killed by signal N), or None while it runs."""
        return self._status if self._exited.is_set() else None

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status once the process has exited, or None if ``timeout`` passes first."""
        self._exited.wait(timeout)
        return self.exit_status

    def on_exit(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(status)`` from the waiter thread when the process exits (at once, in
        this thread, if it already has)."""
        with self._callback_lock:
            if self.alive:
                self._exit_callbacks.append(callback)
                return
        callback(self._status if self._status is not None else 0)

    def tail(self, lines: int = 20, stream: Stream | None = None) -> list[str]:
        """The last ``lines`` lines of output (both streams, or only ``stream``). Of an exited
        process, all it wrote: its last lines may still be in the pipes when its exit is seen
        (their readers are threads), so the first look after the exit waits for them to be read."""
        if not self.alive and not self._drained:
            self._drained = True
            deadline = time.monotonic() + OUTPUT_DRAIN_S
            for reader in self._readers:
                reader.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._ring_lock:
            selected = [text for source, text in self._ring if stream is None or source == stream]
        return selected[-lines:] if lines > 0 else []

    def stop(self, grace: float = 3.0) -> int | None:
        """TERM the process and its family, KILL whatever is left after ``grace``; reap the child.

        Idempotent. Returns the child's exit status (None only if it could not be reaped).
        """
        if self._entry is not None:
            self._end_family(self._entry, grace)
        elif self.alive:
            os.kill(self.pid, KILL_SIGNAL)  # not reaped yet, so the pid cannot have been reused
        status = self.wait(2.0)
        if status is None:
            log.warning("%s (pid %d) could not be reaped", self.name, self.pid)
        # Readers end when the last writer of the pipes is gone, which the family sweep ensures.
        for reader in self._readers:
            reader.join(timeout=1.0)
        with self._ring_lock:
            self._log_file.close()
        return status

    def _end_family(self, leader: ProcEntry, grace: float) -> None:
        signalled: dict[int, int] = {}
        known: set[int] = set()
        deadline = time.monotonic() + grace
        give_up = deadline + 2.0
        while True:
            family = process_family(leader, known)
            if not self.alive:
                family.pop(leader.pid, None)
            if not family:
                return
            known.update(family)
            now = time.monotonic()
            if now >= give_up:
                log.warning("%s: processes %s survived SIGKILL", self.name, sorted(family))
                return
            sig = signal.SIGTERM if now < deadline else KILL_SIGNAL
            for pid in family:
                if signalled.get(pid) != sig:
                    signalled[pid] = sig
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, sig)
            time.sleep(0.02)


@dataclass(frozen=True)
class Account:
    """A user a child runs as (see :func:`spawn`'s ``user``)."""

    name: str
    uid: int
    gid: int


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log_dir: Path,
    cwd: str | None = None,
    pass_fds: Sequence[int] = (),
    death_signal: int = KILL_SIGNAL,
    spawner: Executor | None = None,
    user: Account | None = None,
) -> ManagedProcess:
    """Start ``argv`` as a :class:`ManagedProcess` logging to ``{log_dir}/{name}.log``.

    The death signal fires when the *thread* that forked the child ends, not only the process;
    pass a long-lived ``spawner`` (a one-thread executor) when the caller's thread may end first.
    ``user``: run the child as this user, with its group and no others (needs root). Raises
    OSError (FileNotFoundError for a missing executable) like :class:`subprocess.Popen`.
    """

    def launch() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=tuple(pass_fds),
            start_new_session=True,
            # Popen switches the user before it runs preexec_fn, so the death signal (which a
            # change of user clears) is set for the child's final user.
            preexec_fn=die_with_parent(death_signal),
            user=None if user is None else user.uid,
            group=None if user is None else user.gid,
            extra_groups=None if user is None else [],
        )

    popen = spawner.submit(launch).result() if spawner is not None else launch()
    return ManagedProcess(name, popen, log_dir / f"{name}.log")


# --- readiness ------------------------------------------------------------------------------


class PipeLine:
    """The first line a child writes to an inherited pipe (Xvfb -displayfd, dbus --print-address)."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        if sys.platform != "win32":  # the rig's children (Linux); Windows pipes cannot be made non-blocking
            os.set_blocking(self.read_fd, False)
        self._data = b""

    def poll(self) -> str | None:
        with contextlib.suppress(BlockingIOError):
            self._data += os.read(self.read_fd, 4096)
        line, newline, _ = self._data.partition(b"\n")
        return line.decode() if newline else None

    def wait(self, timeout: float) -> None:
        """Until the child has written (or closed the pipe), for at most ``timeout`` seconds (Linux)."""
        select.select([self.read_fd], [], [], timeout)

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
