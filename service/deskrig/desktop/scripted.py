"""A scripted, in-memory desktop: the fake that ships with the :class:`DesktopBackend` interface.

Like httpx's ``MockTransport``, it lets the layers above the platform (tools, capture, recording)
be tested without an X server. A test builds a :class:`ScriptedDesktop` (displays, then windows
with their pixels), opens a :class:`~deskrig.desktop.base.Desktop` facade over it with
:meth:`ScriptedDesktop.open`, and afterwards asserts on the desktop's state and on
:attr:`ScriptedDesktop.events`, the log of every pointer and keyboard event delivered.

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
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from PIL import Image

from deskrig.desktop.base import Desktop, DesktopBackend, InputJob
from deskrig.desktop.keys import MODIFIER_KEYS, parse_combo, parse_hotkey, parse_modifier
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import (
    FIRST_DISPLAY_ID,
    Bounds,
    CursorPosition,
    Diagnostic,
    DisplayInfo,
    TypeReport,
    WindowInfo,
)

RGB = tuple[int, int, int]
ButtonName = Literal["left", "right", "middle"]
ScrollDirection = Literal["up", "down", "left", "right"]

#: What the screen shows where no window is (a plain root window).
BACKGROUND: RGB = (0, 0, 0)
#: The colour of window decorations, when windows have a frame.
FRAME_COLOR: RGB = (60, 60, 60)
#: X resource ids look like this; any positive integer would do.
FIRST_WINDOW_ID = 0x400001

#: The ranges of the input calls' numbers, as the X11 input device has them
#: (deskrig.desktop.x11_input); tests/desktop/test_contract.py checks both refuse the same values.
LIMITS: dict[str, tuple[int, int]] = {
    "count": (1, 10),
    "duration_ms": (0, 60_000),
    "steps": (1, 1000),
    "amount": (1, 50),
    "delay_ms": (0, 1000),
}
MAX_TEXT_LENGTH = 100_000
#: type_text checks for cancellation after this many characters, like the X11 device's chunks.
TYPE_CHUNK = 32
BUTTONS: tuple[ButtonName, ...] = ("left", "middle", "right")
SCROLL_DIRECTIONS: tuple[ScrollDirection, ...] = ("up", "down", "left", "right")
#: Characters a key types without any modifier other than Shift.
_TYPED_KEYS = {"Return": "\n", "KP_Enter": "\n", "Tab": "\t"}


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


@dataclass(frozen=True)
class InputEvent:
    """One delivered pointer or keyboard event, as the log records it.

    ``window_id`` is where it landed: the window under the point for pointer events, the focused
    window for keys and text (None: the root, nothing).
    """

    kind: Literal["move", "button", "drag", "scroll", "key", "type"]
    window_id: int | None
    x: int | None = None
    y: int | None = None
    button: str | None = None
    count: int = 1
    modifiers: tuple[str, ...] = ()
    #: drag: where the button was released.
    to: tuple[int, int] | None = None
    #: scroll: the direction; key: the canonical key names pressed together.
    keys: tuple[str, ...] = ()
    text: str = ""


def _invalid(message: str, **details: object) -> DeskrigError:
    return DeskrigError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def _within_limits(**values: object) -> None:
    """INVALID_ARGUMENT for the first value outside its :data:`LIMITS` (a bool is no number here)."""
    for name, value in values.items():
        low, high = LIMITS[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _invalid(f"{name} must be an integer from {low} to {high}", **{name: value})


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

    # -- scripting the world ----------------------------------------------------------------------

    def open(self) -> Desktop:
        """A facade over this desktop, with its input device, as ``open_desktop`` returns one."""
        return Desktop(ScriptedBackend(self), ScriptedInput(self))

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
    ) -> ScriptedWindow:
        """Map a new window on top, filled with ``color`` (or showing ``pixels``); focused unless not ``focus``."""
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

    def close_window(self, window_id: int) -> None:
        with self._lock:
            self._stack.remove(self.window(window_id))
            if self._focused == window_id:
                self._focused = None
            self._changed()

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

    def deliver(self, event: InputEvent, pointer: tuple[int, int] | None = None, typed: str = "") -> None:
        """Log ``event``; move the pointer; a press focuses what it lands on; ``typed`` goes to the focus."""
        with self._lock:
            if pointer is not None:
                self._pointer = pointer
            if event.kind in ("button", "drag") and event.window_id is not None:
                self.activate(event.window_id)
            focused = self.focused
            if typed and focused is not None:
                for char in typed:
                    focused.text = focused.text[:-1] if char == "\b" else focused.text + char
                self._changed()
            self.events.append(event)

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

    def __init__(self, world: ScriptedDesktop) -> None:
        super().__init__()
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

    def damage_serial(self) -> int:
        return self.world.damage_serial()

    def close(self) -> None:
        self.closed = True


class ScriptedInput:
    """The :class:`~deskrig.desktop.base.InputDevice` of a :class:`ScriptedDesktop`: validates every
    argument as the X11 device does, then logs the event and applies its effect."""

    def __init__(self, world: ScriptedDesktop) -> None:
        self.world = world
        self.diagnostics: list[Diagnostic] = []
        self._closed = False

    def _open(self) -> ScriptedDesktop:
        if self._closed:
            raise DeskrigError(ErrorCode.INPUT_FAILED, "the input connection is closed")
        return self.world

    def _check_point(self, x: object, y: object) -> tuple[int, int]:
        screen = self.world.screen_bounds()
        if (
            isinstance(x, bool)
            or isinstance(y, bool)
            or not isinstance(x, int)
            or not isinstance(y, int)
            or not screen.contains(x, y)
        ):
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                f"point ({x}, {y}) is not on the {screen.width}x{screen.height} screen",
                details={"x": x, "y": y, "screen": {"width": screen.width, "height": screen.height}},
                remediation="Use coordinates inside the screen (see get_screen_size).",
            )
        return x, y

    def _target(self, x: int, y: int) -> int | None:
        window = self.world.window_under(x, y)
        return window.id if window is not None else None

    def _focus_id(self) -> int | None:
        focused = self.world.focused
        return focused.id if focused is not None else None

    @staticmethod
    def _button(button: str) -> str:
        if button not in BUTTONS:
            raise _invalid(f"unknown mouse button {button!r}", button=button, allowed=list(BUTTONS))
        return button

    def move(self, x: int, y: int) -> None:
        world = self._open()
        point = self._check_point(x, y)
        world.deliver(InputEvent("move", self._target(*point), *point), pointer=point)

    def button(
        self, x: int, y: int, button: ButtonName = "left", count: int = 1, modifiers: Sequence[str] = ()
    ) -> None:
        self._button(button)
        _within_limits(count=count)
        held = tuple(parse_modifier(m) for m in modifiers)
        world = self._open()
        point = self._check_point(x, y)
        event = InputEvent("button", self._target(*point), *point, button=button, count=count, modifiers=held)
        world.deliver(event, pointer=point)

    def drag(
        self,
        from_xy: tuple[int, int],
        to_xy: tuple[int, int],
        button: ButtonName = "left",
        duration_ms: int = 300,
        steps: int = 10,
    ) -> None:
        self._button(button)
        _within_limits(duration_ms=duration_ms, steps=steps)
        world = self._open()
        start, end = self._check_point(*from_xy), self._check_point(*to_xy)
        event = InputEvent("drag", self._target(*start), *start, button=button, count=steps, to=end)
        world.deliver(event, pointer=end)

    def scroll(self, x: int | None, y: int | None, direction: ScrollDirection, amount: int) -> None:
        if direction not in SCROLL_DIRECTIONS:
            raise _invalid(
                f"unknown scroll direction {direction!r}",
                direction=direction,
                allowed=list(SCROLL_DIRECTIONS),
            )
        _within_limits(amount=amount)
        if (x is None) != (y is None):
            raise _invalid("give both x and y, or neither", x=x, y=y)
        world = self._open()
        point = self._check_point(x, y) if x is not None else world.pointer
        event = InputEvent("scroll", self._target(*point), *point, count=amount, keys=(direction,))
        world.deliver(event, pointer=point)

    def press_key(self, key: str, modifiers: Sequence[str] = ()) -> None:
        self._chord(parse_combo(key, list(modifiers)).keys)

    def hotkey(self, keys: Sequence[str]) -> None:
        self._chord(parse_hotkey(list(keys)))

    def _chord(self, names: list[str]) -> None:
        world = self._open()
        *held, last = names
        typed = ""
        if all(name.startswith("Shift") for name in held) and last not in MODIFIER_KEYS:
            char = last.upper() if held and len(last) == 1 else last
            typed = "\b" if last == "BackSpace" else _TYPED_KEYS.get(last, char if len(char) == 1 else "")
        world.deliver(InputEvent("key", self._focus_id(), keys=tuple(names)), typed=typed)

    def type_text(self, text: str, delay_ms: int = 0, job: InputJob | None = None) -> TypeReport:
        """Type ``text`` into the focused window, in chunks that check ``job`` for cancellation.

        The report says ``xtest``: the fake stands in for synthetic key events."""
        if not isinstance(text, str) or len(text) > MAX_TEXT_LENGTH:
            raise _invalid(f"text must be a string of at most {MAX_TEXT_LENGTH} characters")
        _within_limits(delay_ms=delay_ms)
        bad = [
            {"index": index, "codepoint": f"U+{ord(ch):04X}"}
            for index, ch in enumerate(text)
            if ch not in "\n\r\t" and unicodedata.category(ch) in ("Cc", "Cs")
        ]
        if bad:
            raise _invalid("text contains characters no key types", characters=bad[:20])
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        world = self._open()
        event = InputEvent("type", self._focus_id())
        for start in range(0, len(text), TYPE_CHUNK):
            chunk = text[start : start + TYPE_CHUNK]
            world.deliver(replace(event, text=chunk), typed=chunk)
            if job is not None:
                job.done = start + len(chunk)
                job.check(len(text))
        return TypeReport(chars=len(text), path="xtest")

    def close(self) -> None:
        self._closed = True
