"""The DAMAGE connection's own reader (``XUnits``): X events, errors and replies cut whole out of
the bytes a socket delivers, however the kernel splits them. Over a socket pair standing in for
the X server's end; tests/desktop/test_x11.py drives the damage counter on a real Xvfb."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from Xlib.error import ConnectionClosedError

from deskrig.desktop.x11_capture import X_UNIT, XUnits


def unit(kind: int, extra_words: int = 0, fill: int = 0) -> bytes:
    """An X unit of ``kind`` (first byte) whose CARD32 at byte 4 counts ``extra_words`` more
    4-byte words (replies and generic events), filled with ``fill``."""
    head = struct.pack("=BBHI", kind, fill, 7, extra_words)
    return head + bytes([fill]) * (X_UNIT - len(head) + 4 * extra_words)


@pytest.fixture
def server_and_units() -> Iterator[tuple[socket.socket, XUnits]]:
    server, client = socket.socketpair()
    units = XUnits(client)
    try:
        yield server, units
    finally:
        units.close()
        server.close()


def test_units_split_anywhere_come_out_whole_and_in_order(
    server_and_units: tuple[socket.socket, XUnits],
) -> None:
    server, units = server_and_units
    damage, configure = unit(91, fill=1), unit(22, fill=2)
    reply = unit(1, extra_words=3, fill=3)  # a reply with 12 bytes more
    generic = unit(0x80 | 35, extra_words=2, fill=4)  # a generic event sent by SendEvent
    error = unit(0, fill=5)
    stream = damage + configure + reply + generic + error
    received: list[bytes] = []
    for cut in range(0, len(stream), 13):  # pieces that end in the middle of units
        assert not units.readable()
        server.sendall(stream[cut : cut + 13])
        assert units.readable(1000)
        received += units.receive()
    assert received == [damage, configure, reply, generic, error]
    assert len(received[2]) == X_UNIT + 12 and len(received[3]) == X_UNIT + 8


def test_bytes_read_before_are_taken_first() -> None:
    """python-xlib's unparsed tail (a unit's first bytes) joins what the socket brings next."""
    server, client = socket.socketpair()
    first, second = unit(91, fill=6), unit(22, fill=7)
    units = XUnits(client, first[:10])
    try:
        server.sendall(first[10:] + second)
        assert units.receive() == [first, second]
    finally:
        units.close()
        server.close()


@pytest.mark.parametrize("use", ["receive", "send"])
def test_a_closed_connection_is_python_xlibs_connection_closed(
    server_and_units: tuple[socket.socket, XUnits], use: str
) -> None:
    """As on the backend's other connections, so that the desktop says DISPLAY_NOT_FOUND."""
    server, units = server_and_units
    server.close()
    with pytest.raises(ConnectionClosedError):
        units.receive() if use == "receive" else units.send(b"\x2b\x00\x01\x00")


def test_requests_reach_the_server_as_sent(server_and_units: tuple[socket.socket, XUnits]) -> None:
    server, units = server_and_units
    units.send(b"\x2b\x00\x01\x00")
    assert server.recv(16) == b"\x2b\x00\x01\x00"
