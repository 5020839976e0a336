"""After a crash: what a restarted orchestrator does with its dead predecessors' sessions.

Each unfinished session in a dead orchestrator's journal (see :mod:`deskrig.orchestrator.state`)
is settled one of two ways:

- its rig still runs and answers ``/readyz``, and the new orchestrator adopts rigs (the service
  does: its clients hold the rigs' URLs, whereas an in-process orchestrator's died with it): it is
  *adoptable*. The new orchestrator serves it on
  (mirror resumed after the turns already copied, same deadline) and holds the dead one's lease,
  which the rig's labels name, so that no reaper on the host takes it for an orphan;
- anything else (the container gone or exited, a rig that does not answer, a session that was
  still queued or starting): its ``session.json`` says ``failed`` with the reason, and what is
  left of its rig is saved (``rig.log``) and removed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2
from pydantic import ValidationError

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.files import write_atomic
from deskrig.orchestrator.models import SessionInfo, SessionState
from deskrig.orchestrator.reaper import Lease
from deskrig.orchestrator.rig_client import READYZ, RigClient
from deskrig.orchestrator.runtime import LABEL_LEASE, RigHandle, Runtime, managed_labels
from deskrig.orchestrator.state import (
    Journal,
    JournalEntry,
    read_session_record,
    write_session_record,
)

log = logging.getLogger("deskrig.orchestrator.recovery")


async def save_log_and_remove(runtime: Runtime, handle: RigHandle, directory: Path) -> None:
    """Keep the rig's log as ``rig.log`` in its session directory, then remove the rig."""
    logs = await runtime.logs(handle)
    write_atomic(directory / "rig.log", logs.encode(), mode=0o644, parents=True)
    await runtime.destroy(handle)


@dataclass(frozen=True)
class Adoptable:
    """A dead orchestrator's session whose rig still serves: its record, token and rig."""

    info: SessionInfo
    token: str
    handle: RigHandle


class Recovery:
    """Settles the unfinished sessions of dead orchestrators that used the same state directory."""

    def __init__(self, journal: Journal, runtime: Runtime, http: httpx2.AsyncClient, *, adopt: bool) -> None:
        self.journal = journal
        self.adopt = adopt
        self.runtime = runtime
        self.http = http
        #: The dead orchestrators' leases this one holds, by path: those its adopted rigs name.
        self.leases: dict[Path, Lease] = {}

    async def run(self) -> list[Adoptable]:
        adoptable: list[Adoptable] = []
        try:
            for lease, entries in self.journal.orphaned():
                self.leases[lease.path.resolve()] = lease
                for entry in entries:
                    found = await self._settle(entry)
                    if found is not None:
                        adoptable.append(found)
        finally:
            named = {Path(found.handle.labels.get(LABEL_LEASE, "")) for found in adoptable}
            for path in set(self.leases) - named:
                self.leases.pop(path).release()
        return adoptable

    async def _settle(self, entry: JournalEntry) -> Adoptable | None:
        directory = Path(entry.artifacts_dir)
        try:
            info = read_session_record(directory)
        except (OSError, ValidationError) as exc:
            log.warning("session %s: cannot read its session.json (%s); its rig goes", entry.session_id, exc)
            info = None
        rigs = await self.runtime.list_by_label(managed_labels(entry.session_id))
        handle = rigs[0] if rigs else None
        if info is not None and info.state.ended:
            problem = None
        elif info is None or info.state is not SessionState.READY:
            state = info.state.value if info else "unknown"
            problem = f"the session was still {state} when its orchestrator stopped"
        elif handle is None:
            problem = "its rig container was gone"
        elif not self.adopt:
            problem = "this orchestrator does not re-adopt rigs (adopt_rigs is off), so its rig was removed"
        else:
            problem = await self._serving(handle, entry.token)
            if problem is None:
                if not self._hold_lease(handle):
                    log.warning("session %s: a live orchestrator holds its rig's lease; left alone", info.id)
                    return None
                return Adoptable(info, entry.token, handle)
        if handle is not None:
            await save_log_and_remove(self.runtime, handle, directory)
        if info is not None and problem is not None:
            self._fail(info, f"orchestrator restarted: {problem}")
        return None

    async def _serving(self, handle: RigHandle, token: str) -> str | None:
        """None when the rig runs and answers ``/readyz``; else what is wrong with it."""
        status = await self.runtime.status(handle)
        if not status.running:
            return f"its rig container had {status.detail}"
        if not handle.endpoint:
            return "its rig container publishes no port"
        try:
            response = await RigClient(self.http, handle.endpoint, token).readyz()
        except httpx2.HTTPError as exc:
            return f"its rig did not answer {READYZ} ({type(exc).__name__})"
        if response.status_code != 200:
            return f"its rig answered {READYZ} with HTTP {response.status_code}"
        return None

    def _hold_lease(self, handle: RigHandle) -> bool:
        """Hold the lease the rig's labels name, so that reapers leave it; False if another does."""
        label = handle.labels.get(LABEL_LEASE)
        if not label:
            return False
        path = Path(label)
        if path in self.leases:
            return True
        lease = Lease.at(path)
        if not lease.try_acquire():
            return False
        self.leases[path] = lease
        return True

    def _fail(self, info: SessionInfo, reason: str) -> None:
        error = DeskrigError(
            ErrorCode.RIG_FAILED,
            reason,
            remediation="Start a new session; what this one recorded is in its artifacts directory.",
        )
        info.state = SessionState.FAILED
        info.phase = None
        info.reason = reason
        info.error = error.info()
        info.ended_at = info.ended_at or time.time()
        try:
            write_session_record(info)
        except OSError as exc:
            log.warning("session %s: cannot write its session.json: %s", info.id, exc)
        log.warning("session %s failed: %s", info.id, reason)
