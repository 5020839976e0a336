"""A signal the kernel hands to any thread of a deskrig server stops it: the rig over HTTP, and
the stdio servers (`deskrig serve --stdio`, `deskrig rig run --stdio`), each idle."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.desktop.conftest import start_xvfb, stop_process
from tests.polling import poll
from tests.server.rigproc import DESKRIG, RigProcess, exit_status_or_stacks

from deskrig.bench.stdio import StdioPeer, initialize


def _to_thread(pid: int, tid: int, sig: int) -> None:
    """``sig`` to thread ``tid`` of process ``pid`` alone (glibc's tgkill), as the kernel may hand a
    process's signal to any of its threads."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


#: What ``/proc/<pid>/wchan`` names for a thread in epoll_wait (``ep_poll`` on older kernels).
EPOLL_WAITS = ("do_epoll_wait", "ep_poll")


def _asleep_in_the_selector(pid: int) -> bool:
    """The main thread of ``pid`` has waited in epoll for half a second on end: the server is idle
    (a signal taken while it still runs Python, just after a call, is handled at once)."""
    for _ in range(10):
        if Path(f"/proc/{pid}/wchan").read_text() not in EPOLL_WAITS:
            return False
        time.sleep(0.05)
    return True


def _sigterm_to_another_thread(pid: int) -> None:
    poll("the server idle", lambda: _asleep_in_the_selector(pid) or None)
    others = sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid)
    assert others, "the server runs threads besides its main one"
    _to_thread(pid, others[0], signal.SIGTERM)


def test_sigterm_taken_by_another_thread_than_the_main_one_stops_an_idle_rig(tmp_path: Path) -> None:
    """The rig's handlers run in its main thread, asleep in the event loop's selector while the rig
    is idle: a SIGTERM that another thread took once left it serving (a CI run's rig did not stop)."""
    rig = RigProcess(app=["xterm"]).start(tmp_path)
    assert rig.proc is not None
    _sigterm_to_another_thread(rig.proc.pid)
    assert rig.stop(sig=0, timeout=10) == 0  # signal 0: nothing more is sent


@pytest.fixture
def display(tmp_path: Path) -> Iterator[str]:
    xvfb, name = start_xvfb(tmp_path)
    try:
        yield name
    finally:
        stop_process(xvfb)


@pytest.mark.parametrize("command", [["serve", "--stdio"], ["rig", "run", "--stdio", "--", "xterm"]])
def test_sigterm_taken_by_another_thread_than_the_main_one_stops_an_idle_stdio_server(
    command: list[str], tmp_path: Path, display: str
) -> None:
    """Over stdio the main thread sleeps in the event loop's selector too, between calls: a SIGTERM
    that another thread took left `deskrig serve --stdio` serving until its client wrote again."""
    env = {**os.environ, "DISPLAY": display, "HOME": str(tmp_path), "PYTHONFAULTHANDLER": "1"}
    peer = StdioPeer([*DESKRIG, *command], env)
    try:
        initialize(peer)
        # A call, so that the desktop is open (and its threads run) before the signal.
        assert not peer.request(2, "tools/call", {"name": "list_windows", "arguments": {}})["result"][
            "isError"
        ]
        _sigterm_to_another_thread(peer.proc.pid)
        assert exit_status_or_stacks(peer.proc, "SIGTERM to another thread", peer.stderr, timeout=10) == 0
    finally:
        stop_process(peer.proc)
