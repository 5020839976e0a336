"""Observing the desktop: its windows, and its pixels as a client may see them.

The one path from the desktop to what a screenshot tool returns or a recording keeps. An
:class:`Observation` is the desktop at one instant: it lists the windows at most once (or takes
the list an action's target resolver already made) and every image read from it has what a client
may not see removed in one place, :meth:`Observation.redact`: blocked windows blacked out (and,
later, PII masked). The recorder reads the accessibility half of its observations beside it
(``deskrig.recording.moments``) through :meth:`Observation.app_tree`, which every accessibility
read of an app goes through: an app with a blocked window is withheld, since its tree would show
what the blackout hides.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import anyio
from PIL import Image

from deskrig import imaging
from deskrig.a11y import Snapshot
from deskrig.a11y.atspi import AccessibilityClient
from deskrig.desktop import Desktop
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.grabs import Grab
from deskrig.model import Bounds, WindowInfo
from deskrig.security import WindowBlocklist


@dataclass(frozen=True)
class Pixels:
    """An image of part of the screen, as a client may see it."""

    frame: Grab
    #: Where ``frame`` lies on the screen.
    region: Bounds
    #: Blocked windows blacked out in it.
    masked_windows: int = 0
    #: For one window's pixels: how they were obtained (``deskrig.desktop.base.WindowCaptureMethod``).
    window_capture: str | None = None

    @property
    def image(self) -> Image.Image:
        """The pixels as a Pillow image (converted from the grab on first use)."""
        return self.frame.image()


class Observation:
    """The desktop at one instant. Its pixel methods block (X calls): call them from a worker
    thread; :meth:`app_tree` is a coroutine, for the event loop."""

    def __init__(
        self, desktop: Desktop, blocklist: WindowBlocklist, windows: list[WindowInfo] | None = None
    ) -> None:
        self.desktop = desktop
        self.blocklist = blocklist
        self._windows = windows
        #: A recorded moment reads pixels (worker thread) and the tree (event loop) at once.
        self._listing = threading.Lock()

    @property
    def windows(self) -> list[WindowInfo]:
        """Every window, top-most first, blocked ones included; listed on first use only."""
        with self._listing:
            if self._windows is None:
                self._windows = self.desktop.windows()
            return self._windows

    def window(self, window_id: int) -> WindowInfo | None:
        return next((w for w in self.windows if w.id == window_id), None)

    def is_blocked(self, title: str | None) -> bool:
        return title is not None and self.blocklist.is_blocked(title)

    async def check_app(self, pid: int) -> None:
        """SECURITY_ERROR when the app with ``pid`` has a blocked window: its accessibility tree
        (names, texts, values) would show what the blackout hides."""
        if not self.blocklist.active:
            return
        windows = await anyio.to_thread.run_sync(lambda: self.windows)
        blocked = next((w for w in self.blocklist.blocked(windows) if w.pid == pid), None)
        if blocked is not None:
            raise DeskrigError(
                ErrorCode.SECURITY_ERROR,
                "this app has a window blocked by the rig's security policy",
                details={"pid": pid, "window_id": blocked.id},
            )

    async def app_tree(self, client: AccessibilityClient, pid: int, **options: Any) -> Snapshot:
        """The accessibility snapshot of the app with ``pid`` (``options``: those of
        :meth:`AccessibilityClient.snapshot`), unless :meth:`check_app` withholds it."""
        await self.check_app(pid)
        return await client.snapshot(pid, **options)

    def redact(self, frame: Grab, region: Bounds) -> Pixels:
        """``frame`` of ``region`` with what a client may not see removed: every blocked window
        (its frame, whatever lies above it) blacked out. The one place to add PII masking (draw
        with :meth:`Grab.blacked_out`, or on ``frame.image()`` and hand back ``Grab.of(...)``)."""
        if not self.blocklist.active:
            return Pixels(frame, region)
        blocked = [w.frame_bounds or w.bounds for w in self.blocklist.blocked(self.windows)]
        overlapping = [b for b in blocked if b.intersection(region) is not None]
        if overlapping:
            frame = imaging.black_out(frame, overlapping, origin=(region.x, region.y))
        return Pixels(frame, region, len(overlapping))

    def screen(self, region: Bounds | None = None) -> Pixels:
        """``region`` of the screen (default: all of it), redacted."""
        region = region if region is not None else self.desktop.screen_bounds()
        return self.redact(self.desktop.grab(region), region)

    def window_pixels(self, window: WindowInfo, include_frame: bool = False) -> Pixels:
        """A window's own pixels, whole, from the compositor's copy (what lies above it is not in
        them). Callers refuse a blocked window rather than showing it black."""
        captured = self.desktop.grab_window(window.id, include_frame)
        frame = captured.grab
        region = window.frame_bounds if include_frame and window.frame_bounds else window.bounds
        area = Bounds(x=region.x, y=region.y, width=frame.width, height=frame.height)
        return Pixels(frame, area, window_capture=captured.method)

    def window_as_seen(self, window: WindowInfo) -> Pixels:
        """The window as it shows: an unobscured window is cut from the screen (a shared-memory
        grab of a few ms; only its on-screen part, which is what was seen); a covered one is read
        from the compositor's copy of it, whole (tens of ms). Nothing above it shows in either."""
        above = [w for w in self.windows if w.z_order < window.z_order and not w.minimized]
        covered = any((w.frame_bounds or w.bounds).intersection(window.bounds) for w in above)
        visible = self.desktop.screen_bounds().intersection(window.bounds)
        if not covered and visible is not None:
            return Pixels(self.desktop.grab(visible), visible)
        return self.window_pixels(window)


class Observer:
    """Hands out observations of one desktop under one security policy."""

    def __init__(self, desktop: Desktop, blocklist: WindowBlocklist) -> None:
        self.desktop = desktop
        self.blocklist = blocklist

    def observe(self, windows: list[WindowInfo] | None = None) -> Observation:
        """A new observation; ``windows``: a window list just taken (by an action's target
        resolver), so the desktop is not listed again for the same instant."""
        return Observation(self.desktop, self.blocklist, windows)
