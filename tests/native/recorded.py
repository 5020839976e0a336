"""Recorded macOS data structures (tests/native/data) and a Quartz stand-in built from them, for the
Linux unit tests of the macOS backend's logic."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PIL import Image

from deskrig.desktop.input_limits import ButtonName
from deskrig.desktop.macos_input import MouseAction
from deskrig.desktop.macos_windows import QuartzDisplay
from deskrig.model import Bounds

DATA = Path(__file__).resolve().parent / "data"
#: The recorded main display (a MacBook's built-in Retina panel), in points.
SCREEN = Bounds(x=0, y=0, width=1512, height=982)


def load(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def quartz_displays(name: str = "displays_retina_and_external.json") -> list[QuartzDisplay]:
    return [QuartzDisplay(**display) for display in load(name)["displays"]]


class RecordingSink:
    """An ``EventSink`` that records events instead of posting them."""

    program = "Terminal"

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.allowed = True
        self.closed = 0
        self.pointer = (300, 200)

    def input_allowed(self) -> bool:
        return self.allowed

    def screen(self) -> Bounds:
        return SCREEN

    def cursor(self) -> tuple[int, int]:
        return self.pointer

    def mouse(self, action: MouseAction, x: int, y: int, button: ButtonName, clicks: int, flags: int) -> None:
        self.events.append(("mouse", action, x, y, button, clicks, flags))
        self.pointer = (x, y)

    def scroll(self, vertical: int, horizontal: int) -> None:
        self.events.append(("scroll", vertical, horizontal))

    def key(self, code: int, down: bool, flags: int, text: str) -> None:
        self.events.append(("key", code, down, flags, text))

    def close(self) -> None:
        self.closed += 1


class MemoryPasteboard:
    def __init__(self, items: dict[str, bytes] | None = None) -> None:
        self.items = dict(items or {})

    def types(self) -> list[str]:
        return list(self.items)

    def data(self, pasteboard_type: str) -> bytes | None:
        return self.items.get(pasteboard_type)

    def replace(self, items: dict[str, bytes]) -> None:
        self.items = dict(items)


class RecordedQuartz:
    """A ``macos.QuartzScreen`` answering from the recorded window list and displays; each window
    is painted one colour (its number's), with a title bar of another, so crops can be checked."""

    program = "Terminal"
    TITLE_BAR_COLOUR = (236, 236, 236)

    def __init__(self, pointer_from: RecordingSink | None = None) -> None:
        recorded = load("cgwindowlist_sonoma.json")
        self._pointer_from = pointer_from
        self.entries: list[Mapping[str, Any]] = recorded["windows"]
        self.frontmost = int(recorded["frontmost_pid"])
        self.title_bar = int(recorded["title_bar"])
        self.screen_recording = True
        self.accessibility = True
        self.activated: list[tuple[int, Bounds]] = []
        self.images: list[tuple[Bounds | None, int | None]] = []
        self.closed = 0

    @staticmethod
    def colour_of(window_id: int) -> tuple[int, int, int]:
        return (window_id % 251, window_id // 251 % 251, 99)

    def screen_capture_allowed(self) -> bool:
        return self.screen_recording

    def input_allowed(self) -> bool:
        return self.accessibility

    def window_list(self) -> list[Mapping[str, Any]]:
        return self.entries

    def frontmost_pid(self) -> int | None:
        return self.frontmost

    def displays(self) -> list[QuartzDisplay]:
        return [QuartzDisplay(1, {"X": 0, "Y": 0, "Width": 1512, "Height": 982}, 3024, 1964, True)]

    def title_bar_height(self) -> int:
        return self.title_bar

    def image(self, region: Bounds | None, window_id: int | None) -> Image.Image | None:
        self.images.append((region, window_id))
        if window_id is None:
            assert region is not None
            return Image.new("RGBA", (region.width, region.height), (10, 20, 30, 255))
        entry = next(e for e in self.entries if e["kCGWindowNumber"] == window_id)
        frame = entry["kCGWindowBounds"]
        size = (round(frame["Width"]), round(frame["Height"]))
        picture = Image.new("RGB", size, self.colour_of(window_id))
        picture.paste(self.TITLE_BAR_COLOUR, (0, 0, size[0], self.title_bar))
        return picture

    def cursor(self) -> tuple[int, int]:
        return self._pointer_from.pointer if self._pointer_from is not None else (700, 30)

    def activate(self, pid: int, frame: Bounds) -> None:
        self.activated.append((pid, frame))

    def close(self) -> None:
        self.closed += 1
