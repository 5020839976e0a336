"""The orchestrator's HTTP view of the boot recording (``--record DIR``), behind the bearer token.

- ``GET /recording/events?after=SEQ`` (or ``Last-Event-ID: SEQ``): Server-Sent Events. Every turn
  with a number above SEQ that is already on disk, oldest first, then each new one as it completes::

      id: 3
      event: turn
      data: {"seq": 3, "turn": "turn-00003", "files": [{"path": "turn-00003/action.json", "size": 512, "sha256": "..."}, ...]}

  Once the video is finalised (``POST /recording/finalize`` or the rig stopping) an
  ``event: video`` with ``{"path": "recording.mp4", "size", "sha256"}`` follows (no ``id``, so it
  never moves the resume point; a resumed stream repeats it). ``: keepalive`` comments come every
  ~10 s. A turn's number is its ``seq``, so a stream resumed after a rig restart into the same
  folder (which continues the numbering) has neither gaps nor duplicates.
- ``GET /recording/files/{path}``: one file under the recording folder. Paths that are absolute,
  contain ``..`` or hidden components (half-written turns) are 404; a symlink leading outside the
  folder is 403. Nothing outside the folder is ever served.
- ``GET /status``: ``{"last_activity": <epoch seconds of the last tool call>, "recording": <state|null>}``.
- ``POST /recording/finalize``: stop the boot recording's ffmpeg gracefully (turns go on being
  recorded) and return the recording state.

Without a boot recording the recording routes answer 404. Every error is the JSON every deskrig
client knows, ``{"error": {code, message, details?, remediation}}`` (:mod:`deskrig.error_responses`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Header
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse

from deskrig.error_responses import http_error
from deskrig.errors import ErrorCode, ErrorInfo
from deskrig.recording.registry import registry_of
from deskrig.recording.session import Recording, Wakeups

if TYPE_CHECKING:
    from deskrig.server import DeskrigServer

KEEPALIVE_SECONDS = 10.0


def _refuse(status: int, code: ErrorCode, message: str, remediation: str, **details: str) -> JSONResponse:
    return http_error(
        ErrorInfo(code=code, message=message, details=details or None, remediation=remediation), status
    )


def _no_file(relative: str) -> JSONResponse:
    return _refuse(
        404,
        ErrorCode.INVALID_PATH,
        f"no such recording file: {relative!r}",
        "Fetch the paths the turn and video events of GET /recording/events name.",
        path=relative,
    )


def sse(event: str, data: dict[str, Any], event_id: int | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def turn_stream(
    recording: Recording,
    after: int,
    replaced: Callable[[], bool] = lambda: False,
    changes: Wakeups | None = None,
) -> AsyncIterator[bytes]:
    """Turns above ``after`` from disk and memory, then live ones; the video once final. Ends when
    ``replaced()`` turns true, which is looked at whenever ``changes`` are woken."""
    wakeup = asyncio.Event()
    sources = [recording.wakeups, *([changes] if changes is not None else [])]
    for source in sources:  # before the first read, so nothing completes unseen
        source.add(wakeup)
    last = after
    video_sent = False
    try:
        while True:
            wakeup.clear()
            if replaced():
                return
            for event in await anyio.to_thread.run_sync(recording.events_after, last):
                yield sse("turn", event.model_dump(mode="json"), event.seq)
                last = event.seq
            if recording.video_event is not None and not video_sent:
                video_sent = True
                yield sse("video", recording.video_event.model_dump(mode="json"))
            async for keepalive in idle_until(wakeup):
                yield keepalive
    finally:
        for source in sources:
            source.discard(wakeup)


async def idle_until(wakeup: asyncio.Event) -> AsyncIterator[bytes]:
    """Wait for ``wakeup``, with a keepalive comment every :data:`KEEPALIVE_SECONDS` until it
    comes. Only the wakeup ends the wait: the caller's state changes only with one, so an idle
    stream does not look again (a turn stream's look is a worker thread's disk read)."""
    while not wakeup.is_set():
        with anyio.move_on_after(KEEPALIVE_SECONDS) as idle:
            await wakeup.wait()
        if idle.cancelled_caught:
            yield b": keepalive\n\n"


def resume_point(after: int | None, last_event_id: str | None) -> int | JSONResponse:
    """Where a stream starts: ``?after=SEQ``, else the ``Last-Event-ID`` a reconnecting
    EventSource sends, else 0; or the 400 refusing a ``Last-Event-ID`` that is no turn number."""
    if after is not None:
        return after
    if last_event_id is None or not last_event_id.strip():
        return 0
    try:
        return int(last_event_id)
    except ValueError:
        return _refuse(
            400,
            ErrorCode.INVALID_ARGUMENT,
            "Last-Event-ID must be a turn number",
            "Send the id of the last turn event received, or ?after=SEQ.",
            last_event_id=str(last_event_id),
        )


def event_stream(chunks: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(
        chunks,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def safe_file(root: Path, relative: str) -> Path | Response:
    """The file ``relative`` names under ``root``, or the 404/403 response refusing it."""
    parts = relative.split("/")
    if (
        not relative
        or "\0" in relative
        or "\\" in relative
        or relative.startswith("/")
        or any(part in ("", ".", "..") or part.startswith(".") for part in parts)
    ):
        return _no_file(relative)
    real_root = root.resolve()
    candidate = (real_root / relative).resolve()
    if not candidate.is_relative_to(real_root):
        return _refuse(
            403,
            ErrorCode.PERMISSION_DENIED,
            f"{relative!r} leads outside the recording folder",
            "Only files inside the recording folder are served.",
            path=relative,
        )
    if not candidate.is_file():
        return _no_file(relative)
    return candidate


def no_boot() -> JSONResponse:
    """404 for the routes that show the boot recording, on a rig that has none."""
    return _refuse(
        404,
        ErrorCode.RECORDING_ERROR,
        "this rig is not recording from boot (start it with --record DIR)",
        "Start the rig with --record DIR (or DESKRIG_RECORD) to record from boot.",
    )


def recording_router(server: DeskrigServer) -> APIRouter:
    router = APIRouter()

    def boot() -> Recording | None:
        return registry_of(server.services).boot

    @router.get("/status")
    async def status() -> dict[str, Any]:
        """Idle time for the orchestrator's reaper, and the boot recording's state."""
        recording = boot()
        return {
            "last_activity": server.last_activity,
            "recording": recording.state().model_dump(mode="json") if recording else None,
        }

    @router.get("/recording/events", response_model=None)
    async def events(
        after: int | None = None, last_event_id: str | None = Header(None, alias="Last-Event-ID")
    ) -> Response:
        recording = boot()
        if recording is None:
            return no_boot()
        start = resume_point(after, last_event_id)
        if isinstance(start, JSONResponse):
            return start
        return event_stream(turn_stream(recording, start))

    @router.get("/recording/files/{path:path}", response_model=None)
    async def files(path: str) -> Response:
        recording = boot()
        if recording is None:
            return no_boot()
        found = await anyio.to_thread.run_sync(safe_file, recording.output_dir, path)
        if isinstance(found, Response):
            return found
        return FileResponse(found)

    @router.post("/recording/finalize")
    async def finalize() -> Response:
        recording = boot()
        if recording is None:
            return no_boot()
        await anyio.to_thread.run_sync(recording.finalize_video)
        return JSONResponse(recording.state().model_dump(mode="json"))

    return router
