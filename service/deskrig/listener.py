"""The HTTP port, claimed before anything else starts.

Apart from :mod:`deskrig.guard` (which imports uvicorn, a few tenths of a second): a rig binds its
port first and starts its display at once, while the HTTP stack is imported beside it.
"""

from __future__ import annotations

import errno
import socket

from deskrig.errors import DeskrigError, ErrorCode


def bind_listener(host: str, port: int) -> socket.socket:
    """Claim the HTTP address before anything else starts, so that a port in use fails at once
    (one line, nothing started) rather than after the display and the app are up.

    The socket is bound but not listening: until the server starts, connections are refused
    rather than queued behind a rig that is still starting. Port 0 picks a free port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not the default 0: asyncio turns Nagle off (TCP_NODELAY) only on accepted
    # sockets whose protocol says TCP. With Nagle on, uvicorn's separate header and body writes
    # wait for the client's delayed ACK: about 40 ms on every reply over a kept-alive connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a previous run's TIME_WAIT
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        hint = (
            " (another rig or server uses it; choose another port)" if exc.errno == errno.EADDRINUSE else ""
        )
        message = f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}"
        # The message says it all: one line on the command line, no generic remediation after it.
        raise DeskrigError(ErrorCode.INVALID_ARGUMENT, message, remediation="") from exc
    return sock
