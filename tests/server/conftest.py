from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.polling import poll
from tests.rigprocs import open_dir
from tests.server.rigproc import (
    FormRig,
    RigProcess,
    color_app,
    move_sway_tiles_off_the_origin,
    read_events,
    start_form,
)
from tests.toolkits import Toolkit

GREEN = "#20c040"
RED = "#e02020"


class GreenRig:
    """A rig whose app is a GTK window painted GREEN, and a place to start more apps."""

    def __init__(self, rig: RigProcess, log: Path, tmp: Path, audit: Path) -> None:
        self.rig = rig
        self.log = log
        self.tmp = tmp
        self.audit = audit
        self.extra_apps: list[subprocess.Popen[bytes]] = []

    def app_geometry(self, log: Path | None = None) -> dict[str, int]:
        events = poll("app ready", lambda: read_events(log or self.log))
        return events[-1]

    def launch(self, argv: list[str], log: Path) -> dict[str, int]:
        """Start another app in the rig and wait until it says it is painted."""
        proc = subprocess.Popen(
            argv, env=self.rig.app_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.extra_apps.append(proc)
        poll(f"{argv[-1]} ready", lambda: read_events(log, "ready"))
        return read_events(log)[-1]

    def close_extra_apps(self) -> None:
        for proc in self.extra_apps:
            proc.terminate()
            proc.wait(timeout=10)
        self.extra_apps.clear()


@pytest.fixture(scope="module")
def green_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GreenRig]:
    tmp = tmp_path_factory.mktemp("green-rig")
    log = tmp / "green.log"
    saves = tmp / "home" / "deskrig"
    saves.mkdir(parents=True)
    audit = tmp / "audit.jsonl"
    rig = RigProcess(
        app=color_app("Fixture Green", GREEN, log, size="300x200", pos="100,120"),
        extra=["--audit-log", str(audit), "--blocked-window", "^Secret .*"],
    ).start(tmp)
    green = GreenRig(rig, log, tmp, audit)
    green.app_geometry()
    yield green
    green.close_extra_apps()
    rig.stop()


@pytest.fixture(scope="module")
def toolkit_form(toolkit: Toolkit, backend: str) -> Iterator[FormRig]:
    """A rig on ``backend`` running ``toolkit``'s form fixture (tests/apps/<toolkit>_form.py)."""
    with open_dir(f"deskrig-{backend}-{toolkit.name}-form-") as tmp:
        form = start_form(
            tmp,
            f"{toolkit.name}_form",
            toolkit.title,
            python=toolkit.python,
            extra=["--backend", backend],
            window_relative=backend == "sway" and toolkit.native_wayland,
        )
        if backend == "sway":
            move_sway_tiles_off_the_origin(form)
        yield form
        form.rig.stop()
