"""Shared command line and geometry log of the colour fixture apps (gtk_color.py, tk_color.py).

Runs under Debian's /usr/bin/python3, outside the project venv, so it uses the stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FixtureArgs:
    title: str
    color: str
    log: Path
    width: int
    height: int
    position: tuple[int, int] | None
    #: tk_color.py: the colour a click flips the window to (and back).
    toggle_to: str | None = None


def _size(text: str) -> tuple[int, int]:
    width, _, height = text.partition("x")
    return int(width), int(height)


def _position(text: str) -> tuple[int, int]:
    x, _, y = text.partition(",")
    return int(x), int(y)


def parse_args(description: str) -> FixtureArgs:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--title", required=True)
    parser.add_argument("--color", required=True, help="#RRGGBB painted over the whole client area")
    parser.add_argument("--log", required=True, type=Path, help="JSON lines: ready and geometry events")
    parser.add_argument("--size", type=_size, default=(240, 160), help="WxH of the client area")
    parser.add_argument("--pos", type=_position, default=None, help="X,Y requested position")
    parser.add_argument("--toggle-to", default=None, help="#RRGGBB a click flips to (tk_color.py)")
    ns = parser.parse_args()
    width, height = ns.size
    return FixtureArgs(ns.title, ns.color, ns.log, width, height, ns.pos, ns.toggle_to)


class GeometryLog:
    """Appends one JSON line per event; repeats of an unchanged geometry are not logged."""

    def __init__(self, path: Path, title: str) -> None:
        self._path = path
        self._title = title
        self._ready = False
        self._last: tuple[int, int, int, int] | None = None

    @property
    def ready(self) -> bool:
        return self._ready

    def ready_at(self, x: int, y: int, width: int, height: int) -> None:
        self._ready = True
        self._write("ready", (x, y, width, height))

    def geometry(self, x: int, y: int, width: int, height: int) -> None:
        """Log a configure change, once the window has been reported ready."""
        if self._ready and (x, y, width, height) != self._last:
            self._write("geometry", (x, y, width, height))

    def _write(self, event: str, rect: tuple[int, int, int, int]) -> None:
        self._last = rect
        x, y, width, height = rect
        line = json.dumps(
            {"event": event, "pid": os.getpid(), "title": self._title}
            | {"x": x, "y": y, "width": width, "height": height}
        )
        # One write of a whole line in append mode; a reader may still catch part of it (tests.polling.json_lines).
        with self._path.open("a", encoding="utf-8") as log:
            log.write(line + "\n")
