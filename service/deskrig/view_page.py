"""The rig's trajectory viewer: ``GET /view`` is the report of the boot recording (``--record DIR``)
as it is being written, the page :mod:`deskrig.viewer` makes for ``deskrig view``.

The page follows the recording feed (``GET /recording/events``, :mod:`deskrig.feed`): for each new
turn it fetches ``GET /view/turns/{number}``, that turn as the report shows it, and once the video
is final it plays it. Images and the video come from ``GET /recording/files/...``. Every route is
behind the rig's token like the feed; without a boot recording they answer 404 RECORDING_ERROR.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from fastapi import APIRouter
from fastapi.responses import HTMLResponse, JSONResponse, Response

from deskrig.error_responses import http_error
from deskrig.errors import ErrorCode, ErrorInfo
from deskrig.feed import no_boot
from deskrig.recording.registry import registry_of
from deskrig.recording.turns import turn_numbers
from deskrig.viewer.load import load_recording, load_turn
from deskrig.viewer.report import LiveFeed, render_report

if TYPE_CHECKING:
    from deskrig.server import DeskrigServer

#: Relative to /view: the page works behind any path prefix a proxy adds.
_LIVE = LiveFeed(events="recording/events", turn="view/turns/")
#: The page is the user's own data: never cached, never leaking its URL to a link it opens.
_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src 'self'; media-src 'self'; connect-src 'self'",
}


def view_router(server: DeskrigServer) -> APIRouter:
    router = APIRouter()

    def folder() -> Path | None:
        recording = registry_of(server.services).boot
        return recording.output_dir if recording is not None else None

    @router.get("/view", response_model=None)
    async def view() -> Response:
        root = folder()
        if root is None:
            return no_boot()
        recording = await anyio.to_thread.run_sync(lambda: load_recording(root, live=True))
        return HTMLResponse(render_report(recording, base="recording/files/", live=_LIVE), headers=_HEADERS)

    @router.get("/view/turns/{number}", response_model=None)
    async def turn(number: int) -> Response:
        root = folder()
        if root is None:
            return no_boot()
        if number not in await anyio.to_thread.run_sync(turn_numbers, root):
            return http_error(
                ErrorInfo(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message=f"the recording has no turn {number}",
                    details={"turn": number},
                    remediation="Ask for the turns the recording feed (GET /recording/events) announced.",
                ),
                404,
            )
        shown = await anyio.to_thread.run_sync(load_turn, root, number)
        return JSONResponse(
            shown.model_dump(mode="json", exclude_none=True), headers={"Cache-Control": "no-store"}
        )

    return router
