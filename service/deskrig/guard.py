"""The HTTP guard shared by a rig's HTTP face and the orchestrator's API: a Host check
(DNS-rebinding protection), then bearer auth, as a plain ASGI middleware; and the uvicorn
settings both servers share (a deadline on request heads, keep-alive, shutdown logging).

It sits below both (see pyproject.toml's ``[tool.importlinter]``): the orchestrator uses it without
importing the rig's MCP server.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from collections.abc import Callable
from email.utils import formatdate
from types import FrameType
from typing import Any

import h11
import uvicorn
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from deskrig.config import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT
from deskrig.error_responses import http_error
from deskrig.errors import ErrorCode, ErrorInfo
from deskrig.identity import ANONYMOUS_IDENTITY, SCOPE_KEY, TokenTable
from deskrig.pages_auth import EXCHANGE_PATH, PageSessions, with_page_headers

log = logging.getLogger(__name__)

#: Paths reachable without a token: liveness and readiness probes (Docker HEALTHCHECK, k8s).
PUBLIC_PATHS = frozenset({"/healthz", "/readyz"})
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: Seconds an idle keep-alive connection stays open (see :func:`uvicorn_config`).
KEEP_ALIVE_TIMEOUT = 30
#: Key in the ASGI scope's ``state``: whether the request carried the token (or needs none).
AUTHORIZED = "deskrig_authorized"


def host_patterns(allowed_hosts: list[str]) -> list[str]:
    """Host header values accepted: loopback names on any port, plus the configured ones as given.

    A name that resolves to loopback cannot carry a DNS-rebinding attack, whatever the port (and
    behind a port mapping the client's port is not ours). A configured entry without a port
    (``rig1``) accepts any port (``rig1:*``).
    """
    patterns = [f"{name}:*" for name in LOOPBACK_NAMES] + list(LOOPBACK_NAMES)
    for entry in allowed_hosts:
        patterns.append(entry if ":" in entry.lstrip("[") or entry.endswith("]") else f"{entry}:*")
        if ":" not in entry:
            patterns.append(entry)
    return patterns


def host_allowed(host: str, patterns: list[str]) -> bool:
    for pattern in patterns:
        if pattern.endswith(":*"):
            if host == pattern[:-2] or host.startswith(pattern[:-1]):
                return True
        elif host == pattern:
            return True
    return False


class GuardMiddleware:
    """Host check, then bearer auth, as a plain ASGI middleware so streaming responses pass untouched.

    ``pages``: the browser pages this server has (see :mod:`deskrig.pages_auth`); a request to one
    without a bearer token may carry their page-session cookie instead.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: TokenTable | None,
        host_patterns: list[str],
        pages: PageSessions | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.host_patterns = host_patterns
        self.pages = pages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if not host_allowed(host, self.host_patterns):
            refusal = ErrorInfo(
                code=ErrorCode.PERMISSION_DENIED,
                message=f"Host {host!r} is not allowed for this rig",
                details={"host": host},
                remediation="Connect by a loopback name (127.0.0.1, localhost, [::1]) or add the name to "
                "allowed_hosts.",
            )
            await http_error(refusal, 421)(scope, receive, send)
            return
        pages = self.pages
        if pages is not None and scope["path"] == EXCHANGE_PATH and scope["method"] == "POST":
            await pages.exchange(scope, receive, send, self.tokens)
            return
        identity: str | None = ANONYMOUS_IDENTITY
        if self.tokens is not None:
            scheme, _, credential = headers.get("authorization", "").partition(" ")
            identity = self.tokens.identify(credential.strip()) if scheme.lower() == "bearer" else None
            if identity is None and pages is not None:
                identity = pages.identify(scope, headers)
        if identity is None and scope["path"] not in PUBLIC_PATHS:
            if pages is not None and pages.wants_sign_in(scope, headers):
                await pages.sign_in_page(scope)(scope, receive, send)
                return
            refusal = ErrorInfo(
                code=ErrorCode.PERMISSION_DENIED,
                message="missing or wrong bearer token",
                remediation="Send `Authorization: Bearer <token>` with the token this server was given.",
            )
            challenge = {"www-authenticate": 'Bearer realm="deskrig"'}
            await http_error(refusal, 401, challenge)(scope, receive, send)
            return
        if identity is not None:
            scope[SCOPE_KEY] = identity
        scope.setdefault("state", {})[AUTHORIZED] = identity is not None
        if pages is not None and pages.is_page(scope["path"]):
            send = with_page_headers(send)
        await self.app(scope, receive, send)


@functools.lru_cache(maxsize=1)
def _http_date(second: int) -> bytes:
    return formatdate(second, usegmt=True).encode()


class RequestDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's headers and on each stall of its
    body, dating each response.

    uvicorn only times out idle keep-alive connections: a client that sends nothing, or a request
    head a byte at a time, holds a connection (and its memory) for ever. Here the head must be
    complete within ``header_timeout`` seconds of the connection opening or of the request's first
    byte; otherwise a partial head gets ``408 Request Timeout`` and the connection is closed.
    So does a request whose body stops coming (a ``Content-Length`` larger than what is sent):
    once ``body_timeout`` seconds pass without a byte of it while more is due, it gets 408 (just
    the close if its response has begun), and the handler waiting for the body sees the client
    gone. A body that keeps coming, however slowly, and a stall that is the server's own (uvicorn
    stops reading while a handler has not taken what came) are not cut off. The response is not
    bounded by either.
    """

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout)

    def data_received(self, data: bytes) -> None:
        self._date_responses()
        super().data_received(data)
        if self.conn.their_state is h11.SEND_BODY:  # a whole head, and more of its body is due
            self._disarm()
            self._arm(self.body_timeout)
        elif self.conn.their_state is not h11.IDLE:  # a whole request has arrived
            self._disarm()
        elif self._deadline is None:  # the first bytes of a request after a keep-alive pause
            self._arm(self.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _date_responses(self) -> None:
        """Date the responses to what arrives now: uvicorn's main loop did this every second, idle
        or not, which :class:`QuietServer`'s loop no longer does (a request takes its headers from
        the server state as its head is parsed, in ``super().data_received``)."""
        date = [(b"date", _http_date(int(time.time())))] if self.config.date_header else []
        self.server_state.default_headers = date + self.config.encoded_headers

    def _arm(self, timeout: float) -> None:
        self._deadline = self.loop.call_later(timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.SEND_BODY:
            if self.flow.read_paused:  # the stall is the handler's, not the client's
                self._arm(self.body_timeout)
                return
            # Where a response has begun (a 401 sent before the body was read), more bytes would
            # be taken as part of it: the close alone says it.
            answer = self.cycle is None or not self.cycle.response_started
            log.info("closed a connection whose request body stalled for %g s", self.body_timeout)
        elif self.conn.their_state is h11.IDLE:
            answer = bool(self.conn.trailing_data[0])  # a partial head; a silent connection is just closed
        else:
            return
        if answer:
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
            )
        self.transport.close()


class _ExceptionFilter(logging.Filter):
    """Drops the log records that carry an exception of one of ``kinds``."""

    def __init__(self, *kinds: type[BaseException]) -> None:
        super().__init__()
        self.kinds = kinds

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], self.kinds))


#: uvicorn's "Exception in ASGI application" for a request it cancelled at the end of its graceful
#: shutdown (an MCP session's open GET stream, a call blocked on a dead display): that cancellation
#: is the shutdown working, and its traceback would read like a crash in the log.
_SHUTDOWN_FILTER = _ExceptionFilter(asyncio.CancelledError)
#: The MCP SDK's "Error handling POST request" for a client gone before its request body was
#: whole (it hung up, or its body stalled past the deadline, which logs a line of its own): the
#: client's doing, not a fault of the server's, and its traceback would read like one.
_CLIENT_GONE_FILTER = _ExceptionFilter(ClientDisconnect)


def uvicorn_config(
    app: ASGIApp,
    *,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    **options: Any,
) -> uvicorn.Config:
    """The uvicorn settings every deskrig HTTP server shares, plus ``options``.

    The header and body deadlines above, and a keep-alive timeout well beyond clients' idle expiry (httpx,
    under the MCP SDK: 5 s, uvicorn's own default too): with equal timeouts a server under load
    closed an idle connection just as its client reused it, and the request died with a reset
    (``ReadError``). Now the client always drops an idle connection first.
    """
    logging.getLogger("uvicorn.error").addFilter(_SHUTDOWN_FILTER)  # idempotent: a set of filters
    logging.getLogger("mcp.server.streamable_http").addFilter(_CLIENT_GONE_FILTER)
    protocol = type(
        "RequestDeadlineProtocol",
        (RequestDeadlineProtocol,),
        {"header_timeout": header_timeout, "body_timeout": body_timeout},
    )
    return uvicorn.Config(
        app,
        http=protocol,
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT,
        log_level="warning",
        access_log=False,
        **options,
    )


class QuietServer(uvicorn.Server):
    """uvicorn's server, asleep while idle.

    uvicorn's main loop wakes ten times a second, to notice ``should_exit`` and to date its
    responses; sse-starlette's shutdown watcher, which the first event stream starts (every MCP
    session's GET stream is one) and which then runs until the process exits, wakes twice a second
    to see whether uvicorn is exiting. An idle rig paid both for nothing: a wake-up costs its
    container a few tenths of a millisecond of CPU, and issue 12 packs 64 idle rigs on two cores.

    Here the main loop waits for :meth:`exit` (or uvicorn's own signal handler) and nothing else;
    responses are dated as each request arrives (:class:`RequestDeadlineProtocol`); and the event
    streams served on this server's loop end on the same exit (:func:`event_streams_end_on_exit`)
    instead of the watcher's poll. ``on_exit`` is called in the event loop as soon as the server
    decides to exit (before it drains its connections), however it was asked to.
    """

    #: Set in the server's event loop when it is asked to exit; made when serving starts.
    _exit_asked: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None] = lambda: None) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        event_streams_end_on_exit()

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop, self._exit_asked = asyncio.get_running_loop(), asyncio.Event()
        if self.should_exit:  # asked before serving started
            self._exit_asked.set()
        _SERVER_EXITS[self._loop] = self._exit_asked
        try:
            await super().serve(sockets)
        finally:
            _SERVER_EXITS.pop(self._loop, None)

    async def main_loop(self) -> None:
        assert self._exit_asked is not None, "main_loop runs inside serve"
        await self.on_tick(0)  # uvicorn's first tick: its default headers
        await self._exit_asked.wait()  # set only with should_exit (exit, handle_exit)
        self._on_exit()

    def exit(self) -> None:
        """Stop serving, from any thread."""
        self.should_exit = True
        self._wake()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._wake()

    def _wake(self) -> None:
        loop, asked = self._loop, self._exit_asked
        if loop is not None and asked is not None and not loop.is_closed():
            loop.call_soon_threadsafe(asked.set)


#: The exit of the :class:`QuietServer` serving on each event loop, which its event streams await.
_SERVER_EXITS: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}


def event_streams_end_on_exit() -> None:
    """Make sse-starlette's event streams on a :class:`QuietServer`'s loop end when that server is
    asked to exit, woken by it, rather than by a watcher polling twice a second (its only way to
    learn of the exit). Streams on any other loop keep the library's own wait. Idempotent.

    sse-starlette has no public hook for this: its streams await the static method
    ``EventSourceResponse._listen_for_exit_signal``, which this replaces (the rig's tests fail if
    an idle rig wakes to poll, or if a stream holds a stopping rig up)."""
    from sse_starlette.sse import EventSourceResponse

    library_wait = getattr(EventSourceResponse, "_listen_for_exit_signal", None)
    if library_wait is None:
        log.warning("sse-starlette has no _listen_for_exit_signal: its watcher polls for the exit")
        return
    if getattr(library_wait, "_deskrig", False):
        return

    async def until_exit() -> None:
        exiting = _SERVER_EXITS.get(asyncio.get_running_loop())
        if exiting is None:
            await library_wait()
        else:
            await exiting.wait()

    until_exit._deskrig = True  # type: ignore[attr-defined]
    EventSourceResponse._listen_for_exit_signal = staticmethod(until_exit)  # type: ignore[method-assign]
