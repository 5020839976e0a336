"""D-Bus plumbing for AT-SPI: opening buses and calling methods on one application's objects.

Failures here are internal (:class:`CallFailed`, :class:`Disconnected`); the client in
:mod:`deskrig.a11y.atspi` turns them into :class:`~deskrig.errors.DeskrigError` at its boundary,
because only it knows whether a vanished object means a stale element or a dead app.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from dbus_fast import Message, MessageType
from dbus_fast.aio import MessageBus
from dbus_fast.errors import DBusFastError

log = logging.getLogger(__name__)

#: Requests in flight per connection. dbus-fast drops a connection when about a thousand are
#: queued at once; 32-128 measured fastest against GTK.
MAX_IN_FLIGHT = 64

UNKNOWN_OBJECT = "org.freedesktop.DBus.Error.UnknownObject"
UNKNOWN_METHOD = "org.freedesktop.DBus.Error.UnknownMethod"
UNKNOWN_INTERFACE = "org.freedesktop.DBus.Error.UnknownInterface"
SERVICE_UNKNOWN = "org.freedesktop.DBus.Error.ServiceUnknown"
NAME_HAS_NO_OWNER = "org.freedesktop.DBus.Error.NameHasNoOwner"
NO_REPLY = "org.freedesktop.DBus.Error.NoReply"
#: Errors that mean the peer is gone rather than that one object or method is missing.
PEER_GONE_ERRORS = frozenset({SERVICE_UNKNOWN, NAME_HAS_NO_OWNER, NO_REPLY})


class CallFailed(Exception):
    """The peer answered a method call with a D-Bus error."""

    def __init__(self, error_name: str, text: str) -> None:
        super().__init__(f"{error_name}: {text}")
        self.error_name = error_name
        self.text = text

    @property
    def object_gone(self) -> bool:
        return self.error_name == UNKNOWN_OBJECT

    @property
    def peer_gone(self) -> bool:
        return self.error_name in PEER_GONE_ERRORS


#: What :meth:`AppConnection.call_many` gives back per request: the reply body, or the error.
Reply = list[Any] | CallFailed


class Disconnected(Exception):
    """The connection closed (the app exited, or the bus went away)."""


async def open_bus(address: str) -> MessageBus:
    """Connect and authenticate to a bus or peer address; raises :class:`Disconnected`."""
    try:
        return await MessageBus(bus_address=address).connect()
    except (OSError, EOFError, DBusFastError) as exc:
        raise Disconnected(f"cannot connect to {address}: {exc}") from exc


async def close_bus(bus: MessageBus) -> None:
    if bus.connected:
        bus.disconnect()
        await bus.wait_for_disconnect()  # type: ignore[no-untyped-call]


async def call(
    bus: MessageBus,
    destination: str | None,
    path: str,
    interface: str,
    member: str,
    signature: str = "",
    body: Sequence[Any] = (),
) -> list[Any]:
    """One method call; returns the reply body or raises :class:`CallFailed` / :class:`Disconnected`."""
    if not bus.connected:
        raise Disconnected("the connection is closed")
    message = Message(
        destination=destination,
        path=path,
        interface=interface,
        member=member,
        signature=signature,
        body=list(body),
    )
    try:
        reply = await bus.call(message)
    except (OSError, EOFError, DBusFastError) as exc:
        raise Disconnected(str(exc)) from exc
    if reply is None:  # dbus-fast completes pending calls with None when the socket closes
        raise Disconnected("the connection closed before the reply arrived")
    result = _reply_body(reply)
    if isinstance(result, CallFailed):
        raise result
    return result


def _reply_body(reply: Message) -> Reply:
    if reply.message_type is MessageType.ERROR:
        text = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
        return CallFailed(reply.error_name or "unknown error", text.strip())
    return list(reply.body)


@dataclass(frozen=True, slots=True)
class Request:
    """One method call on one of an app's objects."""

    path: str
    interface: str
    member: str
    signature: str = ""
    body: tuple[Any, ...] = ()


class AppConnection:
    """The way to one application's accessible objects.

    Either a private peer-to-peer connection (``destination`` is None: the app is the only peer)
    or the shared a11y bus daemon (``destination`` is the app's unique name). Object references
    in replies always name the app by its unique name on the a11y bus, ``bus_name``.
    """

    def __init__(self, bus_name: str, pid: int, bus: MessageBus, *, peer_to_peer: bool) -> None:
        self.bus_name = bus_name
        self.pid = pid
        self.peer_to_peer = peer_to_peer
        #: Whether the app answers ``Properties.GetAll``. Qt's AT-SPI adaptor answers only
        #: ``Properties.Get``; the fetcher learns this on the first refusal and asks one by one.
        self.answers_get_all = True
        self._bus = bus
        # When the app exits, dbus-fast fails the connection's disconnect future (EOFError);
        # awaiting it here retrieves that, instead of asyncio logging it as never retrieved.
        self._watch: asyncio.Future[Any] | None = (
            asyncio.ensure_future(bus.wait_for_disconnect()) if peer_to_peer else None  # type: ignore[no-untyped-call]
        )
        if self._watch is not None:
            self._watch.add_done_callback(_log_disconnect)

    @property
    def alive(self) -> bool:
        return bool(self._bus.connected)

    async def call(
        self, path: str, interface: str, member: str, signature: str = "", body: Sequence[Any] = ()
    ) -> list[Any]:
        (reply,) = await self.call_many([Request(path, interface, member, signature, tuple(body))])
        if isinstance(reply, CallFailed):
            raise reply
        return reply

    async def call_many(self, requests: Sequence[Request]) -> list[Reply]:
        """Send all ``requests`` with at most MAX_IN_FLIGHT unanswered; replies in request order.

        Callbacks rather than a task per call: at a few hundred calls per snapshot the asyncio
        task machinery cost more CPU than the D-Bus work itself. ``_call`` (reply callback) is
        dbus-fast's own primitive under ``MessageBus.call``.
        """
        if not requests:
            return []
        if not self._bus.connected:
            raise Disconnected("the connection is closed")
        destination = None if self.peer_to_peer else self.bus_name
        replies: list[Reply | None] = [None] * len(requests)
        finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        next_index = 0
        unanswered = 0

        def send_more() -> None:
            nonlocal next_index, unanswered
            while unanswered < MAX_IN_FLIGHT and next_index < len(requests):
                index, request = next_index, requests[next_index]
                next_index += 1
                unanswered += 1
                message = Message(
                    destination=destination,
                    path=request.path,
                    interface=request.interface,
                    member=request.member,
                    signature=request.signature,
                    body=list(request.body),
                    validate=False,  # names and paths are constants or came from the app itself
                )
                self._bus._call(message, partial(on_reply, index))

        def on_reply(index: int, reply: Message | None, error: Exception | None) -> None:
            nonlocal unanswered
            unanswered -= 1
            if finished.done():
                return
            if reply is None:
                finished.set_exception(Disconnected(f"the connection closed ({error or 'no reply'})"))
                return
            replies[index] = _reply_body(reply)
            if next_index < len(requests):
                send_more()
            elif unanswered == 0:
                finished.set_result(None)

        send_more()
        await finished
        return cast(list[Reply], replies)

    async def close(self) -> None:
        """Closes the private connection; the shared daemon connection belongs to the client."""
        if self._watch is not None:
            await close_bus(self._bus)
            await asyncio.wait([self._watch])


def _log_disconnect(watch: asyncio.Future[Any]) -> None:
    if not watch.cancelled() and watch.exception() is not None:
        log.debug("a11y: peer-to-peer connection closed: %r", watch.exception())
