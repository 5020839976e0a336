"""The rig's start-up probe of the AT-SPI bus launcher (``org.a11y.Bus``) on a session bus.

Blocking calls for the rig's start-up code, which polls them: where the accessibility bus is, and
switching ``org.a11y.Status.IsEnabled`` on. Every call is sent with NO_AUTOSTART, so that asking
never makes the session bus start a second launcher of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from dbus_fast import MessageFlag, Variant

from deskrig.a11y.connection import NAME_HAS_NO_OWNER, SERVICE_UNKNOWN, CallFailed, call, close_bus, open_bus
from deskrig.a11y.constants import A11Y_BUS_NAME, A11Y_BUS_PATH, A11Y_STATUS, PROPERTIES

T = TypeVar("T")

#: What the session bus answers while no launcher owns org.a11y.Bus yet.
NOT_YET = (SERVICE_UNKNOWN, NAME_HAS_NO_OWNER)
CALL_TIMEOUT_S = 5.0


def _run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from blocking code, even inside an event loop's thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _call_launcher(
    session_bus: str, interface: str, member: str, signature: str = "", body: Sequence[Any] = ()
) -> list[Any]:
    bus = await open_bus(session_bus)
    try:
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
    finally:
        await close_bus(bus)


def a11y_bus_address(session_bus: str) -> str | None:
    """The accessibility bus address, or None while org.a11y.Bus has no owner yet."""
    try:
        (address,) = _run_async(_call_launcher(session_bus, A11Y_BUS_NAME, "GetAddress"))
    except CallFailed as exc:
        if exc.error_name in NOT_YET:
            return None
        raise ConnectionError(f"org.a11y.Bus.GetAddress failed: {exc}") from exc
    return str(address)


def enable_a11y(session_bus: str) -> None:
    """Set org.a11y.Status.IsEnabled: toolkits that ask (Qt, WebKit ...) then turn their bridge on."""
    try:
        _run_async(
            _call_launcher(
                session_bus, PROPERTIES, "Set", "ssv", [A11Y_STATUS, "IsEnabled", Variant("b", True)]
            )
        )
    except CallFailed as exc:
        raise ConnectionError(f"setting org.a11y.Status.IsEnabled failed: {exc}") from exc
