"""Recorded macOS data structures (tests/native/data) and a Quartz stand-in built from them, for the
Linux unit tests of the macOS backend's logic."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PIL import Image

from deskrig.desktop.macos_windows import QuartzDisplay
from deskrig.model import Bounds

DATA = Path(__file__).resolve().parent / "data"


def load(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def quartz_displays(name: str = "displays_retina_and_external.json") -> list[QuartzDisplay]:
    return [QuartzDisplay(**display) for display in load(name)["displays"]]


class RecordedQuartz:
    """A ``macos.QuartzScreen`` answering from the recorded window list and displays; each window
    is painted one colour (its number's), with a title bar of another, so crops can be checked."""

    program = "Terminal"
    TITLE_BAR_COLOUR = (236, 236, 236)

    def __init__(self) -> None:
        recorded = load("cgwindowlist_sonoma.json")
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
        return (700, 30)

    def activate(self, pid: int, frame: Bounds) -> None:
        self.activated.append((pid, frame))

    def close(self) -> None:
        self.closed += 1
