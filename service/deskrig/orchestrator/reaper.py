"""The reaper: removes rigs nobody will stop, judging by their labels, not by anyone's memory.

A rig is reaped when
- its expiry label has passed (plus a grace period, so its owner's own stop goes first);
- it belongs to this orchestrator but no live session of it claims it;
- it belongs to another orchestrator on this host whose lease is gone.

A runtime whose create makes an object before the rig itself (Kubernetes: the token Secret, then
the Pod that owns it; swarm: the token secret, then the service that mounts it) also lists what a
crash between the two leaves (:class:`Leftover`): judged as rigs are, and besides, whoever made
it, once older than :data:`LEFTOVER_GRACE` (else one made on another host whose maker never comes
back, and which carries no expiry, would stay forever).

The lease is an exclusive ``flock`` on ``<state_dir>/leases/<orchestrator id>.lock``, held for the
orchestrator's lifetime; every rig names its owner's lease file in a label. The kernel drops the
lock when the process dies, even by SIGKILL, so a restarted orchestrator (or any other on the
host, whatever its state directory) sees the dead one's rigs as orphans.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from deskrig.orchestrator.runtime import (
    LABEL_EXPIRES,
    LABEL_HOST,
    LABEL_LEASE,
    LABEL_ORCHESTRATOR,
    LABEL_SESSION,
    RigHandle,
    Runtime,
    managed_labels,
)

log = logging.getLogger("deskrig.orchestrator.reaper")

#: An expired rig's owner gets this long to stop it itself before the reaper does.
EXPIRY_GRACE = 60.0
#: How old a :class:`Leftover` must be before it goes whoever made it. A live orchestrator's
#: create holds one for a single API call (create the Pod, or the swarm service) before the rig
#: owns or mounts it, so this only needs to outlast a slow call (the API server gives up on a
#: request after 60 s, the Docker SDK's client too) plus the skew between the orchestrator's clock
#: and the server's, which stamps the creation time. Ten minutes covers both many times over;
#: keeping a dead create's token secret that long costs nothing, since no rig of it runs to accept
#: the token. A create that still lost its secret would fail cleanly (its pod cannot start without
#: it; the swarm refuses a service whose secret is gone) rather than leave anything.
LEFTOVER_GRACE = 600.0


def host_id() -> str:
    return socket.gethostname()


class Lease:
    """Proof that an orchestrator is alive, visible to other processes on this host."""

    def __init__(self, state_dir: Path, orchestrator_id: str) -> None:
        self.path = state_dir / "leases" / f"{orchestrator_id}.lock"
        self._fd: int | None = None

    @classmethod
    def at(cls, path: Path) -> Lease:
        """The lease whose file is ``path`` (as a rig's lease label names it)."""
        return cls(path.parent.parent, path.name.removesuffix(".lock"))

    def acquire(self) -> None:
        """Take the lease; BlockingIOError when a live orchestrator holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def try_acquire(self) -> bool:
        """Take the lease unless a live orchestrator holds it (a dead one's lock is free)."""
        try:
            self.acquire()
        except BlockingIOError:
            return False
        return True

    def release(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None

    @staticmethod
    def held(path: Path) -> bool:
        """Whether the orchestrator holding this lease still runs (a stale lease file is removed)."""
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        path.unlink(missing_ok=True)
        return False


@dataclass(frozen=True)
class Reaped:
    handle: RigHandle
    reason: str


@dataclass(frozen=True)
class Leftover:
    """What a rig's create made before the rig, without the rig: an orchestrator died between the
    two (or is between them now). ``what`` says what it is (``Secret deskrig-s1-token``);
    ``handle`` names the rig it was made for, with its labels, so that ``Runtime.destroy`` removes
    it; ``created_at``: epoch seconds, by the API server's clock."""

    what: str
    handle: RigHandle
    created_at: float


def created_epoch(timestamp: object) -> float:
    """A creation time as an API gives it (ISO 8601: Kubernetes' ``creationTimestamp``, the
    engine's ``CreatedAt``, to the nanosecond) in epoch seconds; now when there is none, so that
    an object of unknown age counts as new."""
    try:
        return datetime.fromisoformat(str(timestamp)).timestamp()
    except ValueError:
        return time.time()


@runtime_checkable
class LeavesLeftovers(Protocol):
    """A runtime whose create can leave a :class:`Leftover` (the others have nothing to list)."""

    async def list_leftovers(self, labels: dict[str, str]) -> list[Leftover]:
        """Every leftover carrying all of ``labels``."""
        ...


class Reaper:
    def __init__(
        self,
        runtime: Runtime,
        orchestrator_id: str,
        live_sessions: Callable[[], set[str]],
        *,
        leftover_grace: float = LEFTOVER_GRACE,
    ) -> None:
        self.runtime = runtime
        self.orchestrator_id = orchestrator_id
        self.live_sessions = live_sessions
        self.leftover_grace = leftover_grace
        self.host = host_id()
        #: Dead orchestrators whose rigs this one took over (their rigs still carry their id).
        self.adopted_owners: set[str] = set()

    def verdict(self, handle: RigHandle, now: float) -> str | None:
        """Why ``handle`` should go, or None to leave it."""
        labels = handle.labels
        owner = labels.get(LABEL_ORCHESTRATOR, "")
        try:
            expires = float(labels.get(LABEL_EXPIRES, "0"))
        except ValueError:
            expires = 0.0
        if expires and now > expires + EXPIRY_GRACE:
            return f"expired {now - expires:.0f} s ago"
        if owner == self.orchestrator_id or owner in self.adopted_owners:
            if labels.get(LABEL_SESSION) not in self.live_sessions():
                return "orphan: no live session of this orchestrator claims it"
            return None
        lease = labels.get(LABEL_LEASE)
        if labels.get(LABEL_HOST) == self.host and not (lease and Lease.held(Path(lease))):
            return f"orphan: its orchestrator {owner} is gone"
        return None

    def leftover_verdict(self, leftover: Leftover, now: float) -> str | None:
        """Why ``leftover`` should go, or None to leave it: for its age, or as its rig would."""
        age = now - leftover.created_at
        reason = (
            f"{age:.0f} s old, older than a create in flight can be"
            if age > self.leftover_grace
            else self.verdict(leftover.handle, now)
        )
        return reason and f"{leftover.what}, left without its rig: {reason}"

    async def sweep(self) -> list[Reaped]:
        reaped = []
        now = time.time()
        judged = [
            (handle, self.verdict(handle, now))
            for handle in await self.runtime.list_by_label(managed_labels())
        ]
        if isinstance(self.runtime, LeavesLeftovers):
            leftovers = await self.runtime.list_leftovers(managed_labels())
            judged += [(leftover.handle, self.leftover_verdict(leftover, now)) for leftover in leftovers]
        for handle, reason in judged:
            if reason is None:
                continue
            log.warning("reaping %s (session %s): %s", handle.name, handle.session_id, reason)
            await self.runtime.destroy(handle)
            reaped.append(Reaped(handle, reason))
        return reaped
