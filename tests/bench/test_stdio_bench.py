"""The stdio benchmark's reading of a spawned server's CPU time (deskrig.bench.stdio)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.polling import poll

from deskrig.bench.stdio import process_cpu_clock

#: Two threads besides the main one, all three busy.
SPINNING = """
import threading
def spin():
    while True:
        pass
for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
spin()
"""


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "T"


def test_a_process_cpu_clock_reads_the_cpu_time_of_all_its_threads() -> None:
    """Read with the process stopped, so the clock and the threads' scheduler statistics are read
    at one moment, and must agree to the nanosecond."""
    spinner = subprocess.Popen([sys.executable, "-c", SPINNING])
    try:
        clock = process_cpu_clock(spinner.pid)
        tasks = Path(f"/proc/{spinner.pid}/task")
        poll("three threads", lambda: len(list(tasks.iterdir())) == 3)
        poll("CPU time used", lambda: time.clock_gettime_ns(clock) > 100_000_000)
        os.kill(spinner.pid, signal.SIGSTOP)
        poll("the process stopped", lambda: stopped(spinner.pid))
        threads = [int((task / "schedstat").read_text().split()[0]) for task in tasks.iterdir()]
        assert len(threads) == 3 and all(threads)
        assert time.clock_gettime_ns(clock) == sum(threads)
    finally:
        spinner.kill()
        spinner.wait()
