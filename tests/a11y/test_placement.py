"""Placing an app's elements on screen again hands out the copies it made before where the element
and its top-level's origin are the same (the live mirror hands out the same element objects while
they do not change; readers key what they made of an element by its identity)."""

from __future__ import annotations

from deskrig.a11y.placement import Origins, PlacedCopies, placed
from deskrig.a11y.tree import Element, ElementRef, PathStep
from deskrig.model import Bounds, Point

MAIN = PathStep("frame", "Main", 0)
POPUP = PathStep("window", "", 0)
PLAIN = PathStep("frame", "Plain", 0)
INSIDE = Bounds(x=10, y=20, width=30, height=40)


def element(index: int, toplevel: PathStep, bounds: Bounds | None = INSIDE, name: str = "") -> Element:
    return Element(
        index=index,
        parent=0,
        depth=2,
        role="push button",
        name=name,
        states=("showing",),
        bounds=bounds,
        ref=ElementRef(":1.1", f"/{index}"),
        path=(toplevel, PathStep("push button", name, 0)),
    )


def test_an_element_placed_again_from_the_same_origin_is_the_same_copy() -> None:
    shifted, unknown, hidden, unmoved = (
        element(1, MAIN),
        element(2, POPUP),
        element(3, MAIN, None),
        element(4, PLAIN),
    )
    elements = [shifted, unknown, hidden, unmoved]
    origins = Origins({MAIN: Point(x=100, y=50)}, frozenset({POPUP}))
    copies = PlacedCopies()

    first = placed(elements, origins, copies)
    assert [e.bounds for e in first] == [Bounds(x=110, y=70, width=30, height=40), None, None, INSIDE]
    assert first[1].bounds_unknown
    assert first[2] is hidden and first[3] is unmoved
    again = placed(elements, origins, copies)
    assert all(one is other for one, other in zip(first, again, strict=True))

    renamed = element(1, MAIN, name="renamed")  # the mirror's copy of a changed element
    moved = Origins({MAIN: Point(x=200, y=50)}, frozenset({POPUP}))
    changed = placed([renamed, unknown, hidden, unmoved], moved, copies)
    assert changed[0].name == "renamed" and changed[0].bounds == Bounds(x=210, y=70, width=30, height=40)
    assert changed[1] is first[1], "its top-level's place is still unknown"
    assert placed([renamed, unknown, hidden, unmoved], origins, copies)[0].bounds == first[0].bounds
