"""A signal the kernel hands to any thread of the rig stops it."""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

from tests.server.rigproc import RigProcess


def _to_thread(pid: int, tid: int, sig: int) -> None:
    """``sig`` to thread ``tid`` of process ``pid`` alone (glibc's tgkill), as the kernel may hand a
    process's signal to any of its threads."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def test_sigterm_taken_by_another_thread_than_the_main_one_stops_an_idle_rig(tmp_path: Path) -> None:
    """The rig's handlers run in its main thread, asleep in the event loop's selector while the rig
    is idle: a SIGTERM that another thread took once left it serving (a CI run's rig did not stop)."""
    rig = RigProcess(app=["xterm"]).start(tmp_path)
    assert rig.proc is not None
    pid = rig.proc.pid
    others = sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid)
    assert others, "the rig runs threads besides its main one"
    _to_thread(pid, others[0], signal.SIGTERM)
    assert rig.stop(sig=0, timeout=10) == 0  # signal 0: nothing more is sent
