"""Live artifact mirroring: follow a rig's recording feed and copy every finished turn to the host.

The rig publishes its boot recording as server-sent events (``GET /recording/events``)::

    id: 7
    event: turn
    data: {"seq": 7, "turn": "turn-00007", "files": [{"path": "turn-00007/action.json", "size": 123, "sha256": "..."}]}

    event: video
    data: {"path": "recording.mp4", "size": 1234567, "sha256": "..."}

Each file is fetched from ``GET /recording/files/{path}``, checked against its size and sha256, and
written under ``<dest>/.incoming/``; a turn folder appears in ``<dest>`` by one rename once all
its files are verified, so the host never sees half a turn. A dropped connection is resumed with
``?after=<last seq>`` (and ``Last-Event-ID``): events at or below the last seq are duplicates and
skipped (so is a repeated video event); a jump past the next seq is recorded as a gap.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import anyio
import httpx2
from pydantic import ValidationError

from deskrig.client import tls_context
from deskrig.errors import http_error_info
from deskrig.model import FileEntry, TurnEvent
from deskrig.orchestrator.models import MirrorReport
from deskrig.orchestrator.rig_client import EVENTS, RigClient
from deskrig.orchestrator.waits import Probe, poll

log = logging.getLogger("deskrig.orchestrator.mirror")

INCOMING = ".incoming"
_TURN = re.compile(r"^turn-([0-9]+)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: A feed that says nothing (not even a keepalive comment) for this long is treated as dropped.
READ_TIMEOUT = 45.0
DOWNLOAD_ATTEMPTS = 2


class FeedError(Exception):
    """The feed said something the mirror cannot accept (bad path, checksum that never matches)."""


@dataclass
class _Event:
    kind: str
    data: str
    id: str | None


def _safe_relative(path: str) -> PurePosixPath:
    rel = PurePosixPath(path)
    if rel.is_absolute() or not rel.parts or any(not _NAME.match(part) for part in rel.parts):
        raise FeedError(f"refusing feed path {path!r}")
    return rel


def _refusal(response: httpx2.Response) -> str:
    """``HTTP 404 RECORDING_ERROR: message`` for the rig's error answer (read in full), or the
    start of the body when it is not a deskrig error."""
    error = http_error_info(response.text)
    said = f"{error.code.value}: {error.message}" if error is not None else response.text[:200]
    return f"HTTP {response.status_code} {said}"


class ArtifactMirror:
    """Copies one rig's recording into ``dest`` while the rig runs. Run :meth:`run` in a task."""

    def __init__(
        self,
        endpoint: str,
        token: str,
        dest: Path,
        *,
        retry_delay: float = 0.2,
        max_retry_delay: float = 2.0,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.dest = dest
        self.report = MirrorReport()
        self._token = token
        self._retry_delay = retry_delay
        self._max_retry_delay = max_retry_delay
        self._last_seq: int | None = None
        self._video_sha256: str | None = None
        self._last_event = time.monotonic()
        self._busy = False
        self._scope: anyio.CancelScope | None = None
        self._closed = False

    # --- driving -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Follow the feed until :meth:`close`, reconnecting after every drop."""
        self.dest.mkdir(parents=True, exist_ok=True)
        timeout = httpx2.Timeout(10.0, read=READ_TIMEOUT)
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._closed:
                scope.cancel()
            async with httpx2.AsyncClient(timeout=timeout, verify=tls_context()) as http:
                rig = RigClient(http, self.endpoint, self._token)
                delay = self._retry_delay
                while True:
                    try:
                        await self._follow(rig)
                        delay = self._retry_delay  # the rig ended the stream: resume promptly
                    except (httpx2.HTTPError, FeedError, OSError) as exc:
                        self._note_error(f"feed: {type(exc).__name__}: {exc}")
                    self.report.reconnects += 1
                    await anyio.sleep(delay)
                    delay = min(delay * 2, self._max_retry_delay)
        shutil.rmtree(self.dest / INCOMING, ignore_errors=True)

    def resume(self) -> None:
        """Carry on after the turns already in ``dest`` (a re-adopted rig's): the feed is asked only
        for later ones. A turn folder's number is its seq."""
        seqs = [int(match[1]) for path in self.dest.glob("turn-*") if (match := _TURN.match(path.name))]
        if seqs:
            self._last_seq = self.report.last_seq = max(seqs)
            self.report.turns = len(seqs)

    def close(self) -> None:
        """Stop following (a turn being copied is dropped; its folder never appears half-done)."""
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()

    async def settle(self, *, quiet: float, timeout: float, want_video: bool) -> bool:
        """Wait until the feed has been quiet for ``quiet`` s (and the video is in, if wanted)."""

        async def check() -> Probe:
            idle = time.monotonic() - self._last_event
            done = not self._busy and idle >= quiet and (self.report.video is not None or not want_video)
            return Probe(done=done, observed=f"idle {idle:.1f} s, video {self.report.video}")

        return (await poll(check, timeout, interval=0.05)).done

    @property
    def last_seq(self) -> int | None:
        return self._last_seq

    # --- the feed --------------------------------------------------------------------------------

    async def _follow(self, rig: RigClient) -> None:
        async with rig.events(self._last_seq) as response:
            if response.status_code != 200:
                await response.aread()
                raise FeedError(f"GET {EVENTS}: {_refusal(response)}")
            async for event in self._events(response):
                self._last_event = time.monotonic()
                self._busy = True
                try:
                    await self._handle(rig, event)
                finally:
                    self._busy = False
                    self._last_event = time.monotonic()

    async def _events(self, response: httpx2.Response) -> AsyncIterator[_Event]:
        kind, event_id = "message", None
        data: list[str] = []
        async for line in response.aiter_lines():
            if not line:
                if data:
                    yield _Event(kind, "\n".join(data), event_id)
                kind, data, event_id = "message", [], None
            elif line.startswith(":"):
                continue  # keepalive comment
            else:
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "event":
                    kind = value
                elif name == "data":
                    data.append(value)
                elif name == "id":
                    event_id = value

    async def _handle(self, rig: RigClient, event: _Event) -> None:
        try:
            payload = json.loads(event.data)
            if event.kind == "turn":
                await self._on_turn(rig, TurnEvent.model_validate(payload))
            elif event.kind == "video":
                await self._on_video(rig, FileEntry.model_validate(payload))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise FeedError(f"malformed {event.kind} event: {exc}") from exc

    async def _on_turn(self, rig: RigClient, turn: TurnEvent) -> None:
        if self._last_seq is not None and turn.seq <= self._last_seq:
            return  # replayed after a reconnect: already here
        expected = 1 if self._last_seq is None else self._last_seq + 1
        if turn.seq > expected:
            self.report.gaps.append((expected, turn.seq))
            log.warning("feed skipped from seq %d to %d at %s", expected, turn.seq, self.endpoint)
        folder = _safe_relative(turn.turn)
        if len(folder.parts) != 1:
            raise FeedError(f"refusing turn name {turn.turn!r}")
        staging = self.dest / INCOMING / turn.turn
        shutil.rmtree(staging, ignore_errors=True)
        for entry in turn.files:
            rel = _safe_relative(entry.path)
            if rel.parts[0] != turn.turn:
                raise FeedError(f"file {entry.path!r} is outside its turn {turn.turn!r}")
            await self._fetch(rig, entry, self.dest / INCOMING / rel)
        final = self.dest / turn.turn
        if final.exists():
            shutil.rmtree(staging)
        else:
            staging.mkdir(parents=True, exist_ok=True)  # a turn without files is still a turn
            os.rename(staging, final)
            self.report.turns += 1
        self._last_seq = turn.seq
        self.report.last_seq = turn.seq

    async def _on_video(self, rig: RigClient, video: FileEntry) -> None:
        if video.sha256 == self._video_sha256:
            return  # a resumed stream repeats the video event
        rel = _safe_relative(video.path)
        staging = self.dest / INCOMING / rel
        await self._fetch(rig, video, staging)
        final = self.dest / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, final)
        self.report.video = str(final)
        self._video_sha256 = video.sha256

    async def _fetch(self, rig: RigClient, entry: FileEntry, target: Path) -> None:
        """Download one file to ``target``, verified; retried once on a mismatch."""
        target.parent.mkdir(parents=True, exist_ok=True)
        url = rig.file_url(entry.path)
        observed = ""
        for _ in range(DOWNLOAD_ATTEMPTS):
            digest = hashlib.sha256()
            size = 0
            async with rig.file(entry.path) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise FeedError(f"GET {url}: {_refusal(response)}")
                with target.open("wb") as out:
                    async for chunk in response.aiter_bytes():
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
            if size == entry.size and digest.hexdigest() == entry.sha256:
                return
            observed = f"{size} bytes, sha256 {digest.hexdigest()}"
        target.unlink(missing_ok=True)
        raise FeedError(
            f"{entry.path}: expected {entry.size} bytes with sha256 {entry.sha256}, got {observed}"
        )

    def _note_error(self, message: str) -> None:
        log.info("mirror %s: %s", self.endpoint, message)
        if not self.report.errors or self.report.errors[-1] != message:
            self.report.errors.append(message)
            del self.report.errors[:-20]
