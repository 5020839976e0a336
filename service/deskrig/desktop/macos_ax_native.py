"""An app's AXUIElement tree read into plain dictionaries, and actions on its live elements.

The thin native half of macOS accessibility: ``deskrig.a11y.macos_ax`` (pure, tested on Linux)
maps these dictionaries to deskrig's element model and says which AX action or value to use.
Elements are reached again by their child indices from the application (``macos_ax.child_indices``).
AXErrors become deskrig errors here (``macos_windows.ax_failure``). :class:`AXReader` is this
module as the reader of the accessibility source (``deskrig.a11y.source.NativeReader``). macOS only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ApplicationServices

from deskrig.desktop.macos_quartz import ax_attribute, ax_point, ax_size, responsible_program
from deskrig.desktop.macos_windows import (
    AX_ERROR_API_DISABLED,
    AX_ERROR_INVALID_UI_ELEMENT,
    AX_ERROR_NO_VALUE,
    ax_failure,
)

#: AX attribute -> the key ``deskrig.a11y.macos_ax`` reads it under.
ATTRIBUTES: dict[str, str] = {
    "AXRole": "role",
    "AXSubrole": "subrole",
    "AXTitle": "title",
    "AXDescription": "description",
    "AXValue": "value",
    "AXMinValue": "min_value",
    "AXMaxValue": "max_value",
    "AXEnabled": "enabled",
    "AXFocused": "focused",
    "AXSelected": "selected",
    "AXExpanded": "expanded",
}
#: Deepest level and most elements read: a runaway tree (a huge table) stops here.
MAX_DEPTH = 40
MAX_NODES = 5000


def _plain(value: Any) -> Any:
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return str(value)


def describe(element: Any) -> dict[str, Any]:
    """One element's attributes (those it lacks are left out), without its children."""
    node: dict[str, Any] = {}
    for attribute, key in ATTRIBUTES.items():
        error, value = ax_attribute(element, attribute)
        if error == 0 and value is not None:
            node[key] = _plain(value)
    error, position = ax_attribute(element, "AXPosition")
    point = ax_point(position) if error == 0 and position is not None else None
    error, size = ax_attribute(element, "AXSize")
    extent = ax_size(size) if error == 0 and size is not None else None
    if point is not None and extent is not None:
        node["position"] = {"x": point[0], "y": point[1]}
        node["size"] = {"width": extent[0], "height": extent[1]}
    error, settable = ApplicationServices.AXUIElementIsAttributeSettable(element, "AXValue", None)
    node["value_settable"] = error == 0 and bool(settable)
    error, actions = ApplicationServices.AXUIElementCopyActionNames(element, None)
    node["actions"] = [str(a) for a in actions or []] if error == 0 else []
    return node


def _children(element: Any) -> list[Any]:
    error, children = ax_attribute(element, "AXChildren")
    return list(children or []) if error == 0 else []


def read_tree(pid: int) -> dict[str, Any]:
    """The application ``pid``'s tree as nested dictionaries (``children`` lists)."""
    program = responsible_program()
    if not ApplicationServices.AXIsProcessTrusted():
        raise ax_failure(AX_ERROR_API_DISABLED, "read the accessibility tree", program)
    root = ApplicationServices.AXUIElementCreateApplication(pid)
    error, _role = ax_attribute(root, "AXRole")
    if error not in (0, AX_ERROR_NO_VALUE):
        raise ax_failure(error, "read the accessibility tree", program)
    budget = [MAX_NODES]

    def walk(element: Any, depth: int) -> dict[str, Any]:
        node = describe(element)
        budget[0] -= 1
        node["children"] = (
            [walk(child, depth + 1) for child in _children(element) if budget[0] > 0]
            if depth < MAX_DEPTH
            else []
        )
        return node

    return walk(root, 0)


def live_element(pid: int, indices: Sequence[int]) -> Any:
    """The element at ``indices`` (child positions from the application down)."""
    element = ApplicationServices.AXUIElementCreateApplication(pid)
    for index in indices:
        children = _children(element)
        if not 0 <= index < len(children):
            raise ax_failure(AX_ERROR_INVALID_UI_ELEMENT, "find the element", responsible_program())
        element = children[index]
    return element


def perform(pid: int, indices: Sequence[int], action: str) -> None:
    """``AXUIElementPerformAction`` (e.g. AXPress) on the element at ``indices``."""
    error = int(ApplicationServices.AXUIElementPerformAction(live_element(pid, indices), action))
    if error != 0:
        raise ax_failure(error, f"perform {action}", responsible_program())


def set_value(pid: int, indices: Sequence[int], value: str | float) -> None:
    """Set AXValue of the element at ``indices``."""
    error = int(
        ApplicationServices.AXUIElementSetAttributeValue(live_element(pid, indices), "AXValue", value)
    )
    if error != 0:
        raise ax_failure(error, "set the value", responsible_program())


class AXReader:
    """The AX API as the accessibility source's reader: an element's address is its child indices,
    an operation an AX action name, or ``AXValue`` to set the value."""

    def tree(self, pid: int) -> dict[str, Any]:
        return read_tree(pid)

    def perform(
        self, pid: int, address: Sequence[int], operation: str, value: str | float | None = None
    ) -> None:
        if operation == "AXValue" and value is not None:
            set_value(pid, address, value)
        else:
            perform(pid, address, operation)
