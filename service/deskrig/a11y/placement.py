"""Element bounds in screen coordinates, whichever coordinates the toolkit reports.

AT-SPI's "screen" extents are screen pixels from an X11 toolkit, but a native Wayland client is
never told where its surface is, so GTK under Wayland reports them relative to its window. The
desktop says where each window's accessibility coordinates start
(:meth:`deskrig.desktop.base.Desktop.a11y_origins`); here each element is matched to the window
of its top-level (the frame or dialog at the first step of its path, by title) and shifted by that
origin. Nothing here knows which backend runs: on X11 no window is shifted and nothing moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from deskrig.a11y.tree import Element
from deskrig.model import Point, WindowInfo


class WindowPlacement(Protocol):
    """Where windows' accessibility coordinates start (the Desktop facade)."""

    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]: ...


def toplevel_names(elements: Iterable[Element]) -> set[str]:
    """The names of the top-levels that elements with bounds live in."""
    return {e.path[0].name for e in elements if e.path and e.bounds is not None}


def _origin_of(shifted: Sequence[tuple[WindowInfo, Point]], toplevel: str) -> Point | None:
    """The origin of the window showing ``toplevel``: the one with its title, or the only one."""
    titled = [origin for window, origin in shifted if window.title == toplevel]
    if len(titled) == 1:
        return titled[0]
    return shifted[0][1] if len(shifted) == 1 and not titled else None


def toplevel_origins(placement: WindowPlacement, pid: int, toplevels: Iterable[str]) -> dict[str, Point]:
    """Blocking: the origin of each of ``pid``'s named top-levels that is not the screen's.

    A top-level with no window to match (several windows share its title) is left out: its
    elements keep the coordinates the toolkit gave.
    """
    shifted = placement.a11y_origins(pid)
    if not shifted:
        return {}
    origins = {name: _origin_of(shifted, name) for name in toplevels}
    return {name: origin for name, origin in origins.items() if origin is not None}


def placed(elements: list[Element], origins: dict[str, Point]) -> list[Element]:
    """``elements`` with the bounds of those in a shifted top-level moved by its origin."""
    if not origins:
        return elements
    moved = []
    for element in elements:
        origin = origins.get(element.path[0].name) if element.path and element.bounds else None
        if origin is not None and element.bounds is not None:
            bounds = element.bounds.model_copy(
                update={"x": element.bounds.x + origin.x, "y": element.bounds.y + origin.y}
            )
            element = element.model_copy(update={"bounds": bounds})
        moved.append(element)
    return moved
