"""A scripted, in-memory desktop: the fake that ships with the :class:`DesktopBackend` interface.

Like httpx's ``MockTransport``, it lets the layers above the platform (tools, capture, recording)
be tested without an X server. A test builds a :class:`ScriptedDesktop` (displays, then windows
with their pixels), opens a :class:`~deskrig.desktop.base.Desktop` facade over it with
:meth:`ScriptedDesktop.open` (its input device is ``scripted_input.ScriptedInput``), and afterwards
asserts on the desktop's state and on :attr:`ScriptedDesktop.events`, the log of every pointer and
keyboard event delivered.

It keeps the contract the X11 backend keeps (``tests/desktop/test_contract.py`` runs the same
assertions against both): displays numbered from 1, the primary first; windows top-most first;
captures clipped to the screen and INVALID_REGION outside it; a window's own pixels even where
another window covers it; WINDOW_NOT_FOUND for unknown ids; CAPTURE_FAILED for a minimized
window; input validated in full (INVALID_ARGUMENT, nothing delivered) before anything happens.

It behaves like a desktop under a click-to-focus window manager: a click (or the press of a drag)
raises and focuses the window under the pointer, typed text and keys go to the focused window
(appended to its :attr:`ScriptedWindow.text`), and every change moves the damage serial on.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from PIL import Image

from deskrig.desktop.base import Desktop, DesktopBackend
from deskrig.desktop.clipboard import MemorySelections
from deskrig.desktop.scripted_input import InputEvent, ScriptedInput
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import (
    FIRST_DISPLAY_ID,
    Bounds,
    CursorPosition,
    DisplayInfo,
    Point,
    WindowInfo,
)

RGB = tuple[int, int, int]

#: What the screen shows where no window is (a plain root window).
BACKGROUND: RGB = (0, 0, 0)
#: The colour of window decorations, when windows have a frame.
FRAME_COLOR: RGB = (60, 60, 60)
#: X resource ids look like this; any positive integer would do.
FIRST_WINDOW_ID = 0x400001


@dataclass(frozen=True)
class Insets:
    """How far a window's frame (decoration) reaches beyond its client area on each side."""

    top: int = 0
    left: int = 0
    right: int = 0
    bottom: int = 0


#: A window manager's look: a title bar and a one-pixel border, as openbox draws them.
MANAGED_FRAME = Insets(top=20, left=1, right=1, bottom=1)


@dataclass
class ScriptedWindow:
    """One top-level window: what ``windows()`` reports, plus its own pixels and typed text.

    Read it freely; change it through :class:`ScriptedDesktop`'s methods, which move the damage
    serial on (a capture of an unchanged screen may be served from cache).
    """

    id: int
    title: str
    app: str
    pid: int | None
    bounds: Bounds
    pixels: Image.Image
    frame: Insets = field(default_factory=Insets)
    minimized: bool = False
    #: Whether its toolkit reports accessibility positions relative to the window, as native
    #: Wayland clients do, rather than to the screen.
    a11y_window_relative: bool = False
    #: Everything typed into the window while it had the focus (Return is "\n", BackSpace deletes).
    text: str = ""

    @property
    def frame_bounds(self) -> Bounds:
        b, f = self.bounds, self.frame
        return Bounds(
            x=b.x - f.left,
            y=b.y - f.top,
            width=b.width + f.left + f.right,
            height=b.height + f.top + f.bottom,
        )

    def framed_pixels(self) -> Image.Image:
        """The window with its decoration, the size of :attr:`frame_bounds`."""
        outer = self.frame_bounds
        image = Image.new("RGB", (outer.width, outer.height), FRAME_COLOR)
        image.paste(self.pixels, (self.frame.left, self.frame.top))
        return image


def _window_not_found(window_id: int) -> DeskrigError:
    return DeskrigError(
        ErrorCode.WINDOW_NOT_FOUND, f"no window with id {window_id}", details={"window_id": window_id}
    )


class ScriptedDesktop:
    """The scripted world: displays, windows (top-most first), focus, pointer and the input log.

    Thread-safe: the facade serialises backend calls and input calls separately, so both may
    touch the world at once.
    """

    def __init__(
        self,
        displays: Iterable[tuple[str, Bounds]] = (("screen", Bounds(x=0, y=0, width=1280, height=800)),),
        *,
        primary: int = 0,
        frame: Insets | None = None,
    ) -> None:
        """``displays``: (name, bounds) of each monitor; ``primary``: the index of the primary one;
        ``frame``: the decoration of every window (default none, as without a window manager)."""
        self._monitors = list(displays)
        if not 0 <= primary < len(self._monitors):
            raise ValueError(f"primary must index one of the {len(self._monitors)} displays")
        self._primary = primary
        self._frame = frame or Insets()
        self._lock = threading.RLock()
        self._ids = itertools.count(FIRST_WINDOW_ID)
        #: Top-most first.
        self._stack: list[ScriptedWindow] = []
        self._focused: int | None = None
        self._pointer = (0, 0)
        self._serial = 0
        self._composite: tuple[int, Image.Image] | None = None
        #: Every pointer and keyboard event delivered, oldest first.
        self.events: list[InputEvent] = []
        #: The clipboard and primary selection.
        self.selections = MemorySelections()

    # -- scripting the world ----------------------------------------------------------------------

    def open(self) -> Desktop:
        """A facade over this desktop, with its input device, as ``open_desktop`` returns one."""
        return Desktop(ScriptedBackend(self), ScriptedInput(self), self.selections)

    def add_window(
        self,
        title: str,
        bounds: Bounds,
        color: RGB = (255, 255, 255),
        *,
        app: str = "scripted",
        pid: int | None = None,
        pixels: Image.Image | None = None,
        focus: bool = True,
        a11y_window_relative: bool = False,
    ) -> ScriptedWindow:
        """Map a new window on top, filled with ``color`` (or showing ``pixels``); focused unless not
        ``focus``. ``a11y_window_relative``: its toolkit reports accessibility positions relative to
        the window (native Wayland), see :meth:`ScriptedBackend.a11y_origins`."""
        with self._lock:
            window = ScriptedWindow(
                id=next(self._ids),
                title=title,
                app=app,
                pid=pid,
                bounds=bounds,
                pixels=self._fitted(pixels, bounds)
                if pixels is not None
                else Image.new("RGB", (bounds.width, bounds.height), color),
                frame=self._frame,
                a11y_window_relative=a11y_window_relative,
            )
            self._stack.insert(0, window)
            if focus:
                self._focused = window.id
            self._changed()
            return window

    def window(self, window_id: int) -> ScriptedWindow:
        """The window with this id; WINDOW_NOT_FOUND if there is none (any more)."""
        with self._lock:
            for window in self._stack:
                if window.id == window_id:
                    return window
            raise _window_not_found(window_id)

    def minimize(self, window_id: int) -> None:
        with self._lock:
            self.window(window_id).minimized = True
            if self._focused == window_id:
                self._focused = None
            self._changed()

    def move(self, window_id: int, bounds: Bounds) -> None:
        """Move or resize a window; its pixels are scaled to the new size."""
        with self._lock:
            window = self.window(window_id)
            window.pixels = self._fitted(window.pixels, bounds)
            window.bounds = bounds
            self._changed()

    def paint(self, window_id: int, pixels: Image.Image | RGB) -> None:
        """Repaint a window's client area: a colour, or an image of its size."""
        with self._lock:
            window = self.window(window_id)
            size = window.pixels.size
            window.pixels = (
                Image.new("RGB", size, pixels)
                if isinstance(pixels, tuple)
                else self._fitted(pixels, window.bounds)
            )
            self._changed()

    def activate(self, window_id: int) -> None:
        """Raise, un-minimise and focus a window, as a window manager does."""
        with self._lock:
            window = self.window(window_id)
            self._stack.remove(window)
            self._stack.insert(0, window)
            window.minimized = False
            self._focused = window_id
            self._changed()

    @property
    def focused(self) -> ScriptedWindow | None:
        with self._lock:
            return next((w for w in self._stack if w.id == self._focused), None)

    @property
    def pointer(self) -> tuple[int, int]:
        return self._pointer

    def set_displays(self, displays: Iterable[tuple[str, Bounds]], primary: int = 0) -> None:
        """Replace the monitors, as a screen resize (RandR, an output mode change) does."""
        with self._lock:
            monitors = list(displays)
            if not 0 <= primary < len(monitors):
                raise ValueError(f"primary must index one of the {len(monitors)} displays")
            self._monitors, self._primary = monitors, primary
            self._changed()

    # -- what the backend reads -------------------------------------------------------------------

    def displays(self) -> list[DisplayInfo]:
        order = sorted(range(len(self._monitors)), key=lambda index: index != self._primary)
        return [
            DisplayInfo(
                id=number,
                name=self._monitors[index][0],
                bounds=self._monitors[index][1],
                primary=index == self._primary,
            )
            for number, index in enumerate(order, start=FIRST_DISPLAY_ID)
        ]

    def screen_bounds(self) -> Bounds:
        """Like an X root window: from (0, 0) to the far corner of the furthest monitor."""
        return Bounds(
            x=0,
            y=0,
            width=max(bounds.right for _, bounds in self._monitors),
            height=max(bounds.bottom for _, bounds in self._monitors),
        )

    def windows(self) -> list[WindowInfo]:
        with self._lock:
            return [
                WindowInfo(
                    id=w.id,
                    title=w.title,
                    app=w.app,
                    pid=w.pid,
                    bounds=w.bounds,
                    frame_bounds=w.frame_bounds,
                    minimized=w.minimized,
                    focused=w.id == self._focused,
                    z_order=z_order,
                )
                for z_order, w in enumerate(self._stack)
            ]

    def screen_image(self) -> Image.Image:
        """The whole screen as shown: monitors' background, then windows from the bottom up."""
        with self._lock:
            if self._composite is not None and self._composite[0] == self._serial:
                return self._composite[1]
            screen = self.screen_bounds()
            image = Image.new("RGB", (screen.width, screen.height), (0, 0, 0))
            for _, bounds in self._monitors:
                image.paste(BACKGROUND, (bounds.x, bounds.y, bounds.right, bounds.bottom))
            for window in reversed(self._stack):
                if not window.minimized:
                    outer = window.frame_bounds
                    image.paste(window.framed_pixels(), (outer.x, outer.y))
            self._composite = (self._serial, image)
            return image

    def damage_serial(self) -> int:
        return self._serial

    def window_under(self, x: int, y: int) -> ScriptedWindow | None:
        with self._lock:
            return next((w for w in self._stack if not w.minimized and w.frame_bounds.contains(x, y)), None)

    # -- what the input device does ---------------------------------------------------------------

    def deliver(self, event: InputEvent, typed: str = "") -> None:
        """Log ``event`` with the window it lands on, move the pointer to where it ends, focus and
        raise the window a press lands on, and add ``typed`` to the focused window's text."""
        with self._lock:
            if event.x is not None and event.y is not None:
                self._pointer = event.to or (event.x, event.y)
                window = self.window_under(event.x, event.y)
            else:
                window = self.focused
            if event.kind in ("button", "drag", "button_down") and window is not None:
                self.activate(window.id)
            focused = self.focused
            if typed and focused is not None:
                for char in typed:
                    focused.text = focused.text[:-1] if char == "\b" else focused.text + char
                self._changed()
            self.events.append(replace(event, window_id=window.id if window is not None else None))

    def _changed(self) -> None:
        self._serial += 1

    @staticmethod
    def _fitted(pixels: Image.Image, bounds: Bounds) -> Image.Image:
        image = pixels.convert("RGB")
        return (
            image
            if image.size == (bounds.width, bounds.height)
            else image.resize((bounds.width, bounds.height))
        )


class ScriptedBackend(DesktopBackend):
    """The :class:`DesktopBackend` view of a :class:`ScriptedDesktop`."""

    name = "scripted"
    captures_show_pointer = False  # its screen image is the windows alone

    def __init__(self, world: ScriptedDesktop) -> None:
        super().__init__()
        self.window_capture_method = "model"
        self.world = world
        self.closed = False

    def displays(self) -> list[DisplayInfo]:
        return self.world.displays()

    def screen_bounds(self) -> Bounds:
        return self.world.screen_bounds()

    def windows(self) -> list[WindowInfo]:
        return self.world.windows()

    def capture(self, region: Bounds) -> Image.Image:
        screen = self.world.screen_bounds()
        visible = region.intersection(screen)
        if visible is None:
            raise DeskrigError(
                ErrorCode.INVALID_REGION,
                "the region lies outside the screen",
                details={"region": region.model_dump(), "screen": screen.model_dump()},
            )
        return self.world.screen_image().crop((visible.x, visible.y, visible.right, visible.bottom))

    def capture_window(self, window_id: int, include_frame: bool) -> Image.Image:
        window = self.world.window(window_id)
        if window.minimized:
            raise DeskrigError(
                ErrorCode.CAPTURE_FAILED,
                "the window is not on screen (minimized or unmapped)",
                details={"window_id": window_id},
                remediation="Restore or map the window first, then capture it.",
            )
        return window.framed_pixels() if include_frame else window.pixels.copy()

    def cursor_position(self) -> CursorPosition:
        x, y = self.world.pointer
        display_id = next((d.id for d in self.world.displays() if d.bounds.contains(x, y)), None)
        return CursorPosition(x=x, y=y, display_id=display_id)

    def activate_window(self, window_id: int) -> None:
        self.world.activate(window_id)

    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]:
        return [
            (w, Point(x=w.bounds.x, y=w.bounds.y))
            for w in sorted(self.world.windows(), key=lambda w: w.id)  # ids count up: oldest first
            if w.pid == pid and self.world.window(w.id).a11y_window_relative
        ]

    def damage_serial(self) -> int:
        return self.world.damage_serial()

    def close(self) -> None:
        self.closed = True
