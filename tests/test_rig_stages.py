"""The stage interface without X11: a backend's own stages run in order by the supervisor and
torn down in reverse, whether start-up succeeds or fails. Real processes, no display server."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from deskrig.errors import ErrorCode
from deskrig.procs import ManagedProcess
from deskrig.rig import Rig, RigOptions, RigStages, RigStartupError, Stage
from deskrig.rig.a11y import SessionA11yStage
from deskrig.rig.stages import A11yStage, AppStage, DisplayStage, StageHost
from deskrig.rig.supervisor import POLL_INTERVAL


def _started(proc: ManagedProcess) -> bool | None:
    return True if proc.pid > 0 else None


class SleeperDisplay(DisplayStage):
    """A display whose server is a ``sleep``: what the supervisor must not care about."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    @property
    def display(self) -> str | None:
        return "sleeper-0" if self.processes else None

    @property
    def up(self) -> bool:
        return bool(self.processes) and self.processes[0].alive

    def env(self) -> dict[str, str]:
        return {"SLEEPER_DISPLAY": "sleeper-0"} if self.processes else {}

    def start(self, host: StageHost) -> None:
        self.log.append("start display")
        proc = host.spawn(self, "sleeper", ["sleep", "60"], host.launch_environment())
        host.poll("the sleeper to start", lambda: _started(proc), proc, lambda: "not started")

    def end_startup(self) -> None:
        self.log.append("end start-up")

    def stop(self, grace: float) -> None:
        self.log.append("stop display")
        super().stop(grace)


class ShellApp(AppStage):
    """An app that runs ``script`` in sh and is ready once it prints ``ready``."""

    def __init__(self, log: list[str], script: str) -> None:
        super().__init__()
        self.log = log
        self.script = script

    @property
    def process(self) -> ManagedProcess | None:
        return self.processes[0] if self.processes else None

    @property
    def up(self) -> bool:
        return self.process is not None and self.process.alive

    def start(self, host: StageHost) -> None:
        self.log.append("start app")
        proc = host.spawn(self, "app", ["sh", "-c", self.script], host.launch_environment())
        host.poll(
            "the app to say ready",
            lambda: True if any("ready" in line for line in proc.tail(5, "stdout")) else None,
            proc,
            lambda: "no ready line",
            died_code=ErrorCode.APP_NOT_RUNNING,
        )

    def stop(self, grace: float) -> None:
        self.log.append("stop app")
        super().stop(grace)


def sleeper_rig(log: list[str], app_script: str, startup_timeout: float = 10) -> tuple[Rig, list[Stage]]:
    stages = RigStages(
        display=SleeperDisplay(log), wm=None, a11y=SessionA11yStage(a11y=False), app=ShellApp(log, app_script)
    )
    options = RigOptions(wm=None, a11y=False, app=["sh"], startup_timeout=startup_timeout)
    return Rig(options, stages), stages.ordered


def test_a_backends_own_stages_start_in_order_and_stop_in_reverse() -> None:
    log: list[str] = []
    rig, stages = sleeper_rig(log, 'echo "$SLEEPER_DISPLAY" ready; exec sleep 60')
    with rig:
        status = rig.status()
        assert status.ready and status.display == "sleeper-0" and status.app_up
        assert list(status.pids) == ["sleeper", "dbus", "app"]
        app = rig.app_process
        assert app is not None and app.tail(5, "stdout") == ["sleeper-0 ready"]
        assert rig.env["SLEEPER_DISPLAY"] == "sleeper-0" and "DBUS_SESSION_BUS_ADDRESS" in rig.env
    assert log == ["start display", "start app", "end start-up", "stop app", "stop display"]
    assert not any(proc.alive for stage in stages for proc in stage.processes)


def test_a_failing_stage_tears_down_the_stages_before_it() -> None:
    log: list[str] = []
    rig, stages = sleeper_rig(log, "echo 'no config' >&2; exit 3")
    with pytest.raises(RigStartupError) as raised:
        rig.start()
    error = raised.value
    assert error.code is ErrorCode.APP_NOT_RUNNING
    assert error.details["stage"] == "app" and error.details["exit_status"] == 3
    assert "app exited with status 3 during start-up" in error.message and "no config" in error.message
    assert log == ["start display", "start app", "end start-up", "stop app", "stop display"]
    assert not any(proc.alive for stage in stages for proc in stage.processes)


def test_a_stage_that_never_gets_ready_says_what_it_waited_for_and_what_it_saw() -> None:
    log: list[str] = []
    rig, _ = sleeper_rig(log, "exec sleep 60", startup_timeout=0.5)
    with pytest.raises(RigStartupError) as raised:
        rig.start()
    error = raised.value
    assert error.code is ErrorCode.INTERNAL_ERROR and error.details["stage"] == "app"
    assert (
        error.message == "app: gave up waiting for the app to say ready after 0.5 s; observed: no ready line"
    )
    assert error.details["observed"] == "no ready line"


def test_a_waiter_learns_when_the_desktop_is_up_before_the_app(tmp_path: Path) -> None:
    """What needs only the desktop (the server) starts while the app is still starting."""
    go = tmp_path / "go"
    rig, stages = sleeper_rig([], f"while [ ! -e {go} ]; do sleep 0.02; done; echo ready; exec sleep 60")
    starter = threading.Thread(target=rig.start)
    starter.start()
    try:
        assert rig.wait_desktop(timeout=10)
        status = rig.status()
        assert status.display_up and not status.app_up
        go.touch()
        assert rig.wait_started(stages[-1], timeout=10)
        starter.join()
        assert rig.status().ready
    finally:
        go.touch()
        starter.join()
        rig.stop()


def test_a_waiter_on_a_stage_that_fails_learns_it_did_not_start() -> None:
    rig, stages = sleeper_rig([], "exit 3")
    with pytest.raises(RigStartupError):
        rig.start()
    assert rig.wait_desktop(timeout=0)  # it was up, before the app failed
    assert not rig.wait_started(stages[-1], timeout=10)


class WokenDisplay(SleeperDisplay):
    """A display whose probe is ready on its third look, and waits on ``wake`` between looks."""

    def __init__(self) -> None:
        super().__init__([])
        self.looks = 0
        self.waits: list[float] = []

    def start(self, host: StageHost) -> None:
        proc = host.spawn(self, "sleeper", ["sleep", "60"], host.launch_environment())

        def look() -> bool | None:
            self.looks += 1
            return True if self.looks == 3 else None

        host.poll("the third look", look, proc, lambda: "too few looks", wake=self.waits.append)


def test_a_probe_waits_on_its_stages_wake_between_looks() -> None:
    """Event-driven probes (the X root window's events, a pipe) instead of a fixed interval."""
    display = WokenDisplay()
    stages = RigStages(display=display, wm=None, a11y=SessionA11yStage(a11y=False), app=None)
    with Rig(RigOptions(wm=None, a11y=False, startup_timeout=10), stages):
        assert display.waits == [POLL_INTERVAL, POLL_INTERVAL]


class SettledLater(Stage):
    """A window-manager-like stage (:attr:`Stage.overlaps_next`): ``start`` starts ``argv``,
    ``settle`` waits for the file ``go``, which only the next stage makes."""

    overlaps_next = True

    def __init__(self, log: list[str], argv: list[str], go: Path) -> None:
        super().__init__()
        self.log = log
        self.argv = argv
        self.go = go
        self.settled = False

    @property
    def up(self) -> bool:
        return self.settled and self.processes[0].alive

    def start(self, host: StageHost) -> None:
        self.log.append("start wm")
        host.spawn(self, "wm", self.argv, host.launch_environment())

    def settle(self, host: StageHost) -> None:
        host.poll("go", lambda: True if self.go.exists() else None, self.processes[0], lambda: "no go")
        self.settled = True
        self.log.append("wm settled")


class GoBuses(A11yStage):
    """Buses that make the file ``go`` when they start, and are up from then on."""

    def __init__(self, log: list[str], go: Path) -> None:
        super().__init__()
        self.log = log
        self.go = go

    @property
    def a11y_bus(self) -> str | None:
        return None

    @property
    def up(self) -> bool:
        return self.go.exists()

    def start(self, host: StageHost) -> None:
        self.log.append("start buses")
        self.go.touch()


def overlapping_rig(log: list[str], wm_argv: list[str], go: Path, wm_go: Path | None = None) -> Rig:
    """The window manager runs ``wm_argv`` and settles once ``wm_go`` (default: ``go``) exists;
    the buses make ``go``."""
    stages = RigStages(
        display=SleeperDisplay(log),
        wm=SettledLater(log, wm_argv, wm_go or go),
        a11y=GoBuses(log, go),
        app=ShellApp(log, "echo ready; exec sleep 60"),
    )
    return Rig(RigOptions(a11y=False, app=["sh"], startup_timeout=10), stages)


def test_a_stage_that_overlaps_the_next_is_settled_after_it_starts_and_before_the_app(tmp_path: Path) -> None:
    """The window manager starts up while the buses do; the app starts once both are up."""
    log: list[str] = []
    with overlapping_rig(log, ["sleep", "60"], tmp_path / "go") as rig:
        status = rig.status()
        assert status.ready and status.wm_up
    assert log[:5] == ["start display", "start wm", "start buses", "wm settled", "start app"]


def test_an_overlapping_stage_that_dies_before_it_settles_fails_the_start_up(tmp_path: Path) -> None:
    log: list[str] = []
    wm = ["sh", "-c", "echo 'no display' >&2; exit 4"]
    rig = overlapping_rig(log, wm, tmp_path / "go", wm_go=tmp_path / "never")
    with pytest.raises(RigStartupError) as raised:
        rig.start()
    assert raised.value.details["stage"] == "wm" and "no display" in raised.value.message
    assert "start app" not in log and log[-1] == "stop display"
    assert not any(proc.alive for proc in rig.processes)
