"""UI Automation through comtypes: reading a window's element tree into the plain dicts that
``windows_uia`` maps, and performing an element's Invoke, Toggle, SelectionItem, ExpandCollapse,
Value and RangeValue patterns.

Thin on purpose: every decision (roles, states, which pattern an action uses, what a value may be)
is ``windows_uia``'s, unit-tested on any platform. :class:`UiaAppReader` is the reader of the
Windows accessibility source (``deskrig.a11y.source.NativeReader``): an app's tree is its top-level
windows' trees under one application element.

Windows only: mypy checks this module with ``--platform win32``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from deskrig.a11y.windows_uia import UiaNode, app_root, uia_error
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import WindowInfo

assert sys.platform == "win32"  # the rest of the module is Windows' (mypy skips it elsewhere)

import comtypes  # noqa: E402
import comtypes.client  # noqa: E402

#: Property name -> UIA_*PropertyId (UIAutomationClient.h).
PROPERTIES: dict[str, int] = {
    "RuntimeId": 30000,
    "BoundingRectangle": 30001,
    "ControlType": 30003,
    "Name": 30005,
    "HasKeyboardFocus": 30008,
    "IsKeyboardFocusable": 30009,
    "IsEnabled": 30010,
    "AutomationId": 30011,
    "ClassName": 30012,
    "HelpText": 30013,
    "IsPassword": 30019,
    "IsOffscreen": 30022,
}
#: Pattern name -> (Is<Pattern>PatternAvailable property id, UIA_<Pattern>PatternId).
PATTERNS: dict[str, tuple[int, int]] = {
    "ExpandCollapse": (30028, 10005),
    "Invoke": (30031, 10000),
    "RangeValue": (30033, 10003),
    "SelectionItem": (30036, 10010),
    "Toggle": (30041, 10015),
    "Value": (30043, 10002),
}
#: Properties read only where their pattern is available (elsewhere UIA answers "not supported").
PATTERN_PROPERTIES: dict[str, dict[str, int]] = {
    "Value": {"Value": 30045, "ValueIsReadOnly": 30046},
    "Toggle": {"ToggleState": 30086},
}
#: RangeValue's Value, Minimum, Maximum, SmallChange property ids, kept under "RangeValue".
RANGE_PROPERTIES = {"Value": 30047, "Minimum": 30049, "Maximum": 30050, "SmallChange": 30052}


class UiaReader:
    """One IUIAutomation client (COM initialised on the calling thread)."""

    def __init__(self) -> None:
        try:
            comtypes.CoInitialize()
            comtypes.client.GetModule("UIAutomationCore.dll")
            from comtypes.gen import UIAutomationClient as uia

            self._uia: Any = uia
            self._automation: Any = comtypes.client.CreateObject(
                uia.CUIAutomation, interface=uia.IUIAutomation
            )
        except (OSError, comtypes.COMError) as exc:
            raise DeskrigError(
                ErrorCode.A11Y_UNAVAILABLE,
                f"UI Automation is not available: {exc}",
                remediation="UI Automation needs an interactive desktop session (Windows 7 or later).",
            ) from exc

    def _node(self, element: Any, depth: int, max_depth: int | None) -> dict[str, Any]:
        node: dict[str, Any] = {
            name: element.GetCurrentPropertyValue(pid) for name, pid in PROPERTIES.items()
        }
        node["RuntimeId"] = list(node["RuntimeId"] or [])
        node["BoundingRectangle"] = list(node["BoundingRectangle"] or [])
        node["Patterns"] = [
            name for name, (available, _) in PATTERNS.items() if element.GetCurrentPropertyValue(available)
        ]
        for pattern in node["Patterns"]:
            for name, pid in PATTERN_PROPERTIES.get(pattern, {}).items():
                node[name] = element.GetCurrentPropertyValue(pid)
        if "RangeValue" in node["Patterns"]:
            node["RangeValue"] = {
                name: element.GetCurrentPropertyValue(pid) for name, pid in RANGE_PROPERTIES.items()
            }
        children: list[dict[str, Any]] = []
        if max_depth is None or depth < max_depth:
            walker = self._automation.ControlViewWalker
            child = walker.GetFirstChildElement(element)
            while child:
                children.append(self._node(child, depth + 1, max_depth))
                child = walker.GetNextSiblingElement(child)
        node["children"] = children
        return node

    def window_tree(self, hwnd: int, max_depth: int | None = None) -> UiaNode:
        """The element tree of a top-level window, as ``windows_uia`` reads it."""
        try:
            return self._node(self._automation.ElementFromHandle(hwnd), 0, max_depth)
        except comtypes.COMError as exc:
            raise uia_error(
                exc.hresult, "reading the UI Automation tree", ErrorCode.A11Y_UNAVAILABLE, window_id=hwnd
            ) from exc

    def _find(self, hwnd: int, wanted: list[int]) -> Any:
        """The live element with the runtime id ``wanted`` in the window, walking the control view
        as :meth:`window_tree` did (a property condition on RuntimeId depends on how comtypes packs
        the array into a VARIANT)."""
        walker = self._automation.ControlViewWalker
        pending = [self._automation.ElementFromHandle(hwnd)]
        while pending:
            element = pending.pop()
            if list(element.GetCurrentPropertyValue(PROPERTIES["RuntimeId"]) or []) == wanted:
                return element
            child = walker.GetFirstChildElement(element)
            while child:
                pending.append(child)
                child = walker.GetNextSiblingElement(child)
        raise DeskrigError(
            ErrorCode.ELEMENT_NOT_FOUND,
            "the element is gone from the window",
            details={"window_id": hwnd, "runtime_id": wanted},
            remediation="Call get_app_state again.",
        )

    def perform(self, hwnd: int, wanted: list[int], pattern: str, value: str | float | None = None) -> None:
        """Run ``pattern`` (``windows_uia.action_pattern`` / ``value_setting`` chose it) on the
        element with the runtime id ``wanted``."""
        uia = self._uia
        interfaces = {
            "Invoke": uia.IUIAutomationInvokePattern,
            "Toggle": uia.IUIAutomationTogglePattern,
            "SelectionItem": uia.IUIAutomationSelectionItemPattern,
            "ExpandCollapse": uia.IUIAutomationExpandCollapsePattern,
            "Value": uia.IUIAutomationValuePattern,
            "RangeValue": uia.IUIAutomationRangeValuePattern,
        }
        try:
            element = self._find(hwnd, wanted)
            control = element.GetCurrentPattern(PATTERNS[pattern][1]).QueryInterface(interfaces[pattern])
            if pattern == "Invoke":
                control.Invoke()
            elif pattern == "Toggle":
                control.Toggle()
            elif pattern == "SelectionItem":
                control.Select()
            elif pattern == "ExpandCollapse" and control.CurrentExpandCollapseState == 0:  # collapsed
                control.Expand()
            elif pattern == "ExpandCollapse":
                control.Collapse()
            else:
                control.SetValue(value)
        except comtypes.COMError as exc:
            raise uia_error(
                exc.hresult, f"UI Automation {pattern}", ErrorCode.INPUT_FAILED, window_id=hwnd
            ) from exc


class UiaAppReader:
    """An app's windows through one :class:`UiaReader` (made on the thread that calls it, as COM
    wants): ``windows`` lists the desktop's windows (the Windows backend's, by HWND and pid)."""

    def __init__(self, windows: Callable[[], list[WindowInfo]]) -> None:
        self._windows = windows
        self._reader = UiaReader()

    def _hwnds(self, pid: int) -> tuple[str, list[int]]:
        mine = [w for w in self._windows() if w.pid == pid]
        if not mine:
            raise DeskrigError(
                ErrorCode.A11Y_UNAVAILABLE,
                f"process {pid} has no top-level window to read through UI Automation",
                details={"pid": pid},
                remediation="Wait for the app's window (wait_for window_title), or check the pid with list_apps.",
            )
        return mine[0].app, [w.id for w in mine]

    def tree(self, pid: int) -> UiaNode:
        name, hwnds = self._hwnds(pid)
        return app_root(name, [self._reader.window_tree(hwnd) for hwnd in hwnds])

    def perform(
        self, pid: int, address: Sequence[int], operation: str, value: str | float | None = None
    ) -> None:
        _, hwnds = self._hwnds(pid)
        for hwnd in hwnds[:-1]:
            try:
                return self._reader.perform(hwnd, list(address), operation, value)
            except DeskrigError as exc:
                if exc.code is not ErrorCode.ELEMENT_NOT_FOUND:
                    raise
        self._reader.perform(hwnds[-1], list(address), operation, value)
