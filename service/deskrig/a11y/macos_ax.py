"""macOS accessibility (the AX API) in deskrig's element model: pure mapping, tested on Linux.

``deskrig.desktop.macos_ax_native`` reads an app's AXUIElement tree into plain dictionaries, one
per element, with the AX attributes this module needs under these keys::

    role, subrole, title, description, value, min_value, max_value, position {x, y},
    size {width, height}, enabled, focused, selected, expanded, value_settable, actions, children

(position and size in points, global display space: deskrig's screen coordinates on macOS).
:func:`elements` turns such a tree into the :class:`~deskrig.a11y.tree.Element` list a snapshot
holds, with AT-SPI's role, state and action names so element queries read the same on every
platform (interfaces too: ``Value`` for a range, ``EditableText`` for a settable text, and
``AXValue`` wherever the value is settable); :func:`ax_action` and :func:`ax_value` say what to ask
AX for an element action and a set_value. :class:`MacAX` is all that as the
:class:`~deskrig.a11y.source.NativePlatform` the macOS accessibility source runs on. An element's :class:`ElementRef` is ``("ax:<pid>", "/0/3/1")``: the child indices from
the application down, which the native side walks again to reach the live element.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deskrig.a11y.source import ACTIVATE_ALIASES
from deskrig.a11y.tree import Element, ElementRef, ValueInfo
from deskrig.a11y.walk import depth_first
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

#: One element as the native reader describes it (see the module docstring).
AXNode = Mapping[str, Any]

#: Characters of an element's text kept (as the AT-SPI path keeps).
TEXT_CAP = 4000

#: AX role -> AT-SPI role name (deskrig's vocabulary, from AT-SPI's role names).
ROLES: dict[str, str] = {
    "AXApplication": "application",
    "AXWindow": "frame",
    "AXSheet": "dialog",
    "AXDrawer": "panel",
    "AXButton": "push button",
    "AXMenuButton": "push button",
    "AXCheckBox": "check box",
    "AXRadioButton": "radio button",
    "AXRadioGroup": "panel",
    "AXPopUpButton": "combo box",
    "AXComboBox": "combo box",
    "AXTextField": "text",
    "AXTextArea": "text",
    "AXStaticText": "label",
    "AXImage": "image",
    "AXLink": "link",
    "AXGroup": "panel",
    "AXSplitGroup": "split pane",
    "AXSplitter": "separator",
    "AXScrollArea": "scroll pane",
    "AXScrollBar": "scroll bar",
    "AXSlider": "slider",
    "AXIncrementor": "spin button",
    "AXProgressIndicator": "progress bar",
    "AXBusyIndicator": "progress bar",
    "AXTabGroup": "page tab list",
    "AXToolbar": "tool bar",
    "AXMenuBar": "menu bar",
    "AXMenuBarItem": "menu",
    "AXMenu": "menu",
    "AXMenuItem": "menu item",
    "AXList": "list",
    "AXTable": "table",
    "AXOutline": "tree table",
    "AXRow": "table row",
    "AXColumn": "table column",
    "AXCell": "table cell",
    "AXValueIndicator": "slider",
    "AXHelpTag": "tool tip",
    "AXWebArea": "document web",
}
#: Subroles that name a more precise role than their role does.
SUBROLES: dict[str, str] = {
    "AXSecureTextField": "password text",
    "AXDialog": "dialog",
    "AXSystemDialog": "dialog",
    "AXTabButton": "page tab",  # a tab is an AXRadioButton whose subrole says so
    "AXSearchField": "text",
    "AXToggle": "toggle button",
    "AXSwitch": "toggle button",
}
#: AX action -> deskrig's (AT-SPI's) action name.
ACTIONS: dict[str, str] = {
    "AXPress": "click",
    "AXIncrement": "increment",
    "AXDecrement": "decrement",
    "AXShowMenu": "show menu",
    "AXConfirm": "activate",
    "AXCancel": "cancel",
    "AXRaise": "raise",
    "AXPick": "select",
}
_AX_ACTION_OF = {name: ax for ax, name in ACTIONS.items()}
#: Roles whose AXValue is their text.
_TEXT_ROLES = frozenset({"AXTextField", "AXTextArea", "AXComboBox", "AXStaticText"})
#: Roles whose settable AXValue makes them editable text.
_EDITABLE_ROLES = frozenset({"AXTextField", "AXTextArea", "AXComboBox"})
#: Roles whose AXValue is a number in a range.
_RANGE_ROLES = frozenset(
    {"AXSlider", "AXIncrementor", "AXProgressIndicator", "AXScrollBar", "AXValueIndicator"}
)
#: Roles whose AXValue 1 means checked.
_CHECKABLE_ROLES = frozenset({"AXCheckBox", "AXRadioButton"})


def role_name(node: AXNode) -> str:
    """The AT-SPI role name of an AX role (and subrole); an unknown role keeps its AX name in
    lower case without the prefix ("AXRuler" -> "ruler")."""
    subrole = node.get("subrole")
    if subrole in SUBROLES:
        return SUBROLES[subrole]
    role = str(node.get("role") or "AXUnknown")
    return ROLES.get(role, role.removeprefix("AX").lower() or "unknown")


def _bounds(node: AXNode, scale: float) -> Bounds | None:
    position, size = node.get("position"), node.get("size")
    if not position or not size:
        return None
    width, height = round(float(size["width"]) * scale), round(float(size["height"]) * scale)
    if width <= 0 or height <= 0:
        return None
    x, y = round(float(position["x"]) * scale), round(float(position["y"]) * scale)
    return Bounds(x=x, y=y, width=width, height=height)


def _name(node: AXNode) -> tuple[str, str]:
    """(name, description): the title, else a label's text, else the description (icon buttons
    carry their name there); the description is kept only when it is not the name."""
    title = str(node.get("title") or "")
    description = str(node.get("description") or "")
    if title:
        return title, description
    if node.get("role") == "AXStaticText" and isinstance(node.get("value"), str):
        return str(node["value"]), description
    return description, ""


def _states(node: AXNode, bounds: Bounds | None) -> list[str]:
    states: list[str] = []
    if node.get("enabled", True):
        states += ["enabled", "sensitive"]
    if bounds is not None:
        states += ["showing", "visible"]
    if node.get("focused"):
        states += ["focused"]
    if node.get("selected"):
        states += ["selected"]
    if node.get("expanded"):
        states += ["expanded"]
    if node.get("role") in _EDITABLE_ROLES and node.get("value_settable"):
        states += ["editable"]
    if node.get("role") in _CHECKABLE_ROLES and node.get("value") in (1, True):
        states += ["checked"]
    return states


def _value(node: AXNode) -> ValueInfo | None:
    value = node.get("value")
    if node.get("role") not in _RANGE_ROLES or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return ValueInfo(
        current=float(value),
        minimum=float(node.get("min_value", 0.0) or 0.0),
        maximum=float(node.get("max_value", 0.0) or 0.0),
    )


def _text(node: AXNode) -> str | None:
    value = node.get("value")
    return value if node.get("role") in _TEXT_ROLES and isinstance(value, str) else None


def _interfaces(node: AXNode, text: str | None, value: ValueInfo | None, bounds: Bounds | None) -> list[str]:
    """AT-SPI's interface names for what the element offers (the tools ask for those), and
    ``AXValue`` when its value can be set."""
    offered = [
        name
        for name, offers in (
            ("Action", bool(node.get("actions"))),
            ("Component", bounds is not None),
            ("Text", text is not None),
            ("EditableText", node.get("role") in _EDITABLE_ROLES and bool(node.get("value_settable"))),
            ("Value", value is not None),
            ("AXValue", bool(node.get("value_settable"))),
        )
        if offers
    ]
    return offered


def _children(node: AXNode) -> Sequence[AXNode]:
    return node.get("children") or []


def elements(
    root: AXNode,
    pid: int,
    *,
    max_depth: int | None = None,
    max_elements: int | None = None,
    scale: float = 1.0,
) -> tuple[list[Element], bool]:
    """The tree under ``root`` (the AXApplication) as a depth-first list of elements indexed from 0,
    and whether the limits cut it. ``scale``: deskrig's screen units per AX point."""
    visits, truncated = depth_first(
        root,
        _children,
        lambda node: (role_name(node), _name(node)[0]),
        max_depth=max_depth,
        max_elements=max_elements,
    )
    found: list[Element] = []
    for visit in visits:
        node = visit.node
        name, description = _name(node)
        bounds = _bounds(node, scale)
        text, value = _text(node), _value(node)
        found.append(
            Element(
                index=visit.index,
                parent=visit.parent,
                depth=visit.depth,
                role=role_name(node),
                name=name,
                description=description,
                states=_states(node, bounds),
                text=text[:TEXT_CAP] if text is not None else None,
                text_truncated=text is not None and len(text) > TEXT_CAP,
                value=value,
                actions=[ACTIONS.get(a, a) for a in node.get("actions") or []],
                bounds=bounds,
                child_count=len(_children(node)),
                interfaces=_interfaces(node, text, value, bounds),
                ref=ElementRef(f"ax:{pid}", "/".join(["", "0", *map(str, visit.positions)])),
                path=visit.path,
            )
        )
    return found, truncated


def child_indices(ref: ElementRef) -> list[int]:
    """The child indices from the application down to the element ``ref`` names."""
    parts = ref.path.split("/")[2:]  # "", "0" (the application), then one index per level
    return [int(part) for part in parts]


def ax_action(element: Element, action: str) -> str:
    """The AX action to perform for deskrig's ``action`` ("click" -> AXPress) on ``element``;
    INVALID_ARGUMENT when the element does not offer it. "press" and "activate" stand for "click"
    as on the other platforms."""
    if action.casefold() in ACTIVATE_ALIASES and "click" in element.actions:
        return "AXPress"
    if action not in element.actions:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"element {element.index} ({element.role} {element.name!r}) has no action {action!r}",
            details={"action": action, "available": list(element.actions)},
            remediation="Use one of details.available, or click its bounds.",
        )
    return _AX_ACTION_OF.get(action, action)


def ax_value(element: Element, value: str | float) -> str | float:
    """The AXValue to set for set_value: text for a text role, a number in range for a range role;
    INVALID_ARGUMENT for an element whose value cannot be set or a value it cannot take."""
    if not element.has_interface("AXValue"):
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"the {element.role}'s value cannot be set",
            details={"role": element.role},
            remediation="Type into it, or click it, instead.",
        )
    if element.value is not None:
        try:
            number = float(value)
        except ValueError as exc:
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT, f"{value!r} is not a number", details={"value": value}
            ) from exc
        low, high = element.value.minimum, element.value.maximum
        if not low <= number <= high:
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                f"{number:g} is outside {low:g}..{high:g}",
                details={"value": number, "minimum": low, "maximum": high},
            )
        return number
    return str(value)


class MacAX:
    """The AX API as a :class:`~deskrig.a11y.source.NativePlatform`: operations are AX action
    names (AXPress ...) and ``AXValue`` for a value write."""

    name = "the AX API"
    prefix = "ax"
    positional_refs = True  # references are child indices

    def __init__(self, scale: float = 1.0) -> None:
        """``scale``: deskrig's screen units per AX point. The macOS backend's coordinates are
        points (it captures at one pixel per point), so 1 there."""
        self.scale = scale

    def elements(
        self, root: AXNode, pid: int, *, max_depth: int | None, max_elements: int | None
    ) -> tuple[list[Element], bool]:
        return elements(root, pid, max_depth=max_depth, max_elements=max_elements, scale=self.scale)

    def address(self, ref: ElementRef) -> list[int]:
        return child_indices(ref)

    def operation(self, element: Element, action: str) -> str:
        return ax_action(element, action)

    def value_operation(self, element: Element, value: str | float) -> tuple[str, str | float]:
        return "AXValue", ax_value(element, value)


def node_at(root: AXNode, address: Sequence[int]) -> AXNode | None:
    """The node at ``address`` (child indices) in a tree read by the native side (None when the
    tree has changed)."""
    node = root
    for index in address:
        children = _children(node)
        if not 0 <= index < len(children):
            return None
        node = children[index]
    return node
