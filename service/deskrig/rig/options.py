"""What a rig runs (:class:`RigOptions`), what is up in it (:class:`RigStatus`) and how its
start-up fails (:class:`RigStartupError`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from deskrig.errors import DeskrigError, ErrorCode

SIZE_LIMITS = (64, 8192)
#: The backends a rig can run: Xvfb with a window manager, or a headless sway.
RigBackend = Literal["x11", "sway"]


def parse_size(size: str) -> tuple[int, int]:
    """``"1280x800"`` -> ``(1280, 800)``; each side must lie in 64..8192."""
    match = re.fullmatch(r"(\d+)x(\d+)", size.strip())
    low, high = SIZE_LIMITS
    if match is None or not all(low <= int(side) <= high for side in match.groups()):
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"invalid screen size {size!r}: expected WIDTHxHEIGHT with each side in {low}..{high}",
            details={"argument": "size", "value": size, "min": low, "max": high},
        )
    return int(match[1]), int(match[2])


class RigOptions(BaseModel):
    """What to run in a rig."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: RigBackend = "x11"
    size: str = "1280x800"
    wm: str | None = Field("openbox", description="Window manager executable; None runs none")
    app: list[str] = Field(default_factory=list, description="The app's argv; empty for a bare desktop")
    app_env: dict[str, str] = Field(default_factory=dict)
    app_cwd: str | None = None
    a11y: bool = True
    startup_timeout: float = Field(30.0, gt=0, description="Seconds each start-up stage may take")
    run_dir: str | None = Field(None, description="Logs go here; default: a temp dir removed on stop")
    run_as: str | None = Field(
        None,
        description="sway only: the user its programs run as when the rig runs as root "
        "(sway refuses root); default: $SUDO_USER, else nobody",
    )


class RigStatus(BaseModel):
    """What is up in a rig right now (shown by /readyz)."""

    backend: RigBackend = "x11"
    display: str | None
    display_up: bool
    wm: str | None
    wm_up: bool
    a11y_bus: str | None
    a11y_up: bool
    runs_app: bool = Field(
        False, description="The rig runs an app: it is ready only once the app's window is mapped"
    )
    app_pid: int | None
    app_up: bool
    app_exit_status: int | None
    diagnostics: list[str]
    pids: dict[str, int] = Field(default_factory=dict, description="Process name -> pid, as started")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ready(self) -> bool:
        # By what the rig runs, not by app_pid: an app stage that has not spawned its app yet
        # has no pid, and its rig is not ready.
        return self.display_up and (self.wm is None or self.wm_up) and (not self.runs_app or self.app_up)


class RigStartupError(DeskrigError):
    """A rig could not start. ``details`` has ``stage`` and, when a process failed, its
    ``exit_status``, ``stderr_tail`` and ``log_file``; the message quotes the last stderr lines."""

    def __init__(
        self,
        message: str,
        *,
        stage: str,
        code: ErrorCode = ErrorCode.INTERNAL_ERROR,
        details: Mapping[str, Any] | None = None,
        remediation: str | None = None,
    ) -> None:
        super().__init__(code, message, details={"stage": stage, **(details or {})}, remediation=remediation)
