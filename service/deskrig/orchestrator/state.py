"""The orchestrator's files on the host: the journal of its unfinished sessions.

The journal lets a restarted orchestrator (after a crash or ``kill -9``) find what its
predecessor left: ``<state_dir>/sessions/<orchestrator id>/<session id>.json`` names each
unfinished session's artifacts directory and rig token (hence mode 0600, in the user's state
directory). An entry is written when a session is queued and removed once ``session.json`` holds
how it ended; entries under an orchestrator whose lease is free belong to a dead one.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ValidationError

from deskrig.files import write_atomic
from deskrig.orchestrator.models import SessionInfo
from deskrig.orchestrator.reaper import Lease

log = logging.getLogger("deskrig.orchestrator.state")

JOURNAL_DIR = "sessions"
SESSION_FILE = "session.json"


class JournalEntry(BaseModel):
    """Enough to find an unfinished session again: its session.json and its rig's token."""

    session_id: str
    artifacts_dir: str
    token: str


class Journal:
    """One orchestrator's journal, and the way to the journals of dead ones in the same state dir."""

    def __init__(self, state_dir: Path, orchestrator_id: str) -> None:
        self.state_dir = state_dir
        self.root = state_dir / JOURNAL_DIR
        self.dir = self.root / orchestrator_id

    def record(self, entry: JournalEntry) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(self.dir / f"{entry.session_id}.json", entry.model_dump_json().encode(), mode=0o600)

    def forget(self, session_id: str) -> None:
        (self.dir / f"{session_id}.json").unlink(missing_ok=True)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.dir.rmdir()  # only when empty: what is left belongs to a session still unfinished

    def orphaned(self) -> Iterator[tuple[Lease, list[JournalEntry]]]:
        """Each dead orchestrator's lease (now held by the caller) and its unfinished sessions.

        The caller releases the lease, or keeps it while it runs rigs that still name it.
        """
        if not self.root.is_dir():
            return
        for owner_dir in sorted(self.root.iterdir()):
            if owner_dir == self.dir or not owner_dir.is_dir():
                continue
            lease = Lease(self.state_dir, owner_dir.name)
            if not lease.try_acquire():
                continue  # that orchestrator is alive
            paths = sorted(owner_dir.glob("*.json"))
            entries = []
            for path in paths:
                try:
                    entries.append(JournalEntry.model_validate_json(path.read_bytes()))
                except (OSError, ValidationError) as exc:
                    log.warning("ignoring journal entry %s: %s", path, exc)
            yield lease, entries
            # Only once the caller has dealt with them: a crash in between leaves them for the next.
            for path in paths:
                path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                owner_dir.rmdir()


def write_session_record(info: SessionInfo) -> None:
    """``session.json`` beside the turns: what ran, how it ended (never the token)."""
    record = info.model_dump(mode="json", exclude={"token", "queue_position"})
    write_atomic(
        Path(info.artifacts_dir) / SESSION_FILE,
        json.dumps(record, indent=2).encode(),
        mode=0o644,
        parents=True,
    )


def read_session_record(directory: Path) -> SessionInfo:
    """A session's ``session.json`` (also one written before timestamps were ISO-8601)."""
    return SessionInfo.model_validate_json((directory / SESSION_FILE).read_bytes())
