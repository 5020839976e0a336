"""The runtime interface: what the session core needs from a place that runs rigs.

Docker (``docker_backend``: containers on one engine) and Docker Swarm (``swarm_backend``: one
service per rig, on any node) implement it; ``runtimes`` picks one by name. The core never sees a
container, a service or a port, only :class:`RigHandle` and its endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from deskrig.orchestrator.models import MirrorReport

#: Labels on every resource an orchestrator creates; the reaper trusts these, not memory.
LABEL_MANAGED = "io.deskrig.managed"
LABEL_ORCHESTRATOR = "io.deskrig.orchestrator"
LABEL_SESSION = "io.deskrig.session"
LABEL_EXPIRES = "io.deskrig.expires"  # epoch seconds; "0" = no deadline
LABEL_HOST = "io.deskrig.host"  # where the owning orchestrator runs
LABEL_LEASE = "io.deskrig.lease"  # the owner's lease file on that host (see reaper.Lease)


def rig_labels(
    *, orchestrator_id: str, session_id: str, expires_at: float | None, host: str, lease: Path
) -> dict[str, str]:
    """Every label of a session's rig: whose it is, until when, and where its owner's lease is."""
    return {
        LABEL_MANAGED: "1",
        LABEL_ORCHESTRATOR: orchestrator_id,
        LABEL_SESSION: session_id,
        LABEL_EXPIRES: str(int(expires_at or 0)),
        LABEL_HOST: host,
        LABEL_LEASE: str(lease),
    }


def managed_labels(session_id: str | None = None) -> dict[str, str]:
    """The label filter for every rig an orchestrator created (of one session, when given)."""
    return {LABEL_MANAGED: "1", **({LABEL_SESSION: session_id} if session_id is not None else {})}


@dataclass(frozen=True)
class RigRequest:
    """One rig to create: image, command, environment and the labels that tie it to its session."""

    session_id: str
    image: str
    command: list[str] | None
    env: dict[str, str]
    labels: dict[str, str]


@dataclass(frozen=True)
class RigHandle:
    """A created rig: how to reach its HTTP face, and its labels."""

    id: str
    name: str
    endpoint: str  # http://host:port, the rig's /mcp, /readyz, /status and /recording/* live under it
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def session_id(self) -> str:
        return self.labels.get(LABEL_SESSION, "")


@dataclass(frozen=True)
class ContainerState:
    """The runtime's view of a rig's container (or process): whether it still runs and, when not,
    how it ended. Not the rig's own ``deskrig.rig.RigStatus`` (display, window manager, app)."""

    running: bool
    detail: str  # "running", "exited with code 137", "killed by the OOM killer", "gone"
    exit_code: int | None = None


class ArtifactStream(Protocol):
    """A rig's recording feed copied into a host folder, as the session core drives it
    (``mirror.ArtifactMirror`` is the one that follows the rig's HTTP feed)."""

    report: MirrorReport

    async def run(self) -> None:
        """Follow the feed until :meth:`close`, reconnecting as needed."""
        ...

    def resume(self) -> None:
        """Carry on after the turns already in the folder (a re-adopted rig's)."""
        ...

    def close(self) -> None: ...

    async def settle(self, *, quiet: float, timeout: float, want_video: bool) -> bool:
        """Whether the feed went quiet (and the video arrived, if wanted) within ``timeout``."""
        ...


class Runtime(Protocol):
    """Where rigs run. Every method may raise DeskrigError(RUNTIME_UNAVAILABLE or RIG_FAILED)."""

    name: str

    async def capacity(self, per_node: int) -> int:
        """How many rigs may run at once, ``per_node`` on each node that takes rigs now."""
        ...

    async def create(self, request: RigRequest) -> RigHandle:
        """Create and start one rig (pulling its image if needed); return once it runs."""
        ...

    async def wait_ready(self, handle: RigHandle, timeout: float) -> None:
        """Return once the rig answers /readyz; raise RIG_FAILED with what was seen and its logs."""
        ...

    def stream_artifacts(self, handle: RigHandle, token: str, dest: Path) -> ArtifactStream:
        """A mirror of the rig's recording feed into ``dest`` (not started: the caller runs it)."""
        ...

    async def status(self, handle: RigHandle) -> ContainerState: ...

    async def logs(self, handle: RigHandle, tail: int | None = None) -> str:
        """The rig's stdout and stderr ("" once it is gone)."""
        ...

    async def destroy(self, handle: RigHandle) -> None:
        """Remove the rig and everything it holds; a rig that is already gone is not an error."""
        ...

    async def list_by_label(self, labels: dict[str, str]) -> list[RigHandle]:
        """Every rig, running or not, carrying all of ``labels``."""
        ...

    async def close(self) -> None: ...
