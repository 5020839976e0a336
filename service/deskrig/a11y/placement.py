"""Element bounds in screen coordinates, whichever coordinates the toolkit reports.

AT-SPI's "screen" extents are screen pixels from an X11 toolkit, but a native Wayland client is
never told where its surface is, so GTK under Wayland reports them relative to its window. The
desktop says where each window's accessibility coordinates start
(:meth:`deskrig.desktop.base.Desktop.a11y_origins`); here each element is matched to the window
of its top-level (the frame or dialog at the first step of its path, by title) and shifted by that
origin. Windows sharing a title are told apart by order: a toolkit lists its top-levels in the
order it created them, which the path step's ``nth`` keeps, and the desktop lists windows in that
order too. Nothing here knows which backend runs: on X11 no window is shifted and nothing moves.

Popup menus (xdg_popup surfaces under Wayland) are top-levels of their own with no window of
their title. GTK 3 reports a popup relative to the GDK window it was anchored to:

- a menu opened from a widget (menu bar, combo box, menu button) is listed under that widget,
  in the frame's tree, and anchored to the frame's window: the frame's origin places it;
- a context menu, listed under its own top-level, is anchored to the pointer in the GDK window
  of the widget that was clicked (an entry's text area, a text view's text window), whose offset
  in the frame nothing reports. The compositor puts it at the pointer, so where the button was
  last pressed minus where GTK says the popup is gives its origin; unless the popup did not fit
  there (the compositor then flips or slides it), or that press cannot have opened it (the
  offset would lie outside the window): its elements' bounds are then unknown, never wrong.
  The press is also not the opener's when a key that opens a context menu (Shift+F10, the Menu
  key) went down after it (the desktop forgets it), or while a submenu of the menu is open
  (listed under its item, placed from the same origin): the last press may be the click that
  opened the submenu.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from deskrig.a11y.tree import Element, PathStep
from deskrig.model import Bounds, DisplayInfo, Point, WindowInfo

#: The role of a popup menu, under its own top-level when it was opened at the pointer.
_MENU_ROLE = "menu"


class WindowPlacement(Protocol):
    """Where windows' accessibility coordinates start, and where a pointer popup may be (the
    Desktop facade)."""

    @property
    def a11y_in_screen_pixels(self) -> bool:
        """True where every window's accessibility coordinates start at the screen's origin."""
        ...

    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]: ...

    def last_press(self) -> Point | None: ...

    def displays(self) -> list[DisplayInfo]: ...


@dataclass(frozen=True)
class Origins:
    """Where each top-level's reported coordinates start on screen, and the top-levels whose
    place is unknown (their elements get no bounds)."""

    shifted: dict[PathStep, Point] = field(default_factory=dict)
    unknown: frozenset[PathStep] = frozenset()


def toplevels(elements: Iterable[Element]) -> set[PathStep]:
    """The top-levels (first path steps) that elements with bounds live in."""
    return {e.path[0] for e in elements if e.path and e.bounds is not None}


def pointer_popups(elements: Iterable[Element]) -> set[PathStep]:
    """The top-levels with a menu listed under them: popups a toolkit may have opened at the pointer
    (a menu opened from a widget is listed under that widget instead)."""
    return {e.path[0] for e in elements if len(e.path) >= 2 and e.path[1].role == _MENU_ROLE}


def open_submenus(elements: Iterable[Element]) -> set[PathStep]:
    """The top-levels of :func:`pointer_popups` with a submenu open: an element with bounds listed
    under a menu inside the popup's own menu."""
    return {
        e.path[0]
        for e in elements
        if e.bounds is not None
        and len(e.path) >= 2
        and e.path[1].role == _MENU_ROLE
        and any(step.role == _MENU_ROLE for step in e.path[2:-1])
    }


def _window_origin(shifted: Sequence[tuple[WindowInfo, Point]], toplevel: PathStep) -> Point | None:
    """The origin of the window showing ``toplevel``: of the windows with its title, the one as
    far down the creation order as the top-level is among its namesakes; with no window of its
    title (a popup's unnamed top-level), the app's only window."""
    titled = [origin for window, origin in shifted if window.title == toplevel.name]
    if titled:
        return titled[toplevel.nth] if toplevel.nth < len(titled) else None
    return shifted[0][1] if len(shifted) == 1 else None


def _popup_origin(
    shifted: Sequence[tuple[WindowInfo, Point]],
    reported: Bounds | None,
    press: Point | None,
    displays: Sequence[DisplayInfo],
) -> Point | None:
    """The origin of a popup at the pointer that GTK ``reported`` at (its top-level's extents):
    the press point minus the reported position, which is where the GDK window the popup is
    anchored to starts. Only when the popup fits on a display at the press (else the compositor
    moved it) and that anchor lies in the app's only window, as the clicked widget does."""
    if reported is None or press is None or len(shifted) != 1:
        return None
    window = shifted[0][0].bounds
    at_press = Bounds(x=press.x, y=press.y, width=reported.width, height=reported.height)
    if not any(d.bounds.intersection(at_press) == at_press for d in displays):
        return None
    origin = Point(x=press.x - reported.x, y=press.y - reported.y)
    return origin if window.contains(origin.x, origin.y) else None


def toplevel_origins(
    shifted: Sequence[tuple[WindowInfo, Point]],
    steps: Iterable[PathStep],
    popups: Mapping[PathStep, Bounds | None] | None = None,
    press: Point | None = None,
    displays: Sequence[DisplayInfo] = (),
    submenus_open: Collection[PathStep] = (),
) -> Origins:
    """Where each top-level in ``steps`` starts, given the app's windows that are not placed at the
    screen's origin (``shifted``, from ``a11y_origins``). ``popups``: the extents the toolkit
    reports for the top-levels of :func:`pointer_popups` (None: it reports none); ``press``: where
    a pointer button was last pressed; ``displays``: the screen's displays; ``submenus_open``: the
    popups of :func:`open_submenus`, which the press may not have opened.

    A top-level with no window to match is left out: its elements keep the coordinates the
    toolkit gave. A pointer popup that cannot be placed is ``unknown``.
    """
    if not shifted:
        return Origins()
    popups = popups or {}
    titles = {window.title for window, _ in shifted}
    origins: dict[PathStep, Point] = {}
    unknown: set[PathStep] = set()
    for step in steps:
        if step in popups and step.name not in titles:
            opener = None if step in submenus_open else press
            origin = _popup_origin(shifted, popups[step], opener, displays)
        else:
            origin = _window_origin(shifted, step)
        if origin is not None:
            origins[step] = origin
        elif step in popups:
            unknown.add(step)
    return Origins(origins, frozenset(unknown))


class PlacedCopies:
    """The copies :func:`placed` made of one app's elements at its last call, by the element each
    was made from. The live mirror hands out the same element objects while they do not change; an
    element placed again from the same origin gets the same copy, so readers that key what they made
    of an element by its identity (the recorder's state files) keep it under sway too (each
    snapshot copied every element with bounds)."""

    def __init__(self) -> None:
        #: id(element) -> (the element, its origin or None for unknown, its copy); the element is
        #: held so that its id is not given to another object while its entry is kept.
        self.last: dict[int, tuple[Element, Point | None, Element]] = {}


def placed(elements: list[Element], origins: Origins, copies: PlacedCopies | None = None) -> list[Element]:
    """``elements`` with the bounds of those in a shifted top-level moved by its origin, and none
    (``bounds_unknown``) for those in a top-level whose place is unknown; with ``copies``, the
    copies made at its last call are handed out again where the element and its origin are the same."""
    if not origins.shifted and not origins.unknown:
        return elements
    earlier = copies.last if copies is not None else {}
    made: dict[int, tuple[Element, Point | None, Element]] = {}
    moved = []
    for element in elements:
        toplevel = element.path[0] if element.path and element.bounds is not None else None
        origin = origins.shifted.get(toplevel) if toplevel is not None else None
        if origin is None and (toplevel is None or toplevel not in origins.unknown):
            moved.append(element)
            continue
        entry = earlier.get(id(element))
        if entry is None or entry[0] is not element or entry[1] != origin:
            entry = (element, origin, _placed_at(element, origin))
        made[id(element)] = entry
        moved.append(entry[2])
    if copies is not None:
        copies.last = made
    return moved


def _placed_at(element: Element, origin: Point | None) -> Element:
    """A copy of ``element`` (which has bounds) moved by ``origin``; None: its place is unknown."""
    bounds = element.bounds
    assert bounds is not None
    if origin is None:
        return element.model_copy(update={"bounds": None, "bounds_unknown": True})
    moved = bounds.model_copy(update={"x": bounds.x + origin.x, "y": bounds.y + origin.y})
    return element.model_copy(update={"bounds": moved})
