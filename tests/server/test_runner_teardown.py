"""The runner's end: signals, a lost or wedged display and the app's exit tear everything down."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.polling import poll
from tests.rigprocs import BACKENDS, DISPLAY_SERVER, live_rig_processes
from tests.server.rigproc import DESKRIG, RigProcess, free_port

from deskrig.rig import EXIT_DISPLAY_LOST


def _boot_ticks() -> float:
    """Now, in the clock of /proc/<pid>/stat's start times (ticks since boot)."""
    return float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK")


def _rig_processes(display: str, started_before: float = math.inf) -> dict[int, str]:
    """pid -> command of live processes that belong to the rig on ``display`` (by env or by Xvfb
    argv), in this pid namespace (a rig in a container numbers its displays on its own), started
    before ``started_before`` (boot ticks): once a rig has ended, another rig (a test run beside
    this one) may take its display number."""
    found = {}
    own_namespace = os.readlink("/proc/self/ns/pid")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "pid") != own_namespace:
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z" or int(fields[19]) > started_before:  # state; starttime (field 22)
            continue
        if f"DISPLAY={display}".encode() in environ or (
            b"Xvfb" in cmdline[0] and display.encode() in cmdline
        ):
            found[int(entry.name)] = stat[stat.index("(") + 1 : stat.rindex(")")]
    return found


def assert_none_left(display: str) -> None:
    """Within 10 s, no process of the rig that ran on ``display`` (which has ended) is alive."""
    ended = _boot_ticks()
    try:
        poll("no stray processes", lambda: not _rig_processes(display, ended), timeout=10)
    except AssertionError:
        raise AssertionError(f"still alive: {_rig_processes(display, ended)}") from None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_tears_everything_down(tmp_path: Path, sig: int) -> None:
    rig = RigProcess(app=["xterm", "-e", "sh", "-c", "sleep 300"]).start(tmp_path)
    display = rig.display
    assert _rig_processes(display)
    assert rig.stop(sig) == 0
    assert_none_left(display)


#: What the runner logs when the display server dies, by backend.
DISPLAY_LOST_LOG = {"x11": "the X server (Xvfb", "sway": "sway (pid"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("app", [[], ["xterm", "-e", "sh", "-c", "sleep 300"]], ids=["bare", "xterm"])
def test_display_death_stops_the_runner_cleanly(tmp_path: Path, app: list[str], backend: str) -> None:
    """The display server (Xvfb, sway) killed under a running rig: the runner stops with
    EXIT_DISPLAY_LOST, quietly, leaving nothing behind (before, a bare rig ran on without a display,
    and a rig with an app died in teardown on Xlib's ConnectionClosedError)."""
    rig = RigProcess(app=app, extra=["--backend", backend]).start(tmp_path)
    try:
        details = rig.wait_ready()["details"]
        display = details["display"]
        runtime_dir = Path(details["a11y_bus"].split(",")[0].removeprefix("unix:path=")).parents[1]
        os.kill(details["pids"][DISPLAY_SERVER[backend]], signal.SIGKILL)
        assert rig.proc is not None and rig.proc.wait(timeout=30) == EXIT_DISPLAY_LOST
    finally:
        rig.stop()
    stderr = rig.stderr()
    assert "Traceback" not in stderr and DISPLAY_LOST_LOG[backend] in stderr, stderr
    assert_none_left(display)
    poll("no stray processes", lambda: not live_rig_processes(str(runtime_dir)), timeout=10)
    assert not Path(runtime_dir).exists()


def test_sigterm_tears_down_a_rig_whose_display_is_wedged(tmp_path: Path) -> None:
    """Xvfb alive but not answering (here: stopped), a tool call blocked on it: SIGTERM still ends
    the runner and every process (before, shutdown waited on the call for ever)."""
    rig = RigProcess(app=["xterm"]).start(tmp_path)
    details = rig.wait_ready()["details"]
    try:
        os.kill(details["pids"]["xvfb"], signal.SIGSTOP)
        results: list[bool] = []

        def call_blocked_on_x() -> None:
            # The call must end with an answer, not hang: a tool error, or the JSON-RPC error a
            # server that is shutting down gives a call it cancelled.
            try:
                results.append(rig.call("list_windows").is_error)
            except Exception:
                results.append(True)

        call = threading.Thread(target=call_blocked_on_x, daemon=True)
        call.start()
        time.sleep(1)
        assert rig.stop(timeout=40) == 0
        call.join(timeout=10)
        assert results == [True]
        assert_none_left(details["display"])
        assert "Traceback" not in rig.stderr()
    finally:  # on failure: the others die with the runner, but a stopped Xvfb only by SIGKILL
        if rig.proc is not None and rig.proc.poll() is None:
            rig.proc.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(details["pids"]["xvfb"], signal.SIGKILL)


def test_app_exit_ends_the_runner_with_its_status(tmp_path: Path) -> None:
    marker = tmp_path / "go"
    script = f"import tkinter,os,time; r=tkinter.Tk(); r.title('Short'); r.after(100, lambda: None); r.update(); \
import pathlib; p=pathlib.Path({str(marker)!r}); [time.sleep(0.05) for _ in iter(lambda: p.exists(), True)]; os._exit(7)"
    rig = RigProcess(app=["/usr/bin/python3", "-c", script]).start(tmp_path)
    display = rig.display
    marker.touch()
    assert rig.proc is not None
    assert rig.proc.wait(timeout=30) == 7
    assert_none_left(display)


def test_app_dying_at_startup_reports_status_and_stderr(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *DESKRIG,
            "rig",
            "run",
            "--http",
            f"127.0.0.1:{free_port()}",
            "--token",
            "t",
            "--",
            sys.executable,
            "-c",
            "import sys; sys.stderr.write('boom: cannot open thing\\n'); sys.exit(3)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # The server built beside the start-up is closed, and the app's failure is what is reported.
    assert result.returncode != 0 and result.stdout == ""
    assert "app exited with status 3 during start-up" in result.stderr
    assert "boom: cannot open thing" in result.stderr
    assert "Traceback" not in result.stderr
