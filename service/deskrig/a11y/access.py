"""One rig's accessibility client, connected lazily on the event loop that first needs it.

dbus-fast binds a connection to the loop it was opened on; a server normally runs one loop for its
lifetime, but tests and benchmarks may run several in turn, so the client is re-opened when the
loop changes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from deskrig.a11y.placement import WindowPlacement
from deskrig.a11y.snapshots import SnapshotStore
from deskrig.errors import DeskrigError, ErrorCode

if TYPE_CHECKING:  # imported on first use: dbus-fast is a Linux-only dependency
    from deskrig.a11y.atspi import AccessibilityClient


class A11yAccess:
    """Hands out the :class:`AccessibilityClient` for ``session_bus_address``."""

    def __init__(self, session_bus_address: str | None, placement: WindowPlacement | None = None) -> None:
        """``placement``: the desktop, to put element bounds in screen coordinates."""
        self.session_bus_address = session_bus_address
        self.placement = placement
        #: Shared across reconnects, so snapshot ids stay valid.
        self.snapshots = SnapshotStore()
        self._client: AccessibilityClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    async def client(self) -> AccessibilityClient:
        if not self.session_bus_address:
            raise DeskrigError(
                ErrorCode.A11Y_UNAVAILABLE,
                "this desktop has no session bus, so no accessibility bus",
                remediation="Run the rig with accessibility on (the default), or use coordinates.",
            )
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._client, self._loop, self._lock = None, loop, asyncio.Lock()
        assert self._lock is not None
        async with self._lock:
            if self._client is None:
                from deskrig.a11y.atspi import AccessibilityClient

                self._client = await AccessibilityClient.connect(self.session_bus_address)
                self._client.snapshots = self.snapshots
                self._client.placement = self.placement
            return self._client

    async def close(self) -> None:
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.close()
        self._client = None
