"""macOS accessibility in deskrig's element model (deskrig.a11y.macos_ax), on a recorded AX tree
(data/ax_tree_form.json, as deskrig.desktop.macos_ax_native reads one)."""

from __future__ import annotations

from typing import Any

import pytest

from deskrig.a11y.macos_ax import ax_action, ax_value, child_indices, elements, role_name
from deskrig.a11y.tree import Element, ElementRef, PathStep, ValueInfo
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

from .recorded import load

RECORDED = load("ax_tree_form.json")


@pytest.fixture(scope="module")
def tree() -> list[Element]:
    found, truncated = elements(RECORDED["tree"], RECORDED["pid"])
    assert not truncated
    return found


def named(tree: list[Element], role: str, name: str) -> Element:
    (found,) = [e for e in tree if e.role == role and e.name == name]
    return found


def node_at(ref: ElementRef) -> dict[str, Any]:
    node: dict[str, Any] = RECORDED["tree"]
    for index in child_indices(ref):
        node = node["children"][index]
    return node


def test_the_tree_is_flattened_depth_first_with_parents_and_depths(tree: list[Element]) -> None:
    assert [e.index for e in tree] == list(range(len(tree)))
    assert (tree[0].role, tree[0].name, tree[0].parent, tree[0].depth) == ("application", "Python", None, 0)
    window = tree[1]
    assert (window.role, window.name, window.parent, window.depth, window.child_count) == (
        "frame",
        "Form",
        0,
        1,
        9,
    )
    assert all(e.parent is None or tree[e.parent].depth == e.depth - 1 for e in tree)
    assert len(tree) == 18


def test_roles_and_names_read_as_on_linux(tree: list[Element]) -> None:
    roles = [(e.role, e.name) for e in tree[2:13]]

    assert roles == [
        ("push button", ""),  # the close button: no title, no description
        ("push button", ""),
        ("label", "Name:"),  # a label's text is its name
        ("text", "Name"),  # an unlabelled field is named by its description
        ("password text", "Password"),
        ("check box", "Agree"),
        ("slider", "Volume"),
        ("slider", ""),
        ("push button", "Submit"),
        ("page tab list", ""),
        ("page tab", "General"),
    ]


def test_bounds_are_screen_points_and_elements_without_them_are_not_showing(tree: list[Element]) -> None:
    field = named(tree, "text", "Name")
    quit_item = named(tree, "menu item", "Quit Python")

    assert field.bounds == Bounds(x=268, y=164, width=200, height=22)
    assert {"showing", "visible", "focused", "editable", "enabled"} <= set(field.states)
    assert quit_item.bounds is None and "showing" not in quit_item.states


def test_states_values_text_and_actions(tree: list[Element]) -> None:
    agree, slider, submit = (
        named(tree, "check box", "Agree"),
        named(tree, "slider", "Volume"),
        named(tree, "push button", "Submit"),
    )

    assert "checked" in agree.states and agree.actions == ("click",)
    assert slider.value == ValueInfo(current=30, minimum=0, maximum=100)
    assert slider.actions == ("increment", "decrement")
    assert "enabled" not in submit.states and "sensitive" not in submit.states
    assert named(tree, "text", "Name").text == "Ada"
    assert named(tree, "menu", "Python").actions == ("click", "cancel", "select")


def test_refs_lead_back_to_the_recorded_element(tree: list[Element]) -> None:
    for element in tree:
        node = node_at(element.ref)
        assert element.ref.bus_name == "ax:48213"
        assert role_name(node) == element.role


def test_same_named_siblings_are_told_apart_in_paths(tree: list[Element]) -> None:
    tabs = [e for e in tree if e.role == "page tab"]

    assert [e.path[-1] for e in tabs] == [
        PathStep("page tab", "General", 0),
        PathStep("page tab", "General", 1),
    ]
    assert [e.ref.path for e in tabs] == ["/0/0/8/0", "/0/0/8/1"]
    assert "selected" in tabs[0].states and "selected" not in tabs[1].states


def test_an_unknown_role_keeps_its_ax_name() -> None:
    assert role_name({"role": "AXRuler"}) == "ruler"
    assert role_name({}) == "unknown"


def test_element_actions_are_the_ax_actions_it_offers(tree: list[Element]) -> None:
    assert ax_action(named(tree, "push button", "Submit"), "click") == "AXPress"
    assert ax_action(named(tree, "slider", "Volume"), "increment") == "AXIncrement"

    with pytest.raises(DeskrigError) as caught:
        ax_action(named(tree, "label", "Name:"), "click")

    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert caught.value.details == {"action": "click", "available": []}


def test_set_value_is_text_for_fields_and_a_number_in_range_for_sliders(tree: list[Element]) -> None:
    field, slider = named(tree, "text", "Name"), named(tree, "slider", "Volume")

    assert ax_value(field, "Grace") == "Grace"
    assert ax_value(slider, "42.5") == 42.5
    for element, value in (
        (slider, 101),
        (slider, "loud"),
        (named(tree, "push button", "Submit"), "x"),
    ):
        with pytest.raises(DeskrigError) as caught:
            ax_value(element, value)
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_interfaces_use_at_spi_names_so_the_tools_pick_text_or_value(tree: list[Element]) -> None:
    assert {"EditableText", "Text", "AXValue"} <= set(named(tree, "text", "Name").interfaces)
    assert {"Value", "AXValue"} <= set(named(tree, "slider", "Volume").interfaces)
    assert "EditableText" not in named(tree, "label", "Name:").interfaces
    assert "Action" in named(tree, "push button", "Submit").interfaces


def test_bounds_scale_from_points_to_the_screen_units() -> None:
    found, _ = elements(RECORDED["tree"], RECORDED["pid"], scale=2.0)
    assert named(found, "text", "Name").bounds == Bounds(x=536, y=328, width=400, height=44)


def test_limits_cut_the_tree_and_say_so() -> None:
    shallow, truncated = elements(RECORDED["tree"], RECORDED["pid"], max_depth=1)
    assert [e.depth for e in shallow] == [0, 1, 1] and truncated
    few, truncated = elements(RECORDED["tree"], RECORDED["pid"], max_elements=3)
    assert len(few) == 3 and truncated


def test_press_and_activate_mean_click(tree: list[Element]) -> None:
    submit = named(tree, "push button", "Submit")
    assert ax_action(submit, "press") == ax_action(submit, "activate") == "AXPress"
