"""The stdio benchmark's reading of a spawned server's CPU time (deskrig.bench.stdio)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.polling import poll

from deskrig.bench.stdio import _RawStdio, process_cpu_clock

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


#: A stdio server that spends CPU in one stretch on each tools/call, and some more after its answer
#: is out, as a server finishes its request's task and logs before it waits again.
BUSY_SERVER = """
import json, sys, time

def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue
    result = {"content": []}
    if request["method"] == "tools/call":
        spin(0.03)
    print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}), flush=True)
    if request["method"] == "tools/call":
        spin(0.02)
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


def test_a_bare_call_counts_the_cpu_time_its_server_spends_after_answering() -> None:
    """Each call is 30 ms of CPU before the answer and 20 ms after it; read when the answer
    arrives, the server's clock had not counted the second stretch. The calls are spaced, as the
    benchmark's other cases space each server's calls."""
    server = _RawStdio([sys.executable, "-c", BUSY_SERVER], dict(os.environ))
    for _ in range(3):
        server.call("busy", "any", {})
        time.sleep(0.1)
    server.close()
    assert len(server.server_cpu_ms["busy"]) == 3
    assert all(45 <= spent_ms < 100 for spent_ms in server.server_cpu_ms["busy"]), server.server_cpu_ms
