"""Observing the desktop: its windows, and its pixels as a client may see them.

The one path from the desktop to what a screenshot tool returns or a recording keeps. An
:class:`Observation` is the desktop at one instant: it lists the windows at most once (or takes
the list an action's target resolver already made) and every image read from it has what a client
may not see removed in one place, :meth:`Observation.redact`: blocked windows blacked out and,
when the observation masks (:mod:`deskrig.privacy`), personal data masked (a window's own
pixels are masked too). The recorder reads the accessibility half of its observations beside it
(``deskrig.recording.moments``) through :meth:`Observation.app_tree`, which every accessibility
read of an app goes through: an app with a blocked window is withheld, since its tree would show
what the blackout hides, and a masking observation redacts its texts.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from PIL import Image

from deskrig import imaging
from deskrig.a11y import Snapshot
from deskrig.desktop import Desktop
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.grabs import Grab
from deskrig.model import Bounds, WindowInfo
from deskrig.privacy import MaskReport, PiiMasker, TextBox
from deskrig.security import WindowBlocklist

if TYPE_CHECKING:
    from deskrig.a11y.source import AccessibilitySource


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
    #: What personal data was masked in it; None when the observation does not mask.
    pii: MaskReport | None = None

    @property
    def image(self) -> Image.Image:
        """The pixels as a Pillow image (converted from the grab on first use)."""
        return self.frame.image()


class Observation:
    """The desktop at one instant. Its pixel methods block (X calls): call them from a worker
    thread; :meth:`app_tree` is a coroutine, for the event loop."""

    def __init__(
        self,
        desktop: Desktop,
        blocklist: WindowBlocklist,
        windows: list[WindowInfo] | None = None,
        masker: PiiMasker | None = None,
    ) -> None:
        self.desktop = desktop
        self.blocklist = blocklist
        self._windows = windows
        #: Masks personal data in every image and snapshot of this observation; None: does not.
        self.masker = masker
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

    async def app_tree(
        self, client: AccessibilitySource, pid: int, **options: Any
    ) -> tuple[Snapshot, MaskReport | None]:
        """The accessibility snapshot of the app with ``pid`` (``options``: those of
        :meth:`AccessibilitySource.snapshot`), unless :meth:`check_app` withholds it; with its
        personal data redacted (and what was) when this observation masks."""
        await self.check_app(pid)
        if self.masker is None:
            return await client.snapshot(pid, **options), None
        # A query is matched against the redacted tree, as the client sees it (see
        # PiiMasker.redact_snapshot); the stored snapshot keeps the originals for element lookups.
        query = options.pop("query", None)
        return self.masker.redact_snapshot(await client.snapshot(pid, **options), query)

    def redact(
        self, frame: Grab, region: Bounds, pids: list[int] | None = None, damage_serial: int | None = None
    ) -> Pixels:
        """``frame`` of ``region`` with what a client may not see removed: every blocked window
        (its frame, whatever lies above it) blacked out, then personal data masked when this
        observation masks. ``pids``: the apps whose text may show in it (default: those of
        every window over ``region``), for the tree detector. ``damage_serial``: the desktop's,
        read before ``frame`` was grabbed from the screen; a masking observation then reuses what
        it found in a capture of the same region under the same serial."""
        overlapping = [b for b in blocked_areas(self) if b.intersection(region) is not None]
        if overlapping:
            frame = imaging.black_out(frame, overlapping, origin=(region.x, region.y))
        # The same serial and the same blackout: the same pixels.
        unchanged = None if damage_serial is None else (damage_serial, tuple(overlapping))
        return self._masked(Pixels(frame, region, len(overlapping)), pids, unchanged)

    def _masked(self, pixels: Pixels, pids: list[int] | None, unchanged: Hashable | None = None) -> Pixels:
        """``pixels`` with personal data masked when this observation masks."""
        if self.masker is None:
            return pixels
        region = pixels.region
        frame, report = self.masker.mask(
            pixels.frame, (region.x, region.y), functools.partial(self._text_boxes, region, pids), unchanged
        )
        return dataclasses.replace(pixels, frame=frame, pii=report)

    def _text_boxes(self, region: Bounds, pids: list[int] | None) -> list[TextBox]:
        """Blocking: the tree detector's boxes for ``region``; none without an accessibility bus
        or outside a worker thread of the event loop that owns it (OCR then reads everything)."""
        assert self.masker is not None
        tree = self.masker.tree
        if tree is None:
            return []
        if pids is None:
            shown = [w for w in self.windows if not w.minimized and w.bounds.intersection(region)]
            pids = [w.pid for w in shown if w.pid is not None and not self.is_blocked(w.title)]
        try:  # with no app to read, still asked: what an app's closed window showed may be held
            return anyio.from_thread.run(tree.boxes, pids)
        except RuntimeError:  # not in an event loop's worker thread
            return []

    def _grab_screen(self, region: Bounds) -> tuple[Grab, int | None]:
        """``region`` of the screen, and (for a masking observation) the damage serial read
        before it was grabbed: damage after that read moves the serial on."""
        serial = self.desktop.damage_serial() if self.masker is not None else None
        return self.desktop.grab(region), serial

    def screen(self, region: Bounds | None = None) -> Pixels:
        """``region`` of the screen (default: all of it), redacted."""
        region = region if region is not None else self.desktop.screen_bounds()
        frame, serial = self._grab_screen(region)
        return self.redact(frame, region, damage_serial=serial)

    def window_pixels(self, window: WindowInfo, include_frame: bool = False) -> Pixels:
        """A window's own pixels, whole, from the compositor's copy (what lies above it is not in
        them). Callers refuse a blocked window rather than showing it black."""
        captured = self.desktop.grab_window(window.id, include_frame)
        frame = captured.grab
        region = window.frame_bounds if include_frame and window.frame_bounds else window.bounds
        area = Bounds(x=region.x, y=region.y, width=frame.width, height=frame.height)
        # Its own pixels: no other window shows in them, so none is blacked out; only masked.
        return self._masked(Pixels(frame, area, window_capture=captured.method), _pids(window))

    def window_as_seen(self, window: WindowInfo) -> Pixels:
        """The window as it shows: an unobscured window is cut from the screen (a shared-memory
        grab of a few ms; only its on-screen part, which is what was seen); a covered one is read
        from the compositor's copy of it, whole (tens of ms). Nothing above it shows in either."""
        above = [w for w in self.windows if w.z_order < window.z_order and not w.minimized]
        covered = any((w.frame_bounds or w.bounds).intersection(window.bounds) for w in above)
        visible = self.desktop.screen_bounds().intersection(window.bounds)
        if not covered and visible is not None:
            frame, serial = self._grab_screen(visible)
            unchanged = None if serial is None else (serial, ())
            return self._masked(Pixels(frame, visible), _pids(window), unchanged)
        return self.window_pixels(window)


def blocked_areas(observation: Observation) -> tuple[Bounds, ...]:
    """The screen areas :meth:`Observation.redact` blacks out: every blocked window with its frame
    (from the window list the observation already took)."""
    if not observation.blocklist.active:
        return ()
    return tuple(w.frame_bounds or w.bounds for w in observation.blocklist.blocked(observation.windows))


def _pids(window: WindowInfo) -> list[int]:
    return [window.pid] if window.pid is not None else []


class Observer:
    """Hands out observations of one desktop under one security policy."""

    def __init__(self, desktop: Desktop, blocklist: WindowBlocklist, masker: PiiMasker | None = None) -> None:
        self.desktop = desktop
        self.blocklist = blocklist
        #: The PII masking policy's masker; None: this observer never masks.
        self.masker = masker

    def masks(self, asked: bool | None = None) -> bool:
        """Whether an observation for a call that ``asked`` for masking (or not, or None) masks."""
        return self.masker is not None and self.masker.wanted(asked)

    def observe(self, windows: list[WindowInfo] | None = None, mask_pii: bool | None = None) -> Observation:
        """A new observation; ``windows``: a window list just taken (by an action's target
        resolver), so the desktop is not listed again for the same instant. It masks personal
        data when the policy is on, or ``mask_pii`` asks."""
        masker = self.masker if self.masks(mask_pii) else None
        return Observation(self.desktop, self.blocklist, windows, masker)
