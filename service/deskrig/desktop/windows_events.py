"""SendInput's mouse events, and packing key and mouse events into the INPUT array it takes.

Absolute pointer positions travel as normalised coordinates: with ``MOUSEEVENTF_ABSOLUTE |
MOUSEEVENTF_VIRTUALDESK``, 0..65535 spans the whole virtual desktop (every monitor, whose origin
may be negative), and Windows puts the pointer at pixel ``left + n * width // 65536``. Rounding the
pixel up into that scale (:func:`normalise`) makes the round trip exact for every pixel of any
desktop narrower than 65536 pixels; the backend still checks where the pointer landed.

Pure logic over ``windows_structs``: unit-tested on any platform.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

from deskrig.desktop import windows_structs as w
from deskrig.desktop.input_limits import ButtonName, ScrollDirection
from deskrig.desktop.windows_keys import KeyEvent
from deskrig.model import Bounds

#: The normalised coordinate space's size: 0..65535.
NORMALISED = 65536

_BUTTON_FLAGS: dict[ButtonName, tuple[int, int]] = {
    "left": (w.MOUSEEVENTF_LEFTDOWN, w.MOUSEEVENTF_LEFTUP),
    "right": (w.MOUSEEVENTF_RIGHTDOWN, w.MOUSEEVENTF_RIGHTUP),
    "middle": (w.MOUSEEVENTF_MIDDLEDOWN, w.MOUSEEVENTF_MIDDLEUP),
}


@dataclass(frozen=True)
class MouseEvent:
    """One MOUSEINPUT: a position (normalised, with MOUSEEVENTF_ABSOLUTE), wheel data, flags."""

    dx: int = 0
    dy: int = 0
    data: int = 0
    flags: int = 0


def normalise_axis(pixel: int, origin: int, size: int) -> int:
    """A pixel on one axis of the virtual desktop as 0..65535 (see the module docstring)."""
    return -(-(pixel - origin) * NORMALISED // size)  # ceil((pixel - origin) * 65536 / size)


def pixel_of(normalised: int, origin: int, size: int) -> int:
    """Where Windows puts the pointer for a normalised coordinate (the inverse of :func:`normalise_axis`)."""
    return origin + normalised * size // NORMALISED


def normalise(x: int, y: int, desktop: Bounds) -> tuple[int, int]:
    return normalise_axis(x, desktop.x, desktop.width), normalise_axis(y, desktop.y, desktop.height)


def move_event(x: int, y: int, desktop: Bounds) -> MouseEvent:
    """Move the pointer to screen pixel (x, y) of ``desktop``, the virtual desktop's bounds."""
    dx, dy = normalise(x, y, desktop)
    flags = w.MOUSEEVENTF_MOVE | w.MOUSEEVENTF_ABSOLUTE | w.MOUSEEVENTF_VIRTUALDESK
    return MouseEvent(dx, dy, 0, flags)


def button_event(button: ButtonName, down: bool) -> MouseEvent:
    press, release = _BUTTON_FLAGS[button]
    return MouseEvent(flags=press if down else release)


def wheel_events(direction: ScrollDirection, amount: int) -> list[MouseEvent]:
    """One event per notch, as a wheel sends them. Up and right are positive deltas."""
    flags = w.MOUSEEVENTF_WHEEL if direction in ("up", "down") else w.MOUSEEVENTF_HWHEEL
    delta = w.WHEEL_DELTA if direction in ("up", "right") else -w.WHEEL_DELTA
    # mouseData is a DWORD: a negative delta travels as its two's complement.
    return [MouseEvent(data=delta & 0xFFFFFFFF, flags=flags)] * amount


def input_array(events: Sequence[KeyEvent | MouseEvent]) -> ctypes.Array[w.INPUT]:
    """The events as the INPUT array SendInput takes."""
    inputs = (w.INPUT * len(events))()
    for slot, event in zip(inputs, events, strict=True):
        if isinstance(event, KeyEvent):
            slot.type = w.INPUT_KEYBOARD
            slot.union.ki = w.KEYBDINPUT(event.vk, event.scan, event.flags, 0, 0)
        else:
            slot.type = w.INPUT_MOUSE
            slot.union.mi = w.MOUSEINPUT(event.dx, event.dy, event.data, event.flags, 0, 0)
    return inputs
