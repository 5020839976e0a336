"""``run_until_signal`` in a child process (tests/apps/rig_harness.py): signals during and after
start-up, the app's exit and a SIGKILLed runner end the rig and leave nothing running, on each
rig backend."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.polling import poll
from tests.rigprocs import (
    APPS,
    BACKENDS,
    SYSTEM_PYTHON,
    TK_EXIT_WHEN_TOLD,
    XTERM_TITLE,
    assert_all_gone,
    live_rig_processes,
)

from deskrig.rig import Rig, RigOptions

HARNESS = APPS / "rig_harness.py"


class Harness:
    """tests/apps/rig_harness.py in a child process, its stderr collected line by line."""

    def __init__(self, *app: str, options: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HARNESS), *options, "--", *app], stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)

    def ready(self, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.stderr.append(line)
            if line.startswith("{"):
                message = json.loads(line)
                assert "ready" in message, message
                return message
        raise AssertionError(f"the harness never became ready; stderr: {''.join(self.stderr)}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def harness() -> Iterator[Callable[..., Harness]]:
    started: list[Harness] = []

    def start(*app: str, options: tuple[str, ...] = ()) -> Harness:
        started.append(Harness(*app, options=options))
        return started[-1]

    yield start
    for each in started:
        each.close()


#: The programs of a rig running xterm (under Xwayland on sway) whose shell runs a sleep.
XTERM_RIG_PROGRAMS = {
    "x11": {"Xvfb", "openbox", "dbus-daemon", "at-spi-bus-laun", "xterm", "sh", "sleep"},
    "sway": {"sway", "Xwayland", "dbus-daemon", "at-spi-bus-laun", "xterm", "sh", "sleep"},
}


def _start_xterm_with_grandchild(
    harness: Callable[..., Harness], backend: str
) -> tuple[Harness, dict[str, Any]]:
    """A harness running xterm whose shell runs a sleep: grandchildren outside xterm's session."""
    options = ("--backend", backend)
    run = harness("xterm", "-T", XTERM_TITLE, "-e", "sh", "-c", "sleep 600 & wait", options=options)
    ready = run.ready()
    assert ready["ready"]["ready"] is True
    runtime_dir = ready["env"]["XDG_RUNTIME_DIR"]
    poll("xterm's shell to start sleep", lambda: "sleep" in live_rig_processes(runtime_dir).values(), 10)
    return run, ready


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_to_the_runner_tears_everything_down(harness: Callable[..., Harness], backend: str) -> None:
    run, ready = _start_xterm_with_grandchild(harness, backend)
    runtime_dir, pids = ready["env"]["XDG_RUNTIME_DIR"], list(ready["ready"]["pids"].values())
    assert XTERM_RIG_PROGRAMS[backend] <= set(live_rig_processes(runtime_dir, pids).values())
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(timeout=15) == 0
    assert live_rig_processes(runtime_dir, pids) == {}
    assert not Path(runtime_dir).exists() and not Path(ready["run_dir"]).exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_during_startup_stops_the_runner(harness: Callable[..., Harness], backend: str) -> None:
    marker = b"sleep\x00599.25\x00"  # an app that never shows a window, found by its command line

    def app_pid() -> int | None:
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                if Path(f"/proc/{name}/cmdline").read_bytes() == marker:
                    return int(name)
            except OSError:
                continue
        return None

    run = harness("sleep", "599.25", options=("--backend", backend))
    pid = poll("the app to be started", app_pid, 30)
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    runtime_dir = next(e for e in environ if e.startswith(b"XDG_RUNTIME_DIR=")).decode().partition("=")[2]
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(timeout=15) == 0
    assert live_rig_processes(runtime_dir, [pid]) == {}
    assert not Path(runtime_dir).exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_app_exit_ends_the_runner_with_the_apps_status(
    harness: Callable[..., Harness], app_dir: Path, backend: str
) -> None:
    trigger = app_dir / "exit-now"
    run = harness(SYSTEM_PYTHON, "-c", TK_EXIT_WHEN_TOLD, str(trigger), options=("--backend", backend))
    ready = run.ready()
    trigger.touch()
    assert run.proc.wait(timeout=15) == 5
    assert live_rig_processes(ready["env"]["XDG_RUNTIME_DIR"], list(ready["ready"]["pids"].values())) == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_rig_dies_with_a_sigkilled_runner_and_the_next_rig_sweeps_its_dirs(
    harness: Callable[..., Harness], backend: str
) -> None:
    run, ready = _start_xterm_with_grandchild(harness, backend)
    left_behind = [Path(ready["env"]["XDG_RUNTIME_DIR"]), Path(ready["run_dir"])]
    run.proc.kill()
    run.proc.wait(timeout=5)
    try:
        assert_all_gone(ready["env"]["XDG_RUNTIME_DIR"], list(ready["ready"]["pids"].values()))
        assert all(path.is_dir() for path in left_behind)  # a SIGKILLed runner cannot clean up
        with Rig(RigOptions(wm=None, a11y=False)) as later:
            assert not any(path.exists() for path in left_behind)
            own = [Path(later.env["XDG_RUNTIME_DIR"]), later.run_dir]
            assert all(path is not None and path.is_dir() for path in own)
    finally:
        for path in left_behind:
            shutil.rmtree(path, ignore_errors=True)
