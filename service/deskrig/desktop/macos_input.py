"""Pointer and keyboard input on macOS as Quartz events, over an :class:`EventSink`.

This module decides what to post (validation first, as every backend does, then the events in
order); ``macos_quartz.QuartzEvents`` posts them (``CGEventCreateMouseEvent``,
``CGEventCreateKeyboardEvent`` with ``CGEventKeyboardSetUnicodeString``, ``CGEventPost`` to the
HID tap). Without the Accessibility permission macOS silently drops posted events, so every call
checks it first and fails PERMISSION_DENIED instead. The logic runs on Linux against a recording
sink (tests/native/test_macos_input.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Literal, Protocol

from deskrig.desktop.base import InputJob
from deskrig.desktop.input_limits import (
    BUTTON_NAMES,
    CLICK_INTERVAL_S,
    MAX_CLICKS,
    MAX_DRAG_STEPS,
    MAX_DURATION_MS,
    TYPE_CHUNK,
    ButtonName,
    ScrollDirection,
    check_button,
    check_not_held,
    check_point,
    check_point_pair,
    check_range,
    check_release,
    check_scroll,
    check_text,
    invalid,
)
from deskrig.desktop.keys import parse_combo, parse_hotkey, parse_key, parse_modifier
from deskrig.desktop.macos_keys import MacKey, chord_flags, mac_key, text_strokes
from deskrig.desktop.macos_windows import accessibility_denied
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, Diagnostic, TypeReport

MouseAction = Literal["move", "down", "up", "drag"]

#: Wheel lines per direction: Quartz's wheel 1 is vertical (positive: up), wheel 2 horizontal
#: (positive: left).
#: How long a move waits for macOS to report the pointer where it was sent.
POINTER_SETTLE_TIMEOUT_S = 1.0
_SCROLL_LINES: dict[str, tuple[int, int]] = {"up": (1, 0), "down": (-1, 0), "left": (0, 1), "right": (0, -1)}


class EventSink(Protocol):
    """Where Quartz events go (``macos_quartz.QuartzEvents``); blocking, one caller at a time."""

    #: The program macOS grants permissions to, for the remediation text.
    program: str

    def input_allowed(self) -> bool:
        """Whether macOS delivers synthetic events from this process (``AXIsProcessTrusted``)."""
        ...

    def screen(self) -> Bounds:
        """The union of the displays, in points."""
        ...

    def cursor(self) -> tuple[int, int]: ...

    def mouse(self, action: MouseAction, x: int, y: int, button: ButtonName, clicks: int, flags: int) -> None:
        """One mouse event at (x, y); ``clicks`` is the click count a down/up pair belongs to."""
        ...

    def scroll(self, vertical: int, horizontal: int) -> None:
        """One scroll-wheel event of whole lines."""
        ...

    def key(self, code: int, down: bool, flags: int, text: str) -> None:
        """One keyboard event of virtual key ``code`` carrying ``text`` ("" for none)."""
        ...

    def close(self) -> None: ...


class MacOSInput:
    """The InputDevice of the macOS backend. Not thread-safe: the Desktop facade serialises calls."""

    def __init__(self, sink: EventSink) -> None:
        self._sink = sink
        self.diagnostics: list[Diagnostic] = []
        self._held_buttons: set[str] = set()
        self._held_keys: dict[str, MacKey] = {}
        self._closed = False

    # -- pointer --------------------------------------------------------------------------------

    def move(self, x: int, y: int) -> None:
        with self._delivering("move the pointer"):
            self._move_to(*self._point(x, y))

    def button(
        self,
        x: int,
        y: int,
        button: ButtonName = "left",
        count: int = 1,
        modifiers: Sequence[str] = (),
    ) -> None:
        """Click ``count`` times at (x, y) (the events' click state counts up, so 2 is a double
        click) with ``modifiers`` in the events' flags."""
        check_button(button)
        check_not_held(button, self._held_buttons)
        check_range("count", count, 1, MAX_CLICKS)
        flags = chord_flags([parse_modifier(m) for m in modifiers]) | self._held_flags()
        with self._delivering("click"):
            x, y = self._point(x, y)
            self._move_to(x, y)
            for click in range(1, count + 1):
                if click > 1:
                    time.sleep(CLICK_INTERVAL_S)
                self._sink.mouse("down", x, y, button, click, flags)
                self._sink.mouse("up", x, y, button, click, flags)

    def drag(
        self,
        from_xy: tuple[int, int],
        to_xy: tuple[int, int],
        button: ButtonName = "left",
        duration_ms: int = 300,
        steps: int = 10,
    ) -> None:
        """Press at ``from_xy``, drag in ``steps`` even steps over ``duration_ms``, release at ``to_xy``."""
        check_button(button)
        check_not_held(button, self._held_buttons)
        check_range("duration_ms", duration_ms, 0, MAX_DURATION_MS)
        check_range("steps", steps, 1, MAX_DRAG_STEPS)
        with self._delivering("drag"):
            x0, y0 = self._point(*from_xy)
            x1, y1 = self._point(*to_xy)
            flags = self._held_flags()
            self._move_to(x0, y0)
            self._sink.mouse("down", x0, y0, button, 1, flags)
            try:
                for step in range(1, steps + 1):
                    time.sleep(duration_ms / steps / 1000)  # toolkits tell drags from flicks by speed
                    x, y = round(x0 + (x1 - x0) * step / steps), round(y0 + (y1 - y0) * step / steps)
                    self._sink.mouse("drag", x, y, button, 1, flags)
            finally:
                self._sink.mouse("up", x1, y1, button, 1, flags)

    def scroll(self, x: int | None, y: int | None, direction: ScrollDirection, amount: int) -> None:
        """``amount`` wheel lines, at (x, y) if given, else where the pointer is."""
        vertical, horizontal = _SCROLL_LINES[check_scroll(direction, amount, x, y)]
        with self._delivering("scroll"):
            if x is not None and y is not None:
                self._move_to(*self._point(x, y))
            for _ in range(amount):
                self._sink.scroll(vertical, horizontal)

    def button_down(self, button: ButtonName, x: int | None, y: int | None) -> None:
        check_button(button)
        check_not_held(button, self._held_buttons)
        check_point_pair(x, y)
        with self._delivering("mouse_down"):
            at = self._point(x, y) if x is not None and y is not None else self._sink.cursor()
            self._sink.mouse("down", *at, button, 1, self._held_flags())
        self._held_buttons.add(button)

    def button_up(self, button: ButtonName, x: int | None, y: int | None) -> None:
        check_button(button)
        check_release(button, x, y, self._held_buttons)
        with self._delivering("mouse_up"):
            at = self._point(x, y) if x is not None and y is not None else self._sink.cursor()
            self._sink.mouse("drag", *at, button, 1, self._held_flags())
            self._sink.mouse("up", *at, button, 1, self._held_flags())
        self._held_buttons.discard(button)

    # -- keys -----------------------------------------------------------------------------------

    def press_key(self, key: str, modifiers: Sequence[str] = ()) -> None:
        """One key ("Return", "F5", "a") or combination ("cmd+s"), plus extra held ``modifiers``."""
        self._chord(parse_combo(key, list(modifiers)).keys)

    def hotkey(self, keys: Sequence[str]) -> None:
        """Two or more keys: pressed in order, released in reverse."""
        self._chord(parse_hotkey(list(keys)))

    def _chord(self, names: list[str]) -> None:
        keys = [mac_key(name, in_chord=len(names) > 1) for name in names]
        with self._delivering("press keys"):
            flags = [self._held_flags()]
            for key in keys:  # each key goes down with the flags of those before it and its own
                flags.append(flags[-1] | key.flags)
                self._sink.key(key.code, True, flags[-1], key.text)
            for key, held in zip(reversed(keys), reversed(flags[:-1]), strict=True):
                self._sink.key(key.code, False, held, key.text)

    def key_down(self, key: str) -> None:
        """Press one key and leave it down; its flag goes with every event until :meth:`key_up`."""
        name = parse_key(key)  # held keys are booked by canonical name: their flags are looked up by it
        pressed = mac_key(name)
        with self._delivering("key_down"):
            self._sink.key(pressed.code, True, self._held_flags() | pressed.flags, pressed.text)
        self._held_keys[name] = pressed

    def key_up(self, key: str) -> None:
        name = parse_key(key)
        pressed = self._held_keys.get(name)
        if pressed is None:
            raise invalid(f"key {key} is not held down", key=key)
        del self._held_keys[name]
        with self._delivering("key_up"):
            self._sink.key(pressed.code, False, self._held_flags(), pressed.text)

    def type_text(self, text: str, delay_ms: int = 0, job: InputJob | None = None) -> TypeReport:
        """Type ``text`` exactly, whatever the layout: characters ride on the events (``\\n`` is
        Return, ``\\t`` is Tab). With ``delay_ms`` each character is its own event, that long apart."""
        check_text(text, delay_ms)
        normal = text.replace("\r\n", "\n")
        strokes = [s for ch in normal for s in text_strokes(ch)] if delay_ms else text_strokes(normal)
        with self._delivering("type text"):
            typed = 0
            for number, stroke in enumerate(strokes, start=1):
                self._sink.key(stroke.code, True, 0, stroke.text)
                self._sink.key(stroke.code, False, 0, stroke.text)
                typed += len(stroke.text) or 1
                if delay_ms:
                    time.sleep(delay_ms / 1000)
                if job is not None and (delay_ms or number % TYPE_CHUNK == 0):
                    job.done = typed
                    job.check(len(normal))
        return TypeReport(chars=len(normal), path="quartz")

    # -- shared ---------------------------------------------------------------------------------

    def _held_flags(self) -> int:
        return chord_flags(list(self._held_keys))

    def _move_to(self, x: int, y: int) -> None:
        """Move the pointer (dragging whatever button mouse_down holds) and wait until macOS reports
        it there: the window server applies posted events asynchronously, and a click or a
        cursor read that overtook the move would happen where the pointer was."""
        held = next((b for b in BUTTON_NAMES if b in self._held_buttons), None)
        if held is None:
            self._sink.mouse("move", x, y, "left", 0, self._held_flags())
        else:
            self._sink.mouse("drag", x, y, held, 1, self._held_flags())
        deadline = time.monotonic() + POINTER_SETTLE_TIMEOUT_S
        while self._sink.cursor() != (x, y):
            if time.monotonic() > deadline:
                self.diagnostics.append(
                    Diagnostic(
                        component="pointer",
                        message=f"the pointer was not reported at ({x}, {y}) {POINTER_SETTLE_TIMEOUT_S:g} s "
                        "after it was moved there",
                    )
                )
                return
            time.sleep(0.001)

    def _point(self, x: int, y: int) -> tuple[int, int]:
        return check_point(x, y, self._sink.screen())

    @contextmanager
    def _delivering(self, action: str) -> Iterator[None]:
        if self._closed:
            raise DeskrigError(ErrorCode.INPUT_FAILED, "the input device is closed")
        if not self._sink.input_allowed():
            raise accessibility_denied(self._sink.program, action)
        yield

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._sink.close()
