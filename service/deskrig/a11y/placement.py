"""Element bounds in screen coordinates, whichever coordinates the toolkit reports.

AT-SPI's "screen" extents are screen pixels from an X11 toolkit, but a native Wayland client is
never told where its surface is, so GTK under Wayland reports them relative to its window. The
desktop says where each window's accessibility coordinates start
(:meth:`deskrig.desktop.base.Desktop.a11y_origins`); here each element is matched to the window
of its top-level (the frame or dialog at the first step of its path, by title) and shifted by that
origin. Windows sharing a title are told apart by order: a toolkit lists its top-levels in the
order it created them, which the path step's ``nth`` keeps, and the desktop lists windows in that
order too. Nothing here knows which backend runs: on X11 no window is shifted and nothing moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from deskrig.a11y.tree import Element, PathStep
from deskrig.model import Point, WindowInfo


class WindowPlacement(Protocol):
    """Where windows' accessibility coordinates start (the Desktop facade)."""

    @property
    def a11y_in_screen_pixels(self) -> bool:
        """True where every window's accessibility coordinates start at the screen's origin."""
        ...

    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]: ...


def toplevels(elements: Iterable[Element]) -> set[PathStep]:
    """The top-levels (first path steps) that elements with bounds live in."""
    return {e.path[0] for e in elements if e.path and e.bounds is not None}


def _origin_of(shifted: Sequence[tuple[WindowInfo, Point]], toplevel: PathStep) -> Point | None:
    """The origin of the window showing ``toplevel``: of the windows with its title, the one as
    far down the creation order as the top-level is among its namesakes; with no window of its
    title (a popup menu's unnamed top-level), the app's only window."""
    titled = [origin for window, origin in shifted if window.title == toplevel.name]
    if titled:
        return titled[toplevel.nth] if toplevel.nth < len(titled) else None
    return shifted[0][1] if len(shifted) == 1 else None


def toplevel_origins(
    placement: WindowPlacement, pid: int, steps: Iterable[PathStep]
) -> dict[PathStep, Point]:
    """Blocking: the origin of each of ``pid``'s top-levels (``steps``) that is not the screen's.

    A top-level with no window to match is left out: its elements keep the coordinates the
    toolkit gave.
    """
    shifted = placement.a11y_origins(pid)
    if not shifted:
        return {}
    origins = {step: _origin_of(shifted, step) for step in steps}
    return {step: origin for step, origin in origins.items() if origin is not None}


def placed(elements: list[Element], origins: dict[PathStep, Point]) -> list[Element]:
    """``elements`` with the bounds of those in a shifted top-level moved by its origin."""
    if not origins:
        return elements
    moved = []
    for element in elements:
        origin = origins.get(element.path[0]) if element.path and element.bounds else None
        if origin is not None and element.bounds is not None:
            bounds = element.bounds.model_copy(
                update={"x": element.bounds.x + origin.x, "y": element.bounds.y + origin.y}
            )
            element = element.model_copy(update={"bounds": bounds})
        moved.append(element)
    return moved
