from __future__ import annotations

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
    """A rig whose app is a GTK window painted GREEN, and a place to start more apps.

    ``window_relative``: the app is a native Wayland client, which logs its geometry relative to
    its window; :meth:`app_geometry` adds the window's origin from ``list_windows``."""

    def __init__(
        self, rig: RigProcess, log: Path, tmp: Path, audit: Path, window_relative: bool = False
    ) -> None:
        self.rig = rig
        self.log = log
        self.tmp = tmp
        self.audit = audit
        self.window_relative = window_relative
        self.extra_apps: list[int] = []

    def app_geometry(self, log: Path | None = None) -> dict[str, int]:
        """What the app (or the one logging to ``log``) last said of its client area, in screen pixels."""
        geometry = dict(poll("app ready", lambda: read_events(log or self.log))[-1])
        if self.window_relative and log is None:
            result = self.rig.call("list_windows", {"pid": geometry["pid"]})
            (window,) = result.structured_content["windows"]
            geometry["x"] += window["bounds"]["x"]
            geometry["y"] += window["bounds"]["y"]
        return geometry

    def launch(self, argv: list[str], log: Path) -> dict[str, int]:
        """Start another app in the rig (as the rig starts apps) and wait until it says it is painted."""
        result = self.rig.call("launch_app", {"command": argv, "wait_for_window": False})
        assert not result.is_error, result.structured_content
        self.extra_apps.append(result.structured_content["pid"])
        poll(f"{argv[-1]} ready", lambda: read_events(log, "ready"))
        return read_events(log)[-1]

    def close_extra_apps(self) -> None:
        for pid in self.extra_apps:
            self.rig.call("kill_app", {"pid": pid})
        self.extra_apps.clear()


def start_green_rig(backend: str) -> Iterator[GreenRig]:
    """A :class:`GreenRig` on ``backend`` (on sway with its tile off the screen's origin)."""
    with open_dir(f"deskrig-{backend}-green-rig-") as tmp:
        log = tmp / "green.log"
        (tmp / "home" / "deskrig").mkdir(parents=True)
        audit = tmp / "audit.jsonl"
        rig = RigProcess(
            app=color_app("Fixture Green", GREEN, log, size="300x200", pos="100,120"),
            extra=["--backend", backend, "--audit-log", str(audit), "--blocked-window", "^Secret .*"],
        ).start(tmp)
        green = GreenRig(rig, log, tmp, audit, window_relative=backend == "sway")
        green.app_geometry()
        if backend == "sway":
            move_sway_tiles_off_the_origin(rig, log, "geometry")
        yield green
        green.close_extra_apps()
        rig.stop()


@pytest.fixture(scope="module")
def green_rig() -> Iterator[GreenRig]:
    """A :class:`GreenRig` on X11 (test_tools_http.py runs it on every backend)."""
    yield from start_green_rig("x11")


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
            move_sway_tiles_off_the_origin(form.rig, form.log, "layout")
        yield form
        form.rig.stop()
