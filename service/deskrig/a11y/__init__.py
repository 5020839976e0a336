"""Accessibility trees over AT-SPI (Linux): snapshots of an app's elements, and actions on them.

Usage::

    client = await AccessibilityClient.connect(session_bus_address)
    snapshot = await client.snapshot(pid)
    text = snapshot.render_text()
    button = snapshot.resolve(ElementQuery(role="push button", name="OK"))
    await client.element_action(button, "click")
"""

from deskrig.a11y.atspi import AccessibilityClient, AppRef
from deskrig.a11y.snapshots import SnapshotStore
from deskrig.a11y.tree import Element, ElementQuery, ElementRef, PathStep, Snapshot, ValueInfo

__all__ = [
    "AccessibilityClient",
    "AppRef",
    "Element",
    "ElementQuery",
    "ElementRef",
    "PathStep",
    "Snapshot",
    "SnapshotStore",
    "ValueInfo",
]
