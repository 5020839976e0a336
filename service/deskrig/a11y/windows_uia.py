"""UI Automation trees as the project's element model (:class:`~deskrig.a11y.tree.Element`).

The native reader (``windows_uia_native.py``, Windows only) fills one plain dict per element with
the UIA properties it read, under their UIA names, and the element's children under
``"children"``::

    {"ControlType": 50000, "Name": "OK", "AutomationId": "okButton", "ClassName": "Button",
     "BoundingRectangle": [left, top, width, height], "IsEnabled": true, "HasKeyboardFocus": false,
     "IsKeyboardFocusable": true, "IsOffscreen": false, "RuntimeId": [42, 66, 4],
     "Patterns": ["Invoke"], "Value": "...", "ValueIsReadOnly": false, "ToggleState": 1,
     "RangeValue": {"Value": 5, "Minimum": 0, "Maximum": 10, "SmallChange": 1}, "HelpText": "",
     "children": [...]}

Everything else is here, over those dicts, so it is unit-tested on any platform: control types
become the AT-SPI role names the tools already match on ("push button", "text", "check box"),
UIA properties become states ("enabled", "focused", "checked", "editable"), patterns become
action names ("click" for Invoke, "toggle", "expand or collapse", "select") and AT-SPI interface
names, and an action or a set_value picks the pattern that performs it. :class:`WindowsUIA` is
all that as the :class:`~deskrig.a11y.source.NativePlatform` the Windows accessibility source runs on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from deskrig.a11y.source import ACTIVATE_ALIASES
from deskrig.a11y.tree import Element, ElementRef, ValueInfo
from deskrig.a11y.walk import depth_first
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

#: A UIA element's properties as the native reader hands them over (see the module docstring).
UiaNode = Mapping[str, Any]

#: No UIA control type: the application deskrig puts above an app's windows (:func:`app_root`).
APPLICATION = 0
#: ``UIA_*ControlTypeId`` -> the AT-SPI role name of the same kind of control.
ROLES: dict[int, str] = {
    APPLICATION: "application",
    50000: "push button",  # Button
    50001: "calendar",
    50002: "check box",
    50003: "combo box",
    50004: "text",  # Edit
    50005: "link",  # Hyperlink
    50006: "image",
    50007: "list item",
    50008: "list",
    50009: "menu",
    50010: "menu bar",
    50011: "menu item",
    50012: "progress bar",
    50013: "radio button",
    50014: "scroll bar",
    50015: "slider",
    50016: "spin button",  # Spinner
    50017: "status bar",
    50018: "page tab list",  # Tab
    50019: "page tab",  # TabItem
    50020: "label",  # Text: static text
    50021: "tool bar",
    50022: "tool tip",
    50023: "tree",
    50024: "tree item",
    50025: "unknown",  # Custom
    50026: "panel",  # Group
    50027: "scroll bar",  # Thumb: a scroll bar's or slider's knob
    50028: "table",  # DataGrid
    50029: "table cell",  # DataItem
    50030: "document frame",  # Document
    50031: "push button",  # SplitButton
    50032: "frame",  # Window
    50033: "panel",  # Pane
    50034: "table column header",  # Header
    50035: "table column header",  # HeaderItem
    50036: "table",
    50037: "title bar",
    50038: "separator",
    50039: "panel",  # SemanticZoom
    50040: "tool bar",  # AppBar
}

#: UIA pattern -> the action name it performs (AT-SPI's names where toolkits share one).
PATTERN_ACTIONS: dict[str, str] = {
    "Invoke": "click",
    "Toggle": "toggle",
    "ExpandCollapse": "expand or collapse",
    "SelectionItem": "select",
}
#: ToggleState: Off, On, Indeterminate.
TOGGLE_STATES = {0: None, 1: "checked", 2: "indeterminate"}
#: Control types whose Value is the text they hold (an Edit's content, a Document's text).
_TEXT_HOLDERS = frozenset({50004, 50030, 50003})


def role_of(node: UiaNode) -> str:
    return ROLES.get(int(node.get("ControlType", 0)), "unknown")


def patterns_of(node: UiaNode) -> list[str]:
    return [str(p) for p in node.get("Patterns", [])]


def states_of(node: UiaNode) -> list[str]:
    """UIA properties as AT-SPI state names (the ones ``Element.render_line`` and queries know)."""
    states: list[str] = []
    if not node.get("IsOffscreen", False):
        states += ["visible", "showing"]
    if node.get("IsEnabled", True):
        states += ["enabled", "sensitive"]
    if node.get("IsKeyboardFocusable", False):
        states.append("focusable")
    if node.get("HasKeyboardFocus", False):
        states.append("focused")
    # A pattern's properties mean something only where the element has the pattern (elsewhere UIA
    # answers with its "not supported" sentinel).
    toggled = TOGGLE_STATES.get(int(node.get("ToggleState", 0))) if "Toggle" in patterns_of(node) else None
    if toggled:
        states.append(toggled)
    if "Value" in patterns_of(node) and not node.get("ValueIsReadOnly", True):
        states.append("editable")
    if node.get("IsPassword", False):
        states.append("password")
    return states


def actions_of(node: UiaNode) -> list[str]:
    return [PATTERN_ACTIONS[p] for p in patterns_of(node) if p in PATTERN_ACTIONS]


def bounds_of(node: UiaNode) -> Bounds | None:
    """BoundingRectangle ([left, top, width, height], physical pixels for a DPI-aware reader);
    None for an empty or off-screen element (UIA reports those as zeros or infinities)."""
    rect = node.get("BoundingRectangle")
    if not rect or len(rect) != 4 or not all(math.isfinite(v) for v in rect):
        return None
    left, top, width, height = (round(v) for v in rect)
    if width <= 0 or height <= 0 or node.get("IsOffscreen", False):
        return None
    return Bounds(x=left, y=top, width=width, height=height)


def value_of(node: UiaNode) -> ValueInfo | None:
    """A RangeValue (slider, spinner, progress bar) as the element's numeric value."""
    ranged = node.get("RangeValue")
    if "RangeValue" not in patterns_of(node) or not ranged:
        return None
    return ValueInfo(
        current=float(ranged.get("Value", 0.0)),
        minimum=float(ranged.get("Minimum", 0.0)),
        maximum=float(ranged.get("Maximum", 0.0)),
        increment=float(ranged.get("SmallChange", 0.0)),
    )


def text_of(node: UiaNode) -> str | None:
    """The Value pattern's string, for controls whose value is their text."""
    if "Value" not in patterns_of(node) or int(node.get("ControlType", 0)) not in _TEXT_HOLDERS:
        return None
    return str(node.get("Value", ""))


def interfaces_of(node: UiaNode) -> list[str]:
    """What the element offers, in AT-SPI's interface names (the tools ask for those): ``Action``
    for Invoke, Toggle, SelectionItem or ExpandCollapse, ``Value`` for a RangeValue, ``Text`` and
    ``EditableText`` for a Value holding text (editable when not read-only)."""
    patterns = patterns_of(node)
    text = text_of(node) is not None
    offered = [
        ("Action", bool(actions_of(node))),
        ("Component", bounds_of(node) is not None),
        ("Text", text),
        ("EditableText", text and "editable" in states_of(node)),
        ("Value", value_of(node) is not None and "RangeValue" in patterns),
    ]
    return [name for name, offers in offered if offers]


def element_ref(node: UiaNode, pid: int) -> ElementRef:
    """Where the live element is: UIA's runtime id, unique on the desktop while the element lives."""
    return ElementRef(f"uia:{pid}", ".".join(str(part) for part in node.get("RuntimeId", [])))


def runtime_id(ref: ElementRef) -> list[int]:
    """The runtime id an :func:`element_ref` holds."""
    return [int(part) for part in ref.path.split(".")] if ref.path else []


def app_root(name: str, windows: list[UiaNode]) -> dict[str, Any]:
    """The application above its top-level windows' trees (UIA has no element for it; AT-SPI and
    AX do, and element paths start below it)."""
    return {"ControlType": APPLICATION, "Name": name, "children": windows}


def _children(node: UiaNode) -> list[UiaNode]:
    return list(node.get("children", []))


def elements(
    root: UiaNode, pid: int, *, max_depth: int | None = None, max_elements: int | None = None
) -> tuple[list[Element], bool]:
    """The tree under ``root`` (:func:`app_root`, or a window) as depth-first elements indexed from
    0, and whether the limits cut it."""
    visits, truncated = depth_first(
        root,
        _children,
        lambda node: (role_of(node), str(node.get("Name", ""))),
        max_depth=max_depth,
        max_elements=max_elements,
    )
    found = [
        Element(
            index=visit.index,
            parent=visit.parent,
            depth=visit.depth,
            role=role_of(visit.node),
            name=str(visit.node.get("Name", "")),
            description=str(visit.node.get("HelpText", "")),
            states=states_of(visit.node),
            text=text_of(visit.node),
            value=value_of(visit.node),
            actions=actions_of(visit.node),
            bounds=bounds_of(visit.node),
            child_count=len(_children(visit.node)),
            interfaces=interfaces_of(visit.node),
            ref=element_ref(visit.node, pid),
            path=visit.path,
        )
        for visit in visits
    ]
    return found, truncated


#: UI Automation's HRESULTs (UIAutomationCoreApi.h) and E_ACCESSDENIED -> (code, remediation).
UIA_ERRORS: dict[int, tuple[ErrorCode, str]] = {
    0x80040201: (ErrorCode.ELEMENT_NOT_FOUND, "Call get_app_state again: the element is gone."),
    0x80040200: (ErrorCode.INVALID_ARGUMENT, "The element is disabled; enable it first."),
    0x80040204: (ErrorCode.INVALID_ARGUMENT, "The element does not support this action."),
    0x80131509: (ErrorCode.INVALID_ARGUMENT, "The element refused this action in its state."),
    0x80131505: (ErrorCode.TIMEOUT, "The app did not answer UI Automation in time; is it hung?"),
    0x80070005: (
        ErrorCode.PERMISSION_DENIED,
        "UI Automation cannot reach an elevated app from an unelevated process: run both at the same level.",
    ),
}


def uia_error(hresult: int, operation: str, fallback: ErrorCode, **details: object) -> DeskrigError:
    """A failed UI Automation call (COM hands out signed HRESULTs) as the project's error."""
    number = hresult & 0xFFFFFFFF
    code, remediation = UIA_ERRORS.get(number, (fallback, None))
    return DeskrigError(
        code,
        f"{operation} failed (HRESULT 0x{number:08X})",
        details={"hresult": number, **details},
        remediation=remediation,
    )


def action_pattern(element: Element, action: str) -> str:
    """The UIA pattern that performs ``action`` on ``element`` (INVALID_ARGUMENT if none does).

    "click" (or "press", "activate") is Invoke where the element has it, else Toggle (a check
    box), else SelectionItem (a list item, a tab), else ExpandCollapse, as a click on each would do.
    """
    wanted = action.casefold()
    pattern_of = {name: pattern for pattern, name in PATTERN_ACTIONS.items()}
    offered = [pattern_of[name] for name in element.actions if name in pattern_of]
    if wanted in ACTIVATE_ALIASES:
        for pattern in ("Invoke", "Toggle", "SelectionItem", "ExpandCollapse"):
            if pattern in offered:
                return pattern
    if wanted in pattern_of and pattern_of[wanted] in offered:
        return pattern_of[wanted]
    raise DeskrigError(
        ErrorCode.INVALID_ARGUMENT,
        f"{element.role} {element.name!r} has no action {action!r}",
        details={"action": action, "actions": list(element.actions)},
        remediation="Use one of details.actions, or click the element's bounds.",
    )


def value_setting(element: Element, value: str | float) -> tuple[Literal["Value", "RangeValue"], str | float]:
    """How set_value writes ``value``: RangeValue.SetValue of a number within the element's range,
    or Value.SetValue of the text. INVALID_ARGUMENT, and nothing written, otherwise."""
    if element.value is not None and element.has_interface("Value"):
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        low, high = element.value.minimum, element.value.maximum
        if not low <= number <= high:
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                f"{value!r} is not a number from {low:g} to {high:g}",
                details={"value": value, "minimum": low, "maximum": high},
            )
        return "RangeValue", number
    if element.has_interface("EditableText"):
        return "Value", str(value)
    raise DeskrigError(
        ErrorCode.INVALID_ARGUMENT,
        f"{element.role} {element.name!r} has no value to set",
        details={"role": element.role, "interfaces": element.interfaces},
        remediation="Set the value of an editable field, a slider or a spinner; type into others.",
    )


class WindowsUIA:
    """UI Automation as a :class:`~deskrig.a11y.source.NativePlatform`: operations are pattern
    names (Invoke, Toggle, SelectionItem, ExpandCollapse, Value, RangeValue). Bounds need no
    scaling: the reader runs per-monitor DPI aware, so UIA reports the physical pixels the
    Windows backend's coordinates are."""

    name = "UI Automation"
    prefix = "uia"
    positional_refs = False  # references are runtime ids

    def elements(
        self, root: UiaNode, pid: int, *, max_depth: int | None, max_elements: int | None
    ) -> tuple[list[Element], bool]:
        return elements(root, pid, max_depth=max_depth, max_elements=max_elements)

    def address(self, ref: ElementRef) -> list[int]:
        return runtime_id(ref)

    def operation(self, element: Element, action: str) -> str:
        return action_pattern(element, action)

    def value_operation(self, element: Element, value: str | float) -> tuple[str, str | float]:
        return value_setting(element, value)


def node_at(root: UiaNode, address: Sequence[int]) -> UiaNode | None:
    """The node with the runtime id ``address`` in a tree read by the native side."""
    pending = [root]
    while pending:
        node = pending.pop()
        if list(node.get("RuntimeId", [])) == list(address):
            return node
        pending.extend(_children(node))
    return None
