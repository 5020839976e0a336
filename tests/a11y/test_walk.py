"""The one depth-first walk every platform's snapshot shares (deskrig.a11y.walk), on a plain tree."""

from __future__ import annotations

from typing import Any

from deskrig.a11y.tree import PathStep
from deskrig.a11y.walk import SiblingSteps, depth_first

TREE: dict[str, Any] = {
    "role": "application",
    "name": "app",
    "children": [
        {"role": "frame", "name": "Main", "children": [{"role": "push button", "name": "OK"}]},
        {"role": "frame", "name": "Main", "children": [{"role": "push button", "name": "OK"}]},
        {"role": "frame", "name": "Other"},
    ],
}


def walk(**limits: Any) -> tuple[list[Any], bool]:
    return depth_first(TREE, lambda n: n.get("children", []), lambda n: (n["role"], n["name"]), **limits)


def test_nodes_come_depth_first_with_parent_depth_path_and_positions() -> None:
    visits, truncated = walk()

    assert not truncated
    assert [(v.index, v.parent, v.depth, v.positions) for v in visits] == [
        (0, None, 0, ()),
        (1, 0, 1, (0,)),
        (2, 1, 2, (0, 0)),
        (3, 0, 1, (1,)),
        (4, 3, 2, (1, 0)),
        (5, 0, 1, (2,)),
    ]
    assert visits[0].path == []
    # Same role and name: numbered among the earlier such siblings; the count is per parent.
    assert visits[4].path == [PathStep("frame", "Main", 1), PathStep("push button", "OK", 0)]
    assert visits[5].path == [PathStep("frame", "Other", 0)]


def test_limits_cut_the_walk_and_say_so() -> None:
    shallow, truncated = walk(max_depth=1)
    assert [v.depth for v in shallow] == [0, 1, 1, 1] and truncated
    few, truncated = walk(max_elements=2)
    assert [v.index for v in few] == [0, 1] and truncated
    everything, truncated = walk(max_depth=2, max_elements=6)
    assert len(everything) == 6 and not truncated


def test_sibling_steps_number_each_role_and_name_apart() -> None:
    steps = SiblingSteps()
    assert [steps.step(*label) for label in [("a", "x"), ("a", "y"), ("a", "x"), ("b", "x")]] == [
        PathStep("a", "x", 0),
        PathStep("a", "y", 0),
        PathStep("a", "x", 1),
        PathStep("b", "x", 0),
    ]
