"""The stage interface: one part of a rig's desktop, started in order by the supervisor.

A backend is a set of stages, one per role: the display, an optional window manager, the
accessibility buses and an optional app (:class:`RigStages`). Each stage starts its programs
through a :class:`StageHost` (which logs them, kills them with the supervisor and tells the rig
when a watched one exits), returns only once its own readiness probe passes, says through
:attr:`Stage.up` whether it is still up, contributes the variables that put a program into the
rig (:meth:`Stage.env`) and tears itself down (:meth:`Stage.stop`). The X11 stages are in
:mod:`deskrig.rig.x11`; sway's in :mod:`deskrig.rig.sway` bring their own display (a headless
compositor, which is also the window manager) and app stages and reuse :mod:`deskrig.rig.a11y`.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from deskrig.errors import ErrorCode
from deskrig.procs import KILL_SIGNAL, Account, ManagedProcess
from deskrig.rig.options import RigOptions, RigStartupError

T = TypeVar("T")


@dataclass(frozen=True)
class ExitWatch:
    """Tell the rig's ``role`` watchers (see :meth:`deskrig.rig.Rig.on_app_exit`) when a process
    exits on its own, and log ``message % (pid, status)`` at ``level``."""

    role: str
    message: str
    level: int = logging.INFO


class StageHost(Protocol):
    """What the supervisor offers a starting stage."""

    @property
    def runtime_dir(self) -> Path:
        """The rig's private 0700 ``XDG_RUNTIME_DIR``: sockets and cookies go here."""

    @property
    def startup_timeout(self) -> float:
        """Seconds each readiness probe may take."""

    @property
    def account(self) -> Account | None:
        """The user the rig's programs run as; None: the supervisor's own."""

    def spawn(
        self,
        stage: Stage,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        cwd: str | None = None,
        pass_fds: Sequence[int] = (),
        death_signal: int = KILL_SIGNAL,
        watch: ExitWatch | None = None,
    ) -> ManagedProcess:
        """Start a program of ``stage`` (added to ``stage.processes``), logging to ``{name}.log``."""

    def poll(
        self,
        what: str,
        check: Callable[[], T | None],
        proc: ManagedProcess,
        observe: Callable[[], str],
        code: ErrorCode = ErrorCode.INTERNAL_ERROR,
        died_code: ErrorCode = ErrorCode.INTERNAL_ERROR,
        wake: Callable[[float], object] | None = None,
    ) -> T:
        """Call ``check`` until it returns a value; fail if ``proc`` dies or the deadline passes.
        ``wake(seconds)`` returns once what ``check`` reads may have changed (an event on a
        socket or pipe), or after at most ``seconds``; without it the checks are some 50 ms apart."""

    def failure(
        self, proc: ManagedProcess, message: str, code: ErrorCode = ErrorCode.INTERNAL_ERROR, **extra: Any
    ) -> RigStartupError:
        """A start-up error that quotes the process's last stderr lines."""

    def note(self, component: str, message: str) -> None:
        """Record a fallback taken (shown in the rig's diagnostics)."""

    def launch_environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A full environment for a program in the rig (see :meth:`deskrig.rig.Rig.launch_environment`)."""


class Stage(ABC):
    """One part of the rig: started after the stages before it, stopped before them."""

    #: Whether :meth:`start` only starts the programs and :meth:`settle` waits for them to be
    #: ready: the supervisor then starts the next stage meanwhile, and settles this one before
    #: it counts either as up (so before any stage after those two starts).
    overlaps_next = False

    def __init__(self) -> None:
        #: What this stage started, in order (the host appends under its lock).
        self.processes: list[ManagedProcess] = []

    @abstractmethod
    def start(self, host: StageHost) -> None:
        """Start this stage's programs and return once they are ready (with :attr:`overlaps_next`:
        once they are started); raise :class:`RigStartupError` if they cannot be (the supervisor
        then stops every stage)."""

    def settle(self, host: StageHost) -> None:  # noqa: B027 - a hook: most stages are ready when started
        """Return once the programs :meth:`start` started are ready (see :attr:`overlaps_next`);
        raise :class:`RigStartupError` if they cannot be."""

    @property
    @abstractmethod
    def up(self) -> bool:
        """Whether this stage is up now: cheap (no round trip to a server) and thread-safe."""

    def env(self) -> dict[str, str]:
        """The variables that put a program into this stage's part of the rig."""
        return {}

    def end_startup(self) -> None:  # noqa: B027 - a hook: most stages hold nothing for start-up only
        """Release what only start-up needed (called once every stage started, or one failed)."""

    def stop(self, grace: float) -> None:
        """End this stage's programs in reverse start order (TERM, then KILL after ``grace``)."""
        for proc in reversed(self.processes):
            proc.stop(grace)


class DisplayStage(Stage):
    """The display server: the first stage, without which nothing else runs."""

    @property
    @abstractmethod
    def display(self) -> str | None:
        """The display's name (``":N"`` for X11) once it is up."""


class A11yStage(Stage):
    """The session bus and the accessibility bus on it."""

    @property
    @abstractmethod
    def a11y_bus(self) -> str | None:
        """The accessibility bus's address once it answers; None while it does not."""


class AppStage(Stage):
    """The app under test. Its process is watched with the role ``"app"``."""

    @property
    @abstractmethod
    def process(self) -> ManagedProcess | None:
        """The app's process, once started."""

    def spawn_app(self, host: StageHost, options: RigOptions) -> ManagedProcess:
        """Start ``options.app`` in the rig, watched as ``"app"``; a command that cannot be
        started (no such program, a bad working directory) is an INVALID_ARGUMENT."""
        argv = options.app
        try:
            return host.spawn(
                self,
                "app",
                argv,
                host.launch_environment(options.app_env),
                cwd=options.app_cwd,
                watch=ExitWatch("app", "the app (pid %d) exited with status %d"),
            )
        except OSError as exc:
            raise RigStartupError(
                f"cannot start the app {argv[0]!r}: {exc.strerror}",
                stage="app",
                code=ErrorCode.INVALID_ARGUMENT,
                details={"argv": argv},
                remediation="Check the app's command line and working directory.",
            ) from exc


class WindowedAppStage(AppStage):
    """An app that is up while it runs and has shown a window: a backend's :meth:`start` calls
    :meth:`spawn_app`, then waits for the window and sets ``_window``."""

    def __init__(self, options: RigOptions) -> None:
        super().__init__()
        self._options = options
        self._app: ManagedProcess | None = None
        self._window: int | None = None

    @property
    def process(self) -> ManagedProcess | None:
        return self._app

    @property
    def up(self) -> bool:
        return self._app is not None and self._app.alive and self._window is not None


@dataclass(frozen=True)
class RigStages:
    """A backend's stages by role; :attr:`ordered` is their start order.

    ``wm`` may be the display stage itself (a compositor manages its windows); ``wm_name`` names
    the window manager. With an ``account``, the rig's programs run as that user."""

    display: DisplayStage
    wm: Stage | None
    a11y: A11yStage
    app: AppStage | None
    wm_name: str | None = None
    account: Account | None = None

    @property
    def ordered(self) -> list[Stage]:
        stages: list[Stage] = []
        for stage in (self.display, self.wm, self.a11y, self.app):
            if stage is not None and not any(stage is seen for seen in stages):
                stages.append(stage)
        return stages
