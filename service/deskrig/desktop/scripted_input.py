"""The scripted desktop's input device: every argument checked as the X11 device checks it
(``tests/desktop/test_contract.py`` holds both to the same refusals), then the event handed to the
desktop (:class:`deskrig.desktop.scripted.ScriptedDesktop`), which logs it and applies its effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from deskrig.desktop.base import InputJob
from deskrig.desktop.input_limits import (
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
from deskrig.desktop.keys import MODIFIER_KEYS, parse_combo, parse_hotkey, parse_modifier
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, Diagnostic, TypeReport

#: Characters a key types without any modifier other than Shift.
_TYPED_KEYS = {"Return": "\n", "KP_Enter": "\n", "Tab": "\t"}


@dataclass(frozen=True)
class InputEvent:
    """One pointer or keyboard event, as the desktop's log records it.

    ``window_id`` is where it landed, filled in by the desktop on delivery: the window under the
    point for pointer events, the focused window for keys and text (None: the root, nothing).
    """

    kind: Literal[
        "move", "button", "drag", "scroll", "key", "type", "key_down", "key_up", "button_down", "button_up"
    ]
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
    window_id: int | None = None


class InputSink(Protocol):
    """What the input device drives: the scripted desktop."""

    @property
    def pointer(self) -> tuple[int, int]: ...

    def screen_bounds(self) -> Bounds: ...

    def deliver(self, event: InputEvent, typed: str = "") -> None:
        """Log ``event`` where it lands and apply it; ``typed`` goes to the focused window."""


class ScriptedInput:
    """The :class:`~deskrig.desktop.base.InputDevice` of a scripted desktop: validates every
    argument as the X11 device does, then hands the event to the desktop."""

    def __init__(self, world: InputSink) -> None:
        self.world = world
        self.diagnostics: list[Diagnostic] = []
        self._closed = False
        #: What key_down and mouse_down hold: a click's event carries the held modifiers.
        self.held_keys: list[str] = []
        self.held_buttons: set[str] = set()

    def _open(self) -> InputSink:
        if self._closed:
            raise DeskrigError(ErrorCode.INPUT_FAILED, "the input connection is closed")
        return self.world

    def _check_point(self, x: object, y: object) -> tuple[int, int]:
        return check_point(x, y, self.world.screen_bounds())

    def move(self, x: int, y: int) -> None:
        world = self._open()
        point = self._check_point(x, y)
        world.deliver(InputEvent("move", *point))

    def button(
        self, x: int, y: int, button: ButtonName = "left", count: int = 1, modifiers: Sequence[str] = ()
    ) -> None:
        check_not_held(check_button(button), self.held_buttons)
        check_range("count", count, 1, MAX_CLICKS)
        held = (*self.held_keys, *(parse_modifier(m) for m in modifiers))
        world = self._open()
        point = self._check_point(x, y)
        world.deliver(InputEvent("button", *point, button=button, count=count, modifiers=held))

    def drag(
        self,
        from_xy: tuple[int, int],
        to_xy: tuple[int, int],
        button: ButtonName = "left",
        duration_ms: int = 300,
        steps: int = 10,
    ) -> None:
        check_not_held(check_button(button), self.held_buttons)
        check_range("duration_ms", duration_ms, 0, MAX_DURATION_MS)
        check_range("steps", steps, 1, MAX_DRAG_STEPS)
        world = self._open()
        start, end = self._check_point(*from_xy), self._check_point(*to_xy)
        world.deliver(InputEvent("drag", *start, button=button, count=steps, to=end))

    def scroll(self, x: int | None, y: int | None, direction: ScrollDirection, amount: int) -> None:
        check_scroll(direction, amount, x, y)
        world = self._open()
        point = self._check_point(x, y) if x is not None else world.pointer
        world.deliver(InputEvent("scroll", *point, count=amount, keys=(direction,)))

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
        world.deliver(InputEvent("key", keys=tuple(names)), typed=typed)

    def type_text(self, text: str, delay_ms: int = 0, job: InputJob | None = None) -> TypeReport:
        """Type ``text`` into the focused window, in chunks that check ``job`` for cancellation.

        The report says ``xtest``: the fake stands in for synthetic key events."""
        check_text(text, delay_ms)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        world = self._open()
        for start in range(0, len(text), TYPE_CHUNK):
            chunk = text[start : start + TYPE_CHUNK]
            world.deliver(InputEvent("type", text=chunk), typed=chunk)
            if job is not None:
                job.done = start + len(chunk)
                job.check(len(text))
        return TypeReport(chars=len(text), path="xtest")

    def key_down(self, key: str) -> None:
        self._open().deliver(InputEvent("key_down", keys=(key,)))
        self.held_keys.append(key)

    def key_up(self, key: str) -> None:
        if key not in self.held_keys:
            raise invalid(f"key {key} is not held down", key=key)
        self._open().deliver(InputEvent("key_up", keys=(key,)))
        self.held_keys.remove(key)

    def button_down(self, button: ButtonName, x: int | None, y: int | None) -> None:
        check_not_held(check_button(button), self.held_buttons)
        check_point_pair(x, y)
        world = self._open()
        point = self._check_point(x, y) if x is not None else world.pointer
        world.deliver(InputEvent("button_down", *point, button=button, modifiers=tuple(self.held_keys)))
        self.held_buttons.add(button)

    def button_up(self, button: ButtonName, x: int | None, y: int | None) -> None:
        check_release(button, x, y, self.held_buttons)
        world = self._open()
        point = self._check_point(x, y) if x is not None else world.pointer
        world.deliver(InputEvent("button_up", *point, button=button, modifiers=tuple(self.held_keys)))
        self.held_buttons.discard(button)

    def close(self) -> None:
        self._closed = True
