"""One depth-first walk of an accessibility tree, shared by every platform's snapshot code.

An element's index is its position in depth-first order; it knows its parent's index and its depth;
its path is one :class:`~deskrig.a11y.tree.PathStep` per level below the application, each numbered
among the earlier siblings with the same role and name (:class:`SiblingSteps`), so an element can be
found again by role and name after the tree changed around it. AT-SPI's fetch and mirror number
their steps with :class:`SiblingSteps`; the AX (macOS) and UI Automation (Windows) mappings walk
their readers' plain nested dicts with :func:`depth_first`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from deskrig.a11y.tree import PathStep

Node = TypeVar("Node")


class SiblingSteps:
    """The path steps of one parent's children, in their order."""

    def __init__(self) -> None:
        self._seen: defaultdict[tuple[str, str], int] = defaultdict(int)

    def step(self, role: str, name: str) -> PathStep:
        nth = self._seen[(role, name)]
        self._seen[(role, name)] = nth + 1
        return PathStep(role, name, nth)


@dataclass(frozen=True, slots=True)
class Visit(Generic[Node]):
    """One node reached by :func:`depth_first`, with where it sits in the tree."""

    node: Node
    index: int
    parent: int | None
    depth: int
    path: list[PathStep]
    #: Child positions from the root down (the root's is empty).
    positions: tuple[int, ...]


def depth_first(
    root: Node,
    children: Callable[[Node], Sequence[Node]],
    label: Callable[[Node], tuple[str, str]],
    *,
    max_depth: int | None = None,
    max_elements: int | None = None,
) -> tuple[list[Visit[Node]], bool]:
    """Every node under ``root`` (included, path ``[]``) in depth-first order, and whether
    ``max_depth`` (levels below the root) or ``max_elements`` left any out. ``label``: a node's
    (role, name), which its path step is numbered by."""
    visits: list[Visit[Node]] = []
    truncated = False
    stack: list[tuple[Node, int, int | None, list[PathStep], tuple[int, ...]]] = [(root, 0, None, [], ())]
    while stack:
        node, depth, parent, path, positions = stack.pop()
        if max_elements is not None and len(visits) >= max_elements:
            truncated = True
            break
        index = len(visits)
        visits.append(Visit(node, index, parent, depth, path, positions))
        kids = children(node)
        if max_depth is not None and depth >= max_depth:
            truncated = truncated or bool(kids)
            continue
        steps = SiblingSteps()
        below = [
            (kid, depth + 1, index, [*path, steps.step(*label(kid))], (*positions, number))
            for number, kid in enumerate(kids)
        ]
        stack.extend(reversed(below))
    return visits, truncated
