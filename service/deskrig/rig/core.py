"""The rig: a supervisor over one backend's stages, with the rig's status and its app."""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.procs import ManagedProcess
from deskrig.rig.options import RigOptions, RigStatus, parse_size
from deskrig.rig.stages import RigStages
from deskrig.rig.supervisor import Supervisor

log = logging.getLogger(__name__)


def backend_stages(options: RigOptions) -> RigStages:
    """The stages of ``options.backend``; only that backend's module is imported."""
    if options.backend == "sway":
        from deskrig.rig.sway import sway_stages

        return sway_stages(options)
    from deskrig.rig.x11 import x11_stages

    return x11_stages(options)


class Rig(Supervisor):
    """One virtual desktop with its window manager, buses and app (see :mod:`deskrig.rig`).

    ``stages`` default to those of ``options.backend`` (:func:`deskrig.rig.x11.x11_stages`,
    :func:`deskrig.rig.sway.sway_stages`)."""

    def __init__(self, options: RigOptions, stages: RigStages | None = None) -> None:
        parse_size(options.size)  # a bad size fails here, before anything starts
        if stages is None:
            stages = backend_stages(options)
        super().__init__(
            stages.ordered,
            startup_timeout=options.startup_timeout,
            run_dir=options.run_dir,
            account=stages.account,
        )
        self.options = options
        self._roles = stages

    def start(self) -> None:
        """Start everything and wait until it is ready; on failure tear it down and raise."""
        super().start()
        log.info("rig ready on %s: %s", self._roles.display.display, self.status().model_dump_json())

    def wait_desktop(self, timeout: float | None = None) -> bool:
        """Block until every stage but the app is up: the display, the window manager and the
        buses (True), or until start-up ended without them or ``timeout`` passed (False)."""
        return self.wait_started(
            [stage for stage in self._roles.ordered if stage is not self._roles.app][-1], timeout
        )

    def status(self) -> RigStatus:
        """A snapshot of what is up; cheap (no X or D-Bus round trip) and thread-safe."""
        display, wm, a11y, app = self._roles.display, self._roles.wm, self._roles.a11y, self._roles.app
        app_process = app.process if app is not None else None
        return RigStatus(
            backend=self.options.backend,
            display=display.display,
            display_up=display.up,
            wm=self._roles.wm_name,
            wm_up=wm is not None and wm.up,
            a11y_bus=a11y.a11y_bus,
            a11y_up=a11y.up,
            runs_app=app is not None,
            app_pid=app_process.pid if app_process is not None else None,
            app_up=app is not None and app.up,
            app_exit_status=app_process.exit_status if app_process is not None else None,
            diagnostics=[f"{d.component}: {d.message}" for d in self.diagnostics],
            pids={proc.name: proc.pid for proc in self.processes},
        )

    @property
    def display(self) -> str:
        """The display's name: ``":N"`` for X11, the Wayland socket's path for sway."""
        display = self._roles.display.display
        if display is None:
            raise DeskrigError(ErrorCode.DISPLAY_NOT_FOUND, "the rig's display is not up (call start())")
        return display

    @property
    def app_process(self) -> ManagedProcess | None:
        """The app's process: pid, output tail, log file."""
        return self._roles.app.process if self._roles.app is not None else None

    def wait_app_exit(self, timeout: float | None = None) -> int | None:
        """The app's exit status once it has exited, or None on timeout (or with no app)."""
        app = self.app_process
        return app.wait(timeout) if app is not None else None

    def on_app_exit(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(status)`` from a watcher thread when the app exits on its own (not when
        :meth:`stop` ends it). Called at once if that already happened."""
        self._on_exit("app", callback)

    def on_display_exit(self, callback: Callable[[int], None]) -> None:
        """Like :meth:`on_app_exit`, for the display server: the rig has no display any more."""
        self._on_exit("display", callback)

    def __enter__(self) -> Rig:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
