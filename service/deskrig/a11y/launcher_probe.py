"""The rig's start-up probe of the AT-SPI bus launcher (``org.a11y.Bus``) on a session bus.

Blocking calls for the rig's start-up code (:class:`LauncherWatch`): where the accessibility bus
is, and switching ``org.a11y.Status.IsEnabled`` on, over one connection that also waits for the
launcher to take its name. Every call is sent with NO_AUTOSTART, so that asking never makes the
session bus start a second launcher of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from dbus_fast import Message, MessageFlag, MessageType, Variant
from dbus_fast.aio import MessageBus

from deskrig.a11y.connection import NAME_HAS_NO_OWNER, SERVICE_UNKNOWN, CallFailed, call, close_bus, open_bus
from deskrig.a11y.constants import A11Y_BUS_NAME, A11Y_BUS_PATH, A11Y_STATUS, DBUS_NAME, DBUS_PATH, PROPERTIES

T = TypeVar("T")

#: What the session bus answers while no launcher owns org.a11y.Bus yet.
NOT_YET = (SERVICE_UNKNOWN, NAME_HAS_NO_OWNER)
CALL_TIMEOUT_S = 5.0
#: The bus daemon's signal that org.a11y.Bus changed owner (a launcher took it, or left).
OWNER_CHANGED_MATCH = f"type='signal',sender='{DBUS_NAME}',interface='{DBUS_NAME}',member='NameOwnerChanged',arg0='{A11Y_BUS_NAME}'"


async def _call_launcher(
    bus: MessageBus, interface: str, member: str, signature: str = "", body: Sequence[Any] = ()
) -> list[Any]:
    return await asyncio.wait_for(
        call(
            bus,
            A11Y_BUS_NAME,
            A11Y_BUS_PATH,
            interface,
            member,
            signature,
            body,
            flags=MessageFlag.NO_AUTOSTART,
        ),
        timeout=CALL_TIMEOUT_S,
    )


async def _address(bus: MessageBus) -> str | None:
    try:
        (address,) = await _call_launcher(bus, A11Y_BUS_NAME, "GetAddress")
    except CallFailed as exc:
        if exc.error_name in NOT_YET:
            return None
        raise ConnectionError(f"org.a11y.Bus.GetAddress failed: {exc}") from exc
    return str(address)


async def _enable(bus: MessageBus) -> None:
    try:
        await _call_launcher(bus, PROPERTIES, "Set", "ssv", [A11Y_STATUS, "IsEnabled", Variant("b", True)])
    except CallFailed as exc:
        raise ConnectionError(f"setting org.a11y.Status.IsEnabled failed: {exc}") from exc


class LauncherWatch:
    """One connection to a session bus for the rig's wait for its launcher: :meth:`address`,
    :meth:`enable` and :meth:`wait_for_owner`, woken when org.a11y.Bus
    changes owner. The subscription is in place before the first look, so no change is missed.

    A connection and an event loop per look made each poll cost a few milliseconds of the rig
    process's CPU, beside the server's imports. Its calls run the watch's own event loop, so they
    are made from a thread that runs none (the rig's start-up)."""

    def __init__(self, session_bus: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._owner_changed = asyncio.Event()
        self._bus: MessageBus | None = None
        try:
            self._bus = bus = self._loop.run_until_complete(open_bus(session_bus))
            bus.add_message_handler(self._on_message)
            self._loop.run_until_complete(
                call(bus, DBUS_NAME, DBUS_PATH, DBUS_NAME, "AddMatch", "s", [OWNER_CHANGED_MATCH])
            )
        except BaseException:
            self.close()
            raise

    def _on_message(self, message: Message) -> None:
        if message.message_type == MessageType.SIGNAL and message.member == "NameOwnerChanged":
            self._owner_changed.set()

    def _ask(self, ask: Callable[[MessageBus], Awaitable[T]]) -> T:
        assert self._bus is not None, "the watch is closed"
        return self._loop.run_until_complete(ask(self._bus))

    def address(self) -> str | None:
        """The accessibility bus address, or None while org.a11y.Bus has no owner yet."""
        return self._ask(_address)

    def enable(self) -> None:
        """Set org.a11y.Status.IsEnabled: toolkits that ask (Qt, WebKit ...) then turn their bridge on."""
        self._ask(_enable)

    def wait_for_owner(self, timeout: float) -> bool:
        """Until org.a11y.Bus changed owner since the last wait (True), or for at most ``timeout``
        seconds (False)."""

        async def wait() -> bool:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._owner_changed.wait(), timeout)
            changed = self._owner_changed.is_set()
            self._owner_changed.clear()
            return changed

        return self._loop.run_until_complete(wait())

    def close(self) -> None:
        if self._bus is not None:
            self._loop.run_until_complete(close_bus(self._bus))
            self._bus = None
        self._loop.close()

    def __enter__(self) -> LauncherWatch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
