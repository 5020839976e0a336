"""The rig's trajectory viewer: ``GET /view`` is the report of the rig's current recording as it is
being written, the page :mod:`deskrig.viewer` makes for ``deskrig view``.

The current recording is the one started last: the boot recording (``--record DIR``) until a
client calls ``start_recording``, then that client's, and so on; a stopped one stays shown until
another starts. Without any, ``/view`` is a page saying so, which reloads itself once one starts.

Each recording has a serial number, and the page reads the routes of its own one:

- ``GET /view/recordings/{serial}/events?after=SEQ``: the recording's turn feed
  (:func:`deskrig.feed.turn_stream`). When another recording becomes current, an
  ``event: recording`` with ``{"serial": N}`` ends the stream, and the page reloads to show it.
- ``GET /view/recordings/{serial}/turns/{number}``: that turn as the report shows it;
- ``GET /view/recordings/{serial}/files/{path}``: its images and video.

A serial that is no longer current answers 404 RECORDING_ERROR (a reload shows the new one).
Every route is behind the rig's token (:mod:`deskrig.pages_auth` signs a browser in).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio
from fastapi import APIRouter, Header
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from deskrig.error_responses import http_error
from deskrig.errors import DeskrigError, ErrorCode, ErrorInfo
from deskrig.feed import event_stream, idle_until, resume_point, safe_file, sse, turn_stream
from deskrig.recording.registry import RecordingRegistry, registry_of
from deskrig.recording.session import Recording
from deskrig.recording.turns import turn_numbers
from deskrig.viewer.load import load_recording, load_turn
from deskrig.viewer.report import LiveFeed, render_report

if TYPE_CHECKING:
    from deskrig.server import DeskrigServer

#: The page is the user's own data: never cached, never leaking its URL to a link it opens.
_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src 'self'; media-src 'self'; connect-src 'self'",
}
#: The serial the page without a recording follows: no recording has it.
NO_RECORDING = 0

#: What /view shows before any recording started; it reloads once one does.
NOTHING_RECORDED = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>deskrig viewer: no recording</title>
<style>body{font:15px system-ui,sans-serif;margin:3em;color:#222}code{background:#eee;padding:0 .3em}</style>
</head><body>
<h1 id="no-recording">This rig is not recording</h1>
<p>Nothing is being recorded yet. Start a recording with the <code>start_recording</code> tool, or
start the rig with <code>--record DIR</code>; this page shows it as soon as it starts.</p>
<script>
new EventSource("view/recordings/__SERIAL__/events").addEventListener("recording", () => location.reload());
</script>
</body></html>
"""


def _not_shown(serial: int, current: Recording | None) -> JSONResponse:
    return http_error(
        ErrorInfo(
            code=ErrorCode.RECORDING_ERROR,
            message=f"recording {serial} is not the rig's current recording",
            details={"serial": serial, "current": current.serial if current is not None else None},
            remediation="Reload /view: it shows the recording started last.",
        ),
        404,
    )


async def _follow(registry: RecordingRegistry, serial: int, after: int) -> AsyncIterator[bytes]:
    """The turns of recording ``serial`` while it is current; then which recording is."""
    shown = registry.latest
    if shown is not None and shown.serial == serial:
        async for chunk in turn_stream(shown, after, lambda: registry.latest is not shown, registry.started):
            yield chunk
    elif shown is None and serial == NO_RECORDING:
        wakeup = asyncio.Event()
        registry.started.add(wakeup)
        try:
            while True:
                wakeup.clear()
                if registry.latest is not None:
                    break
                async for keepalive in idle_until(wakeup):
                    yield keepalive
        finally:
            registry.started.discard(wakeup)
    latest = registry.latest
    yield sse("recording", {"serial": latest.serial if latest is not None else NO_RECORDING})


def view_router(server: DeskrigServer) -> APIRouter:
    router = APIRouter()

    def registry() -> RecordingRegistry:
        return registry_of(server.services)

    def shown(serial: int) -> Recording | JSONResponse:
        current = registry().latest
        return current if current is not None and current.serial == serial else _not_shown(serial, current)

    @router.get("/view", response_model=None)
    async def view() -> Response:
        recording = registry().latest
        if recording is None:
            return HTMLResponse(NOTHING_RECORDED.replace("__SERIAL__", str(NO_RECORDING)), headers=_HEADERS)
        # Relative to /view: the page works behind any path prefix a proxy adds.
        own = f"view/recordings/{recording.serial}/"
        root = recording.output_dir
        try:
            loaded = await anyio.to_thread.run_sync(lambda: load_recording(root, live=True))
        except DeskrigError as exc:  # its folder was removed or replaced since it started
            return http_error(exc.info(), 404)
        live = LiveFeed(events=f"{own}events", turn=f"{own}turns/")
        return HTMLResponse(render_report(loaded, base=f"{own}files/", live=live), headers=_HEADERS)

    @router.get("/view/recordings/{serial}/events", response_model=None)
    async def events(
        serial: int, after: int | None = None, last_event_id: str | None = Header(None, alias="Last-Event-ID")
    ) -> Response:
        start = resume_point(after, last_event_id)
        if isinstance(start, JSONResponse):
            return start
        return event_stream(_follow(registry(), serial, start))

    @router.get("/view/recordings/{serial}/turns/{number}", response_model=None)
    async def turn(serial: int, number: int) -> Response:
        recording = shown(serial)
        if isinstance(recording, JSONResponse):
            return recording
        root = recording.output_dir
        if number not in await anyio.to_thread.run_sync(turn_numbers, root):
            return http_error(
                ErrorInfo(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message=f"the recording has no turn {number}",
                    details={"turn": number},
                    remediation="Ask for the turns the recording's events announced.",
                ),
                404,
            )
        loaded = await anyio.to_thread.run_sync(load_turn, root, number)
        return JSONResponse(
            loaded.model_dump(mode="json", exclude_none=True), headers={"Cache-Control": "no-store"}
        )

    @router.get("/view/recordings/{serial}/files/{path:path}", response_model=None)
    async def files(serial: int, path: str) -> Response:
        recording = shown(serial)
        if isinstance(recording, JSONResponse):
            return recording
        found = await anyio.to_thread.run_sync(safe_file, recording.output_dir, path)
        return found if isinstance(found, Response) else FileResponse(found)

    return router
