"""AT-SPI object events from every app on the accessibility bus, for the live mirror.

Toolkit bridges emit an event only when some client has registered for it with the registry
(``Registry.RegisterEvent``); the feed registers the kinds the mirror needs, adds one match rule on
the accessibility bus daemon, and hands each event to a callback. Events travel from the app
through the daemon in the order the app sent them, so a method call to the app through the same
daemon (:meth:`EventFeed.sync`) returns only after every event the app sent before answering has
been handed over: the mirror is then as current as a fetch made at that moment.

``generation`` counts subscriptions: a tree built under an older generation may have missed
events (the feed was dropped or resubscribed) and must be fetched again. Unsubscribing deregisters
the kinds too, so that the bridges stop emitting what nobody hears. ``received`` counts the
events handed over: a reader that saw the same generation and count before has seen no event since.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from dbus_fast import Message, MessageType
from dbus_fast.aio import MessageBus

from deskrig.a11y import constants as c
from deskrig.a11y.connection import call

log = logging.getLogger(__name__)

EVENT_INTERFACE = c.IFACE_PREFIX + "Event.Object"
REGISTRY_PATH = "/org/a11y/atspi/registry"
REGISTRY_INTERFACE = c.IFACE_PREFIX + "Registry"
#: What a change to an app's tree can show up as; the bridges filter the rest out.
EVENT_KINDS = (
    "object:children-changed",
    "object:property-change",
    "object:state-changed",
    "object:bounds-changed",
    "object:text-changed",
    "object:value-changed",
)
MATCH_RULE = f"type='signal',interface='{EVENT_INTERFACE}'"
_DBUS = "org.freedesktop.DBus"


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    """One AT-SPI object event: ``member`` (``StateChanged``, ...) from ``path`` of ``sender``."""

    sender: str
    path: str
    member: str
    detail: str
    at: float  # time.monotonic()


class EventFeed:
    """The accessibility bus's object events, handed to ``on_event`` as they arrive."""

    def __init__(self, bus: MessageBus, on_event: Callable[[ObjectEvent], None]) -> None:
        self._bus = bus
        self._on_event = on_event
        self.generation = 0
        #: Events handed to ``on_event`` so far (of every app).
        self.received = 0
        self._subscribed = False
        #: Subscribing and unsubscribing take turns: interleaved, the registry could end up with
        #: the kinds deregistered under a feed that counts itself subscribed, and hear nothing.
        self._turns = asyncio.Lock()

    @property
    def subscribed(self) -> bool:
        """True while events arrive: subscribed, and the bus connection is up."""
        return self._subscribed and bool(self._bus.connected)

    async def subscribe(self) -> None:
        async with self._turns:
            if self._subscribed:
                return
            self._bus.add_message_handler(self._handle)
            await call(self._bus, _DBUS, "/org/freedesktop/DBus", _DBUS, "AddMatch", "s", [MATCH_RULE])
            await self._to_registry("RegisterEvent")
            self.generation += 1
            self._subscribed = True

    async def unsubscribe(self) -> None:
        """Stop listening: every mirrored tree is then fetched afresh until :meth:`subscribe`."""
        async with self._turns:
            if not self._subscribed:
                return
            self._subscribed = False
            self.generation += 1
            self._bus.remove_message_handler(self._handle)
            if self._bus.connected:
                await call(self._bus, _DBUS, "/org/freedesktop/DBus", _DBUS, "RemoveMatch", "s", [MATCH_RULE])
                await self._to_registry("DeregisterEvent")

    async def _to_registry(self, method: str) -> None:
        """``method`` (RegisterEvent or DeregisterEvent) for each of :data:`EVENT_KINDS`."""
        for kind in EVENT_KINDS:
            await call(self._bus, c.REGISTRY_BUS_NAME, REGISTRY_PATH, REGISTRY_INTERFACE, method, "s", [kind])

    async def sync(self, bus_name: str) -> None:
        """Return once every event ``bus_name`` sent before now has been handed to ``on_event``."""
        await call(self._bus, bus_name, c.ROOT_PATH, c.ACCESSIBLE, "GetRole")

    def _handle(self, message: Message) -> None:
        if (
            message.message_type is not MessageType.SIGNAL
            or message.interface != EVENT_INTERFACE
            or not self._subscribed
            or message.sender is None
            or message.path is None
        ):
            return
        detail = message.body[0] if message.body and isinstance(message.body[0], str) else ""
        self.received += 1
        self._on_event(
            ObjectEvent(message.sender, message.path, message.member or "", detail, time.monotonic())
        )
