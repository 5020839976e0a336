"""MCP over the process's stdin and stdout, read and written on the event loop.

The MCP SDK's ``mcp.server.stdio.stdio_server`` reads every line and writes and flushes every
answer through anyio's worker-thread file wrappers: three thread hops a call, most of the per-call
floor of a stdio server. :func:`stdio_streams` gives ``Server.run`` a pair of object streams that
read and write the descriptors directly, in the tasks that receive and send (no task of their own
hands messages over: each hand-over is a task switch): non-blocking, waiting for them in the event
loop's selector (a regular file, which a selector cannot wait for, is read and written as it is).

It keeps the SDK transport's contract: one JSON-RPC message per line, UTF-8; a line that is not a
JSON-RPC message is handed to the server as the exception that says so (the SDK's transport does
the same, and its server logs it and carries on); end of input ends the read stream, and with it
``Server.run``; an answer is written whole before the next one, even if its sender is cancelled
once it has begun, and the server waits while the client is not reading (the write stream has no
buffer). While serving, fd 0 reads the null device and fd 1 writes to stderr, so a child process
or a stray ``print`` never reaches the protocol; both are put back on the way out.

POSIX only (fcntl, and a selector that waits for pipes): on Windows :mod:`deskrig.serving` serves
through the SDK's transport. This module is imported before ``initialize`` is answered: it imports
only the SDK's message types, which the floor imports anyway, and orjson (about 1 ms after them).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator

import anyio
import mcp_types as types
import orjson
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import SessionMessage

assert sys.platform != "win32", "POSIX only"  # and for mypy --platform win32: the rest is not checked

log = logging.getLogger(__name__)

#: Bytes read from stdin at most per read, into one buffer kept for all reads (``os.read`` of 1 MiB
#: would allocate and free 1 MiB per message, 17 µs): a 5 MB ``set_clipboard`` line arrives in a
#: few reads.
READ_SIZE = 1 << 20
#: What a pipe is asked to hold (Linux's default for an unprivileged process may go up to 1 MiB;
#: a pipe starts at 64 KiB): a full-screen screenshot's answer (about 160 kB) then goes in one
#: write, without waiting for the client to read the first 64 KiB.
PIPE_SIZE = 1 << 20

ReadStream = ObjectReceiveStream[SessionMessage | Exception]
WriteStream = ObjectSendStream[SessionMessage]


@contextlib.contextmanager
def _claimed(std_fd: int, diversion: int) -> Iterator[int]:
    """Serve the protocol from a non-blocking duplicate of ``std_fd``, and point ``std_fd`` at
    ``diversion`` meanwhile; put both back on the way out (the flags are shared with whoever else
    holds the same open file, a terminal's shell for one). A regular file never blocks: it is read
    and written as it is, without the selector (which cannot wait for one)."""
    wire = fcntl.fcntl(std_fd, fcntl.F_DUPFD_CLOEXEC, 3)
    flags = fcntl.fcntl(wire, fcntl.F_GETFL)
    os.dup2(diversion, std_fd)
    try:
        fcntl.fcntl(wire, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        if stat.S_ISFIFO(os.fstat(wire).st_mode) and hasattr(fcntl, "F_SETPIPE_SZ"):
            with contextlib.suppress(OSError):  # over the system's limit: the pipe stays as it is
                fcntl.fcntl(wire, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        yield wire
    finally:
        fcntl.fcntl(wire, fcntl.F_SETFL, flags)
        os.dup2(wire, std_fd)
        os.close(wire)


async def _read_chunk(fd: int, buffer: bytearray) -> memoryview:
    """What ``fd`` has to read, in ``buffer`` (valid until the next read); empty at end of input."""
    while True:
        try:
            return memoryview(buffer)[: os.readv(fd, (buffer,))]
        except BlockingIOError:
            await anyio.wait_readable(fd)


async def _write_line(fd: int, line: bytes) -> None:
    """``line`` and a newline, in one ``writev`` while the pipe has room (a 200 kB answer is not
    copied to add its newline); the rest as the pipe drains."""
    try:
        written = os.writev(fd, (line, b"\n"))
    except BlockingIOError:
        written = 0
    if written == len(line) + 1:
        return
    rest = memoryview(line + b"\n")[written:]  # a full pipe: the copy is the rare case
    # A line begun is finished even if its sender is cancelled meanwhile (a progress notification
    # of a request that the client cancels): half a line would break every line after it.
    with anyio.CancelScope(shield=written > 0) as finishing:
        while rest:
            try:
                rest = rest[os.write(fd, rest) :]
            except BlockingIOError:
                await anyio.wait_writable(fd)
                continue
            finishing.shield = True


def _parsed(line: bytes | bytearray | str) -> SessionMessage | Exception:
    """A line's message, or the exception that says why it is none (the SDK's transport hands that
    on to the server, which logs it). Invalid UTF-8 is read as the SDK's reader reads it: as U+FFFD."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:
        if isinstance(line, str) or line.isascii():
            return exc
        try:
            line.decode()
        except UnicodeDecodeError:
            return _parsed(line.decode(errors="replace"))
        return exc


class _LineReader(ObjectReceiveStream[SessionMessage | Exception]):
    """The messages of ``fd``'s lines, read as the server asks for the next one, in its task: no
    reader task of its own hands them over (each hand-over is a task switch, tens of µs on a CPU
    that was idle). End of input ends the stream."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray(READ_SIZE)
        #: What was read after the last complete line.
        self._pending = bytearray()
        #: Lines read and not yet asked for.
        self._lines: deque[bytearray] = deque()
        self._ended = False
        self._closed = False

    async def receive(self) -> SessionMessage | Exception:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._lines:
                return _parsed(self._lines.popleft())
            if self._ended:
                raise anyio.EndOfStream
            chunk = await _read_chunk(self._fd, self._buffer)
            pending = self._pending
            if not chunk:
                self._ended = True
                if pending.strip():  # a last line without its newline, as the SDK's reader takes it
                    self._lines.append(pending[:])
                continue
            start = len(pending)  # no newline before this chunk's first byte
            pending += chunk
            end = pending.rfind(b"\n", start)  # the last complete line's end
            if end < 0:
                continue
            # A blank line is no message (the SDK's reader passes it on as one).
            self._lines.extend(line for line in pending[:end].split(b"\n") if line.strip())
            del pending[: end + 1]

    async def aclose(self) -> None:
        self._closed = True


#: How orjson writes a response's result as it is: a value it would write otherwise than
#: pydantic-core (a datetime, a dataclass, a subclass of str, int, float, list or dict) is refused,
#: as is any other that is not JSON data, and the message is then dumped by pydantic.
_RESULT_AS_IS = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)
_RESPONSE_FIELDS = frozenset(types.JSONRPCResponse.model_fields)


def message_line(message: types.JSONRPCMessage) -> bytes:
    """``message`` as one line of JSON, without its newline: dumped to JSON data by pydantic (as
    the SDK's transport dumps it), written out by orjson, which copies a 200 kB base64 image in
    10 µs where pydantic-core's writer takes 127 µs to check it byte by byte. The bytes are the
    same; pydantic-core writes what orjson refuses (an integer beyond 64 bits).

    A response's result is JSON data already (the SDK's result serializer dumped it): orjson
    writes it as it is, without pydantic's walk over every value (35 µs of a screenshot's answer
    on a CPU that was idle)."""
    if type(message) is types.JSONRPCResponse and message.model_fields_set == _RESPONSE_FIELDS:
        try:
            return orjson.dumps(
                {"jsonrpc": message.jsonrpc, "id": message.id, "result": message.result}, option=_RESULT_AS_IS
            )
        except orjson.JSONEncodeError:
            pass
    try:
        return orjson.dumps(message.model_dump(mode="json", by_alias=True, exclude_unset=True))
    except orjson.JSONEncodeError:
        return message.__pydantic_serializer__.to_json(message, by_alias=True, exclude_unset=True)


class _LineWriter(ObjectSendStream[SessionMessage]):
    """Each message sent written to ``fd`` as one line, in the sender's task (no writer task of its
    own to hand it to), whole before the next one is begun; ``first_written`` is called once the
    first is out. When the client stops reading (a closed pipe), the rest is dropped: its hang-up
    on stdin ends the server."""

    def __init__(self, fd: int, first_written: Callable[[], None] | None) -> None:
        self._fd = fd
        self._first_written = first_written
        # Taken without a checkpoint when free, as it is but while the client lags behind.
        self._writing = anyio.Lock(fast_acquire=True)
        self._closed = False

    async def send(self, item: SessionMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        line = message_line(item.message)
        async with self._writing:
            try:
                await _write_line(self._fd, line)
            except BrokenPipeError:
                log.debug("the stdio client closed its end of stdout; dropping an answer")
        if self._first_written is not None:
            first_written, self._first_written = self._first_written, None
            first_written()

    async def aclose(self) -> None:
        self._closed = True


@contextlib.asynccontextmanager
async def stdio_streams(
    first_written: Callable[[], None] | None = None,
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """The server's ends of stdin and stdout, for ``Server.run``, until the block exits; reading
    stops then. ``first_written`` is called once the first message is written (a server's first
    is its ``initialize`` answer)."""
    with contextlib.ExitStack() as claims:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            stdin = claims.enter_context(_claimed(0, null))
        finally:
            os.close(null)
        stdout = claims.enter_context(_claimed(1, 2))
        read, write = _LineReader(stdin), _LineWriter(stdout, first_written)
        try:
            yield read, write
        finally:
            await read.aclose()
            await write.aclose()
