"""Accessibility trees: snapshots of an app's elements, and actions on them, on every platform.

One interface (:class:`deskrig.a11y.source.AccessibilitySource`), one source per platform, picked
with the desktop by :func:`deskrig.a11y.access.open_access`: AT-SPI on Linux, the AX API on macOS,
UI Automation on Windows. Usage::

    access = open_access(desktop, session_bus_address)
    client = await access.client()
    snapshot = await client.snapshot(pid)
    text = snapshot.render_text()
    button = snapshot.resolve(ElementQuery(role="push button", name="OK"))
    await client.element_action(button, "click")
"""

from typing import TYPE_CHECKING

from deskrig.a11y.snapshots import SnapshotStore
from deskrig.a11y.tree import Element, ElementQuery, ElementRef, PathStep, Snapshot, ValueInfo

if TYPE_CHECKING:
    from deskrig.a11y.atspi import AccessibilityClient, AppRef

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


def __getattr__(name: str) -> object:
    # The AT-SPI client loads dbus-fast (a Linux-only dependency) on first use, so the element
    # model imports on every platform (the tools load it on Windows and macOS too).
    if name in ("AccessibilityClient", "AppRef"):
        from deskrig.a11y import atspi

        return getattr(atspi, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
