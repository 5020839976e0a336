"""How often threads are woken, from the kernel's scheduler statistics (Linux ``/proc``): the
third field of a thread's ``schedstat`` counts the times it was put on a CPU (one per wake-up of an
idle thread, or preemption)."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path


def _runs(task: Path) -> int:
    return int((task / "schedstat").read_text().split()[2])


def process_wakeups(pid: int) -> int:
    """How many times the threads of process ``pid`` have been put on a CPU so far."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            total += _runs(task)
    return total


def started_thread(name: str, before: set[threading.Thread]) -> threading.Thread:
    """The one thread called ``name`` that is not in ``before`` (other tests may have left threads
    of that name running)."""
    (thread,) = {t for t in threading.enumerate() if t.name == name} - before
    assert thread.native_id is not None, f"{name} has not started"
    return thread


def threads_called(name: str) -> set[threading.Thread]:
    """This process's running threads named ``name`` (other tests' rigs may have left some)."""
    return {t for t in threading.enumerate() if t.name == name}


def thread_wakeups(thread: threading.Thread) -> int:
    """How many times ``thread`` (of this process) has been put on a CPU so far."""
    return _runs(Path(f"/proc/self/task/{thread.native_id}"))


def thread_asleep(thread: threading.Thread) -> bool:
    """Whether ``thread`` (of this process) is sleeping (state S in its ``stat``)."""
    stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "S"
