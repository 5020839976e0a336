"""One rig's accessibility source, opened lazily on the event loop that first needs it, and the
choice of source for a desktop (:func:`open_access`).

dbus-fast binds a connection to the loop it was opened on; a server normally runs one loop for its
lifetime, but tests and benchmarks may run several in turn, so the source is re-opened when the
loop changes.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from deskrig.a11y.placement import WindowPlacement
from deskrig.a11y.snapshots import SnapshotStore
from deskrig.a11y.source import AccessibilitySource, NativePlatform, NativeReader, NativeTreeSource
from deskrig.config import A11Y_EVENTS_IDLE_TIMEOUT
from deskrig.errors import DeskrigError, ErrorCode

if TYPE_CHECKING:
    from deskrig.desktop.base import Desktop

#: Opens a source; called on the loop that will use it.
SourceOpener = Callable[[], Awaitable[AccessibilitySource]]


class A11yAccess:
    """Hands out the :class:`AccessibilitySource` that ``open_source`` opens."""

    def __init__(self, open_source: SourceOpener) -> None:
        self._open_source = open_source
        #: Shared across reconnects, so snapshot ids stay valid.
        self.snapshots = SnapshotStore()
        self._client: AccessibilitySource | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    @classmethod
    def atspi(
        cls,
        session_bus_address: str,
        placement: WindowPlacement | None = None,
        events_idle_timeout: float = A11Y_EVENTS_IDLE_TIMEOUT,
    ) -> A11yAccess:
        """AT-SPI through the session bus at ``session_bus_address``; ``placement``: the desktop,
        to put element bounds in screen coordinates; ``events_idle_timeout``: how long the client
        listens to events after its last tree read (0: always)."""

        async def connect() -> AccessibilitySource:
            from deskrig.a11y.atspi import AccessibilityClient  # dbus-fast: Linux only

            client = await AccessibilityClient.connect(
                session_bus_address, events_idle_timeout=events_idle_timeout
            )
            client.placement = placement
            return client

        return cls(connect)

    @classmethod
    def native(cls, platform: NativePlatform, open_reader: Callable[[], NativeReader]) -> A11yAccess:
        """A :class:`NativeTreeSource`: the macOS and Windows sources, and the scripted one."""

        async def start() -> AccessibilitySource:
            return NativeTreeSource(platform, open_reader)

        return cls(start)

    async def client(self) -> AccessibilitySource:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._client, self._loop, self._lock = None, loop, asyncio.Lock()
        assert self._lock is not None
        async with self._lock:
            if self._client is None:
                self._client = await self._open_source()
                self._client.snapshots = self.snapshots
            return self._client

    async def close(self) -> None:
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.close()
        self._client = None


def open_access(
    desktop: Desktop, session_bus: str | None, events_idle_timeout: float = A11Y_EVENTS_IDLE_TIMEOUT
) -> A11yAccess | None:
    """The accessibility source of ``desktop``'s platform, imported only there: the AX API on
    macOS, UI Automation on Windows, else AT-SPI on the session bus (None without one), which
    listens to events until ``events_idle_timeout`` after its last tree read (0: always)."""
    if desktop.backend_name == "macos":
        from deskrig.a11y.macos_ax import MacAX

        def open_ax() -> NativeReader:
            try:
                from deskrig.desktop.macos_ax_native import AXReader
            except ImportError as exc:  # another OS, or pyobjc's ApplicationServices missing
                raise DeskrigError(
                    ErrorCode.A11Y_UNAVAILABLE,
                    f"the AX API cannot load: {exc}",
                    remediation="Run on macOS with deskrig installed by pip there (it brings "
                    "pyobjc-framework-ApplicationServices).",
                ) from exc
            return AXReader()

        return A11yAccess.native(MacAX(), open_ax)
    if desktop.backend_name == "windows":
        from deskrig.a11y.windows_uia import WindowsUIA

        def open_uia() -> NativeReader:
            if sys.platform == "win32":  # mypy checks this branch with --platform win32
                from deskrig.a11y.windows_uia_native import UiaAppReader

                return UiaAppReader(desktop.windows)
            raise DeskrigError(ErrorCode.A11Y_UNAVAILABLE, "UI Automation runs on Windows only")

        return A11yAccess.native(WindowsUIA(), open_uia)
    return A11yAccess.atspi(session_bus, desktop, events_idle_timeout) if session_bus else None
