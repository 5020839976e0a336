"""D-Bus plumbing for AT-SPI: opening buses and calling methods on one application's objects.

Failures here are internal (:class:`CallFailed`, :class:`Disconnected`); the client in
:mod:`deskrig.a11y.atspi` turns them into :class:`~deskrig.errors.DeskrigError` at its boundary,
because only it knows whether a vanished object means a stale element or a dead app.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from dbus_fast import Message, MessageFlag, MessageType
from dbus_fast.aio import MessageBus
from dbus_fast.errors import DBusFastError

log = logging.getLogger(__name__)

#: Requests in flight per batch (:meth:`AppConnection.call_many`); 32-128 measured fastest
#: against GTK. Concurrent batches add up: a full socket buffer then waits (see _FullBufferWaits).
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


class _FullBufferWaits:
    """The bus socket as dbus-fast's writer sees it: a full send buffer sends 0 bytes, not an error.

    dbus-fast 5.2's ``_MessageWriter`` also writes straight from ``send()`` (not only when the
    loop reports the socket writable) and takes any exception from ``socket.send`` for a lost
    connection. When the peer reads slower than we ask (20 clients snapshotting one GTK app) the
    non-blocking socket's buffer fills, ``send`` raises EAGAIN, and the writer closes the
    connection: every pending call fails, and calls already on their way hit EBADF. Sending
    0 bytes instead is what a partial write looks like to the writer, so it keeps the rest of the
    message and resumes when the loop reports the socket writable. Real errors (EPIPE, ...) still
    raise. File-descriptor passing (``sendmsg``) is never negotiated on our connections.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def send(self, data: bytes | memoryview) -> int:
        try:
            return self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            return 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


async def open_bus(address: str) -> MessageBus:
    """Connect and authenticate to a bus or peer address; raises :class:`Disconnected`."""
    try:
        bus = await MessageBus(bus_address=address).connect()
    except (OSError, EOFError, DBusFastError) as exc:
        raise Disconnected(f"cannot connect to {address}: {exc}") from exc
    writer = bus._writer
    sock = getattr(writer, "sock", None)
    if writer is not None and isinstance(sock, socket.socket):
        writer.sock = _FullBufferWaits(sock)  # type: ignore[assignment]
    else:  # a dbus-fast whose writer we do not know; it may or may not have the bug
        log.warning("a11y: unknown dbus-fast message writer; a full socket buffer may drop the connection")
    return bus


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
    flags: MessageFlag = MessageFlag.NONE,
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
        flags=flags,
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
            while unanswered < MAX_IN_FLIGHT and next_index < len(requests) and not finished.done():
                if not self._bus.connected:  # closed while we were sending (by a reply callback)
                    finished.set_exception(Disconnected("the connection closed"))
                    return
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
                try:
                    self._bus._call(message, partial(on_reply, index))
                except OSError as exc:  # the socket was closed while we were sending
                    if not finished.done():
                        finished.set_exception(Disconnected(f"the connection closed ({exc})"))
                    return

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
