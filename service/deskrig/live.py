"""The live screen: the rig's desktop as it changes, for people to watch in a browser (view-only).

- ``GET /live``: the page (:mod:`deskrig.live_page`); a browser signs in as :mod:`deskrig.pages_auth`
  describes.
- ``GET /live/frames``: the stream, ``multipart/x-mixed-replace`` JPEGs (MJPEG: an ``<img>``, VLC
  or ffplay show it as it is). Each part has ``Content-Length``, ``X-Frame-Seq`` and
  ``X-Frame-Time`` (Unix ms of the grab). The current screen comes first, then a frame per change.

One :class:`LiveScreen` per rig captures for every viewer, and only while someone watches. Its
frames are :class:`~deskrig.screen_changes.ScreenChanges`: observations of the screen (blocked
windows black exactly as in a screenshot), taken when the backend's damage says the screen may
have changed, so an idle screen is never grabbed nor encoded and costs a wake-up a second. A viewer
that falls behind skips to the newest frame; nothing queues up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from fastapi import APIRouter
from fastapi.responses import HTMLResponse, StreamingResponse

from deskrig import imaging
from deskrig.errors import DeskrigError
from deskrig.live_page import LIVE_PAGE
from deskrig.observation import Observer
from deskrig.screen_changes import ScreenChanges

if TYPE_CHECKING:
    from deskrig.server import DeskrigServer

log = logging.getLogger(__name__)

#: How long the capture loop waits for a change before it looks whether its viewers are still there.
IDLE_WAKE = 1.0
#: How often an idle stream looks whether the server is stopping.
STOP_POLL_SECONDS = 0.5
JPEG_QUALITY = 70
BOUNDARY = "deskrig-frame"


@dataclass(frozen=True)
class LiveFrame:
    seq: int
    #: Unix time of the grab, in milliseconds.
    grabbed_ms: int
    jpeg: bytes

    def part(self) -> bytes:
        head = (
            f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(self.jpeg)}\r\n"
            f"X-Frame-Seq: {self.seq}\r\nX-Frame-Time: {self.grabbed_ms}\r\n\r\n"
        )
        return head.encode() + self.jpeg + b"\r\n"


class _Viewer:
    """One open stream: woken from the capture thread when a new frame is out."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.wakeup = asyncio.Event()

    def wake(self) -> None:
        # The viewer's loop may be closed already: it left, and the capture thread sees so next time.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.wakeup.set)


class LiveScreen:
    """The capture loop of one desktop, shared by its viewers, running while there is one."""

    def __init__(self, observer: Observer, quality: int = JPEG_QUALITY) -> None:
        self.observer = observer
        self.quality = quality
        self.latest: LiveFrame | None = None
        self._viewers: set[_Viewer] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    async def frames(self, stopping: threading.Event) -> AsyncIterator[LiveFrame]:
        """The current frame, then each new one, until the caller stops iterating or ``stopping``
        is set (the server is shutting down: an open stream would hold its exit for the whole
        graceful-shutdown timeout)."""
        viewer = _Viewer()
        self._join(viewer)
        sent = 0
        try:
            while not stopping.is_set():
                viewer.wakeup.clear()
                frame = self.latest
                if frame is not None and frame.seq != sent:
                    sent = frame.seq
                    yield frame
                    continue
                with anyio.move_on_after(STOP_POLL_SECONDS):
                    await viewer.wakeup.wait()
        finally:
            self._leave(viewer)

    def _join(self, viewer: _Viewer) -> None:
        with self._lock:
            self._viewers.add(viewer)
            if self._thread is None:
                self.latest = None  # taken while nobody watched: stale
                self._thread = threading.Thread(target=self._capture, name="deskrig-live", daemon=True)
                self._thread.start()

    def _leave(self, viewer: _Viewer) -> None:
        with self._lock:
            self._viewers.discard(viewer)

    def _capture(self) -> None:
        """Encode each change of the screen until the last viewer leaves (then this thread ends)."""
        changes = ScreenChanges(self.observer)
        seq, failure = 0, ""
        while True:
            with self._lock:
                if not self._viewers:
                    self._thread = None
                    return
                viewers = list(self._viewers)
            try:
                frame = changes.next(IDLE_WAKE)
            except DeskrigError as exc:  # a resize, a display going away: tried again, logged once
                if exc.message != failure:
                    failure = exc.message
                    log.warning("live screen: cannot capture: %s: %s", exc.code.value, exc.message)
                continue  # the next try comes a slow tick later
            if frame is None:
                continue  # nothing drawn: only see whether the viewers are still there
            seq, failure = seq + 1, ""
            jpeg = imaging.encode(frame.pixels.frame, "jpeg", self.quality)
            self.latest = LiveFrame(seq, int(frame.grabbed_at * 1000), jpeg)
            for viewer in viewers:
                viewer.wake()


def live_router(server: DeskrigServer, stopping: threading.Event) -> APIRouter:
    """``/live`` and ``/live/frames`` for the rig of ``server``; streams end once ``stopping`` is set."""
    services = server.services
    screen = LiveScreen(Observer(services.desktop, services.security.blocklist))
    router = APIRouter()

    @router.get("/live")
    async def page() -> HTMLResponse:
        return HTMLResponse(LIVE_PAGE)

    @router.get("/live/frames")
    async def frames() -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            async for frame in screen.frames(stopping):
                yield frame.part()

        return StreamingResponse(
            parts(),
            media_type=f"multipart/x-mixed-replace; boundary={BOUNDARY}",
            headers={"X-Accel-Buffering": "no"},
        )

    return router
