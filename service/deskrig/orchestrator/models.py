"""The orchestrator's data at its boundaries: what a session asks for, what it is, and the settings.

All pydantic, shared by the Python API, the HTTP API (request and response bodies) and the CLI.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, field_validator

from deskrig.cpus import usable_cpus
from deskrig.errors import ErrorInfo
from deskrig.orchestrator.images import check_registry

# Where an orchestrator runs its rigs (``runtimes.RUNTIMES`` maps each name to its implementation):
# containers on this machine's Docker engine, services of a Docker Swarm, Pods of a Kubernetes
# cluster. Named in their own module, which the CLI's parser reads without these models.
from deskrig.orchestrator.runtime_names import DEFAULT_RUNTIME as DEFAULT_RUNTIME
from deskrig.orchestrator.runtime_names import RuntimeName as RuntimeName

#: The rig image built by scripts/build-images: a bare desktop (the app comes from --app).
DEFAULT_IMAGE = "deskrig/rig:latest"
#: The rig's HTTP port inside the container (the image's DESKRIG_PORT).
RIG_PORT = 8765
#: The recording directory inside the container; a tmpfs, emptied by the mirror over the feed.
RIG_RECORD_DIR = "/artifacts"
#: The rig image's user (images/rig/Dockerfile): its runtime dir and home are scratch dirs it owns.
RIG_UID = 1000


@dataclass(frozen=True)
class ScratchDir:
    """A writable directory on the rig's read-only root: a tmpfs under Docker, a memory-backed
    emptyDir under Kubernetes."""

    path: str
    size: str  # Docker syntax: 256m, 1g
    mode: str
    owned: bool  # by the rig's user (else root's, world-writable)


def rig_scratch_dirs(record_size: str) -> tuple[ScratchDir, ...]:
    """Every scratch dir of a rig; ``record_size`` bounds the recording's (``tmpfs_size``)."""
    return (
        ScratchDir("/tmp", "256m", "1777", owned=False),
        ScratchDir(f"/run/user/{RIG_UID}", "64m", "0700", owned=True),
        ScratchDir("/home/rig", "256m", "0755", owned=True),
        ScratchDir(RIG_RECORD_DIR, record_size, "0755", owned=True),
    )


#: The desktops a rig image runs (its DESKRIG_BACKEND): Xvfb + openbox, or headless sway + Xwayland.
RigBackend = Literal["x11", "sway"]
_SIZE = re.compile(r"^[1-9][0-9]{1,4}x[1-9][0-9]{1,4}$")
_MIB = 1024 * 1024
#: Per-rig budget behind the default capacity: an idle rig with a GTK app takes ~150 MB and a
#: sliver of CPU; eight of them share a core without missing a 1 s answer.
_RIG_MEMORY_BUDGET = 512 * _MIB
_RIGS_PER_CPU = 8


def iso_utc(timestamp: float) -> str:
    """Epoch seconds as ISO-8601 UTC with a ``Z``, to the millisecond: ``2026-11-30T18:18:09.870Z``."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _epoch_seconds(value: object) -> object:
    """ISO-8601 text as epoch seconds; anything else is left to the float validator (numbers are
    what session.json and orchestrator.json held before they were written in ISO-8601)."""
    if not isinstance(value, str):
        return value
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


#: A moment: epoch seconds in Python, ISO-8601 UTC (``...Z``) in JSON.
Timestamp = Annotated[float, BeforeValidator(_epoch_seconds), PlainSerializer(iso_utc, when_used="json")]


def default_max_sessions() -> int:
    """How many rigs this machine runs at once by default: bounded by CPUs and by memory."""
    cpus = usable_cpus()
    memory = 4096 * _MIB  # where the memory size cannot be read (Windows has no sysconf)
    if sys.platform != "win32":
        with contextlib.suppress(ValueError, OSError):
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(cpus * _RIGS_PER_CPU, memory // _RIG_MEMORY_BUDGET))


def default_max_starting() -> int:
    """Rigs booting at once: a boot is CPU-bound (Python, X, the app), so a burst waits its turn."""
    return max(2, 2 * (os.cpu_count() or 1))


def default_artifacts_root() -> Path:
    """``$DESKRIG_ARTIFACTS_ROOT``, else ``$XDG_DATA_HOME/deskrig/sessions``."""
    if os.environ.get("DESKRIG_ARTIFACTS_ROOT"):
        return Path(os.environ["DESKRIG_ARTIFACTS_ROOT"])
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "deskrig" / "sessions"


def default_state_dir() -> Path:
    """User-local state: the service's address file, its log and the orchestrators' leases.

    ``$DESKRIG_STATE_DIR``, else ``$XDG_RUNTIME_DIR/deskrig``, else ``~/.local/state/deskrig``.
    """
    if os.environ.get("DESKRIG_STATE_DIR"):
        return Path(os.environ["DESKRIG_STATE_DIR"])
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR")
    if runtime_dir and Path(runtime_dir).is_dir():
        return Path(runtime_dir) / "deskrig"
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "deskrig"


class SessionState(StrEnum):
    QUEUED = "queued"  # waiting for a free slot (FIFO)
    STARTING = "starting"  # container created, waiting for /readyz
    READY = "ready"  # the rig answers MCP; turns stream to the host
    STOPPING = "stopping"  # finalizing the video, copying logs, removing the container
    STOPPED = "stopped"  # ended normally (request, idle timeout, max duration)
    FAILED = "failed"  # ended by an error: queue timeout, start-up failure, crashed rig

    @property
    def ended(self) -> bool:
        return self in (SessionState.STOPPED, SessionState.FAILED)


class SessionSpec(BaseModel):
    """What a session asks for. Unset timeouts take the orchestrator's defaults; 0 turns one off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str = DEFAULT_IMAGE
    app: str | None = Field(default=None, description="app command line; replaces the image's CMD")
    size: str | None = Field(default=None, description="screen size WxH (default: the image's)")
    backend: RigBackend | None = Field(
        default=None, description="the rig's desktop: x11 or sway (default: the image's, x11 for deskrig's)"
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra environment for the rig")
    record: bool = Field(default=True, description="record every action as a turn folder, from boot")
    video: bool = Field(default=False, description="also record an mp4 of the whole session")
    name: str | None = Field(default=None, description="a human label, e.g. the test that asked for the rig")
    artifacts_dir: str | None = Field(
        None, description="host directory for this session (default: <artifacts_root>/<session id>)"
    )
    ready_timeout: float | None = Field(default=None, ge=0)
    queue_timeout: float | None = Field(default=None, ge=0)
    idle_timeout: float | None = Field(default=None, ge=0)
    max_duration: float | None = Field(default=None, ge=0)

    @field_validator("size")
    @classmethod
    def _size_shape(cls, size: str | None) -> str | None:
        if size is not None and not _SIZE.match(size):
            raise ValueError(f"want WxH such as 1280x800, got {size!r}")
        return size

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        reserved = {"DESKRIG_TOKEN", "DESKRIG_PORT", "DESKRIG_RECORD", "DESKRIG_RECORD_VIDEO"}
        clash = sorted(reserved & env.keys())
        if clash:
            raise ValueError(f"{', '.join(clash)} are set by the orchestrator; use the session options")
        return env


class MirrorReport(BaseModel):
    """How the live copy of a session's recording is doing."""

    turns: int = 0
    last_seq: int = 0
    reconnects: int = 0
    video: str | None = None
    gaps: list[tuple[int, int]] = Field(default_factory=list, description="(expected seq, received seq)")
    errors: list[str] = Field(default_factory=list)


class SessionInfo(BaseModel):
    """A session as the API and the CLI show it."""

    id: str
    state: SessionState
    spec: SessionSpec
    created_at: Timestamp
    ready_at: Timestamp | None = None
    ended_at: Timestamp | None = None
    expires_at: Timestamp | None = None
    queue_position: int | None = Field(default=None, description="1 = next in line, while queued")
    phase: str | None = Field(default=None, description="what a starting or stopping session is doing")
    mcp_url: str | None = None
    token: str | None = Field(default=None, repr=False)
    artifacts_dir: str
    container: str | None = None
    mirror: MirrorReport = Field(default_factory=MirrorReport)
    reason: str | None = Field(default=None, description="why it stopped or failed")
    error: ErrorInfo | None = None

    @property
    def turns(self) -> int:
        return self.mirror.turns


class OrchestratorConfig(BaseModel):
    """Settings of one orchestrator, frozen once built (from flags, the service's options, the plugin)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runtime: RuntimeName = Field(default=DEFAULT_RUNTIME, description="where rigs run")
    artifacts_root: Path = Field(default_factory=default_artifacts_root)
    state_dir: Path = Field(default_factory=default_state_dir)
    bind_address: str = Field(default="127.0.0.1", description="host address rigs' ports are published on")
    allowed_hosts: list[str] = Field(
        default_factory=list, description="extra Host names clients use to reach rigs (non-loopback binds)"
    )
    max_sessions: int = Field(
        default_factory=default_max_sessions,
        ge=1,
        description="rigs at once per node: this machine's for docker, each active node's on a cluster",
    )
    max_starting: int = Field(default_factory=default_max_starting, ge=1)
    queue_timeout: float = Field(default=300.0, ge=0, description="0: fail at once when all slots are busy")
    ready_timeout: float = Field(default=60.0, gt=0)
    idle_timeout: float = Field(default=900.0, ge=0, description="0: no idle timeout")
    max_duration: float = Field(default=4 * 3600.0, ge=0, description="0: no limit")
    reap_interval: float = Field(default=30.0, gt=0)
    adopt_rigs: bool = Field(
        default=False,
        description="re-adopt a dead predecessor's rigs that still serve (the service does: its clients "
        "hold their URLs); otherwise they are removed and their sessions marked failed",
    )
    #: How often a running session checks its container, its idle time and its deadline.
    watch_interval: float = Field(default=1.0, gt=0)
    #: Finalizing the video and draining the feed on stop.
    stop_timeout: float = Field(default=20.0, gt=0)
    registry: str | None = Field(
        default=None,
        description="HOST:PORT rigs' images are pulled from (deskrig/rig:latest -> HOST:PORT/deskrig/rig:latest)",
    )
    # Container limits (Docker syntax).
    mem_limit: str = "2g"
    pids_limit: int = Field(default=1024, ge=64)
    tmpfs_size: str = Field(default="1g", description="size of the in-container /artifacts tmpfs")
    # What a cluster's scheduler places a rig by (swarm; the docker runtime uses the limits above).
    mem_reservation: str = Field(default="256m", description="memory a node must have free for a rig")
    cpu_reservation: float = Field(default=0.1, ge=0, description="CPUs a node must have free for a rig")
    cpu_limit: float = Field(default=0, ge=0, description="CPUs a rig may use at most (0: no limit)")
    placement_constraints: list[str] = Field(
        default_factory=list, description="swarm placement constraints, e.g. node.labels.gui==yes"
    )
    placement_preferences: list[str] = Field(
        default_factory=list, description="swarm placement preferences, e.g. spread=node.labels.zone"
    )

    @field_validator("placement_preferences")
    @classmethod
    def _spread_only(cls, preferences: list[str]) -> list[str]:
        for preference in preferences:
            strategy, _, label = preference.partition("=")
            if strategy != "spread" or not label:
                raise ValueError(f"want spread=LABEL (swarm's one strategy), got {preference!r}")
        return preferences

    @field_validator("registry")
    @classmethod
    def _registry_shape(cls, registry: str | None) -> str | None:
        return None if not registry else check_registry(registry)
