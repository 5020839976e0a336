"""The X11 backend: python-xlib for the protocol, mss (MIT-SHM) for screen pixels.

Four X connections per backend, each with one job:

- the main python-xlib connection: windows, RandR, pointer, Composite window capture. It selects
  no events, so nothing queues up on it;
- the mss (XCB) connection: attaches the MIT-SHM segment screen grabs land in (and grabs whole
  regions into it where there is no DAMAGE);
- the DAMAGE regions connection: reads where the screen was drawn on and grabs those rows into the
  segment, with the server grabbed in between (see ``x11_capture.DamageRegions``);
- the DAMAGE counter connection: only DamageNotify events arrive there (see
  ``x11_capture.DamageCounter``).

Window captures use Composite: at start-up the backend asks the server to keep every top-level
window (the WM frames, or the clients without a WM) in an off-screen pixmap
("automatic" redirection, so the screen still shows them). A window's own pixmap holds its real
contents even where another window covers it, where XGetImage of the screen would return the
covering window or black. Windows already mapped when the backend starts are copied into their
new pixmap and repaint it on the Expose the server sends them.

Xlib failures are translated into DeskrigError at this boundary; nothing Xlib-specific escapes.

python-xlib keeps its event-code table in a class attribute shared by all connections of a
process, so one process should only talk to X servers with the same extensions (a rig's server
attaches to exactly one display).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mss import ScreenShotError
from PIL import Image
from Xlib import X
from Xlib.display import Display
from Xlib.error import BadWindow, CatchError, ConnectionClosedError, DisplayError, XError
from Xlib.ext import composite
from Xlib.protocol import event
from Xlib.xobject.drawable import Window

from deskrig import grabs
from deskrig.desktop.base import DesktopBackend
from deskrig.desktop.x11_capture import DamageCounter, ScreenGrabber, xlib_get_image
from deskrig.desktop.x11_windows import VANISHED, Frame, WindowLister, client_bounds, frame_of
from deskrig.errors import BackendError, DeskrigError, ErrorCode
from deskrig.model import FIRST_DISPLAY_ID, Bounds, CursorPosition, DisplayInfo, Point, WindowInfo

log = logging.getLogger(__name__)

#: RandR 1.5 (X.Org 1.18, 2015) added monitors; an older server counts as one display.
RANDR_MONITORS = (1, 5)
#: Seconds the display layout that places the pointer (:meth:`X11Backend.cursor_position`) is
#: kept: the recorder reads the pointer up to 30 times a second, and RandR's monitors cost three
#: round trips more than the pointer's one. RandR sends no event when monitors are defined
#: (``xrandr --setmonitor``), so the layout is read again this often, and by every ``displays()``.
LAYOUT_MAX_AGE_S = 1.0

#: X resource ids are 29-bit numbers; anything else cannot name a window.
MAX_XID = (1 << 29) - 1


class X11Backend(DesktopBackend):
    """One X display. ``display`` is an X display name such as ``:1``; None means ``$DISPLAY``."""

    name = "x11"
    a11y_in_screen_pixels = True
    captures_show_pointer = False  # the X server leaves its cursor out of screen reads

    def __init__(self, display: str | None = None) -> None:
        super().__init__()
        self._display_name = display or os.environ.get("DISPLAY", "")
        #: How to release what is open so far, in opening order; close() runs them newest first.
        self._closers: list[Callable[[], None]] = []
        try:
            with self._translated(ErrorCode.DISPLAY_NOT_FOUND, "cannot open X display"):
                self._open()
        except DeskrigError:
            self.close()
            raise

    def _open(self) -> None:
        self._display = Display(self._display_name)
        self._closers.append(self._display.close)
        self._root = self._display.screen().root
        self._display.set_error_handler(self._log_async_error)
        has = self._display.has_extension
        if not has("X-Resource"):
            self.note("windows", "no X-Resource extension: pids of apps without _NET_WM_PID are unknown")
        self._windows = WindowLister(self._display)
        # RandR's version and an atom's name cannot change while the connection lives: asked once,
        # so a layout read is one GetMonitors (the pointer's display reads it every second).
        self._has_randr_monitors = has("RANDR") and self._randr_version() >= RANDR_MONITORS
        self._monitor_names: dict[int, str] = {}
        #: The last ``displays()`` and the monotonic time it was read.
        self._layout: tuple[float, list[DisplayInfo]] = (-LAYOUT_MAX_AGE_S, [])
        self._composited = self._redirect_toplevels()
        self.window_capture_method = "composite" if self._composited else "screen"
        self._grabber = ScreenGrabber(self._display_name, self._display, self.note)
        self._closers.append(self._grabber.close)
        self._damage: DamageCounter | None = None
        self._fresh_serial = 0
        if has("DAMAGE"):
            self._damage = DamageCounter(self._display_name)
            self._closers.append(self._damage.close)
        else:
            self.note("damage", "no DAMAGE extension: every capture is taken afresh")

    # -- the DesktopBackend methods -------------------------------------------------------------

    def displays(self) -> list[DisplayInfo]:
        with self._translated(ErrorCode.DISPLAY_NOT_FOUND, "cannot read the display layout"):
            monitors = self._randr_monitors() if self._has_randr_monitors else []
            if not monitors:
                self._note_once("displays", "RandR reports no monitors; the whole screen is one display")
                monitors = [("screen", self._root_bounds(), True)]
        if not any(primary for _, _, primary in monitors):
            # X leaves "primary" unset unless someone chose one; clients then take the first.
            name, bounds, _ = monitors[0]
            monitors[0] = (name, bounds, True)
        monitors.sort(key=lambda monitor: not monitor[2])  # the primary first, stable otherwise
        displays = [
            DisplayInfo(id=number, name=name, bounds=bounds, primary=primary, scale=1.0)
            for number, (name, bounds, primary) in enumerate(monitors, start=FIRST_DISPLAY_ID)
        ]
        self._layout = (time.monotonic(), displays)
        return displays

    def screen_bounds(self) -> Bounds:
        with self._translated(ErrorCode.DISPLAY_NOT_FOUND, "cannot read the screen size"):
            return self._root_bounds()

    def windows(self) -> list[WindowInfo]:
        with self._translated(ErrorCode.CAPTURE_FAILED, "cannot list windows"):
            return self._windows.collect()

    def capture(self, region: Bounds) -> Image.Image:
        return self.grab(region).image()

    def grab(self, region: Bounds) -> grabs.Grab:
        with self._translated(ErrorCode.CAPTURE_FAILED, "screen capture failed"):
            visible = region.intersection(self._root_bounds())
            if visible is None:
                raise DeskrigError(
                    ErrorCode.INVALID_REGION,
                    "the region lies outside the screen",
                    details={"region": region.model_dump(), "screen": self._root_bounds().model_dump()},
                )
            try:
                return self._grabber.grab(visible)
            except ScreenShotError as exc:
                raise BackendError(ErrorCode.CAPTURE_FAILED, f"screen grab failed: {exc}") from exc

    def capture_window(self, window_id: int, include_frame: bool) -> Image.Image:
        with self._translated(ErrorCode.CAPTURE_FAILED, "window capture failed", window_id=window_id):
            frame, crop = self._window_area(window_id, include_frame)
            if not self._composited:  # noted at start-up: covered parts show what covers them
                origin = {"x": crop.x + frame.bounds.x, "y": crop.y + frame.bounds.y}
                return self.capture(crop.model_copy(update=origin))
            return self._capture_pixmap(frame.window, crop, window_id)

    def cursor_position(self) -> CursorPosition:
        with self._translated(ErrorCode.DISPLAY_NOT_FOUND, "cannot read the pointer"):
            pointer = self._root.query_pointer()
        x, y = int(pointer.root_x), int(pointer.root_y)
        read_at, displays = self._layout
        if time.monotonic() - read_at >= LAYOUT_MAX_AGE_S:
            displays = self.displays()
        display_id = next((d.id for d in displays if d.bounds.contains(x, y)), None)
        return CursorPosition(x=x, y=y, display_id=display_id)

    def activate_window(self, window_id: int) -> None:
        with self._translated(ErrorCode.INPUT_FAILED, "cannot focus the window", window_id=window_id):
            known = {w.id for w in self._windows.collect()}
            if window_id not in known:
                raise self._window_not_found(window_id)
            window = self._display.create_resource_object("window", window_id)
            if self._windows.window_manager_running():
                # EWMH: ask the WM (source 2 = a pager acting for the user, which WMs obey).
                active = self._display.intern_atom("_NET_ACTIVE_WINDOW")
                message = event.ClientMessage(
                    window=window, client_type=active, data=(32, [2, X.CurrentTime, 0, 0, 0])
                )
                mask = X.SubstructureRedirectMask | X.SubstructureNotifyMask
                self._root.send_event(message, event_mask=mask)
            else:
                window.map()
                frame_of(self._root, window).window.configure(stack_mode=X.Above)
                window.set_input_focus(X.RevertToParent, X.CurrentTime)
            self._display.sync()

    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]:
        # X11 toolkits translate to root coordinates themselves (XTranslateCoordinates).
        return []

    def damage_serial(self) -> int:
        if self._damage is None:
            self._fresh_serial += 1
            return self._fresh_serial
        with self._translated(ErrorCode.DISPLAY_NOT_FOUND, "lost the DAMAGE connection"):
            return self._damage.serial()

    def damage_fd(self) -> int | None:
        return self._damage.fileno() if self._damage is not None else None

    def close(self) -> None:
        # Each connection is closed even if another one is already broken.
        while self._closers:
            close = self._closers.pop()
            try:
                close()
            except (XError, ConnectionClosedError, OSError) as exc:
                log.debug("ignoring an error while closing %s: %s", self._display_name, exc)

    # -- helpers --------------------------------------------------------------------------------

    @contextmanager
    def _translated(self, code: ErrorCode, message: str, **details: object) -> Iterator[None]:
        """Turn Xlib's exceptions into DeskrigError; a lost connection means no display."""
        try:
            yield
        except (ConnectionClosedError, DisplayError) as exc:
            raise BackendError(
                ErrorCode.DISPLAY_NOT_FOUND,
                f"{message}: X display {self._display_name!r} is not reachable ({exc})",
                details={"display": self._display_name, **details},
                remediation="Check that the X server is running and DISPLAY names it.",
            ) from exc
        except XError as exc:
            raise BackendError(code, f"{message}: {exc}", details={**details} or None) from exc

    def _note_once(self, component: str, message: str) -> None:
        if not any(d.component == component and d.message == message for d in self.diagnostics):
            self.note(component, message)

    def _log_async_error(self, error: XError, request: object) -> None:
        """Errors of requests without replies arrive later; they must not reach stdout."""
        log.debug("X error on %s: %s", self._display_name, error)

    def _root_bounds(self) -> Bounds:
        if self._damage is not None:
            return self._damage.bounds()  # kept from the root's events: no round trip
        geometry = self._root.get_geometry()
        return Bounds(x=0, y=0, width=geometry.width, height=geometry.height)

    def _redirect_toplevels(self) -> bool:
        """Keep every top-level window in an off-screen pixmap (see the module docstring)."""
        if not self._display.has_extension("Composite"):
            self.note("capture", "no Composite extension: a window capture shows whatever covers the window")
            return False
        caught = CatchError()
        self._root.composite_redirect_subwindows(composite.RedirectAutomatic, onerror=caught)
        self._display.sync()
        if caught.get_error() is not None:
            self.note(
                "capture",
                f"Composite redirection refused ({caught.get_error()}); "
                "a window capture shows whatever covers the window",
            )
            return False
        return True

    def _window_area(self, window_id: int, include_frame: bool) -> tuple[Frame, Bounds]:
        """The window's top-level frame, and the part of it to keep in frame-pixmap coordinates."""
        if not 0 < window_id <= MAX_XID or window_id == self._root.id:
            raise self._window_not_found(window_id)
        try:
            window = self._display.create_resource_object("window", window_id)
            if window.get_attributes().map_state != X.IsViewable:
                raise DeskrigError(
                    ErrorCode.CAPTURE_FAILED,
                    "the window is not on screen (minimized or unmapped)",
                    details={"window_id": window_id},
                    remediation="Restore or map the window first, then capture it.",
                )
            frame = frame_of(self._root, window)
            if include_frame:
                return frame, Bounds(x=0, y=0, width=frame.bounds.width, height=frame.bounds.height)
            client = client_bounds(self._root, window)
        except VANISHED as exc:
            raise self._window_not_found(window_id) from exc
        # A frame pixmap starts at the outer corner of the frame's border.
        offset = client.model_copy(update={"x": client.x - frame.bounds.x, "y": client.y - frame.bounds.y})
        return frame, offset

    @staticmethod
    def _window_not_found(window_id: int) -> DeskrigError:
        return DeskrigError(
            ErrorCode.WINDOW_NOT_FOUND, f"no window with id {window_id}", details={"window_id": window_id}
        )

    def _capture_pixmap(self, toplevel: Window, crop: Bounds, window_id: int) -> Image.Image:
        caught = CatchError()
        pixmap = toplevel.composite_name_window_pixmap(onerror=caught)
        try:
            self._display.sync()
            error = caught.get_error()
            if isinstance(error, BadWindow):  # destroyed since we looked it up
                raise self._window_not_found(window_id) from error
            if error is not None:
                raise BackendError(
                    ErrorCode.CAPTURE_FAILED,
                    f"the window has no off-screen pixmap ({error})",
                    details={"window_id": window_id},
                )
            return xlib_get_image(pixmap, crop.x, crop.y, crop.width, crop.height).image()
        finally:
            pixmap.free()

    def _randr_version(self) -> tuple[int, int]:
        version = self._display.xrandr_query_version()
        return version.major_version, version.minor_version

    def _monitor_name(self, atom: int) -> str:
        name = self._monitor_names.get(atom)
        if name is None:
            name = self._monitor_names[atom] = self._display.get_atom_name(atom)
        return name

    def _randr_monitors(self) -> list[tuple[str, Bounds, bool]]:
        return [
            (
                self._monitor_name(monitor.name),
                Bounds(
                    x=monitor.x, y=monitor.y, width=monitor.width_in_pixels, height=monitor.height_in_pixels
                ),
                bool(monitor.primary),
            )
            for monitor in self._root.xrandr_get_monitors(is_active=True).monitors
        ]
