"""Timing a tool end to end over MCP/HTTP: the server on a local port in a thread, and a real
MCP client calling it, or a bare JSON-RPC one.

The SDK's ``mcp.Client`` validates every structured result against the tool's output schema with
``jsonschema``, in pure Python, paying for each value it checks: for a 261-element
``get_app_state`` that is most of what the call costs (``deskrig.bench.actions`` times it apart).
The bare client (initialize, then ``tools/call`` POSTs, replies parsed as JSON) shows what the
server and the protocol cost without it, as a client with a compiled validator (the TypeScript
SDK's ajv) or none would see. It speaks HTTP/1.1 with the standard library's ``http.client`` on one
kept-alive connection: httpx (what the SDK's client uses) spent 1 to 1.5 ms of CPU a call in Python
on building the request and reading the reply, in the same process as the server it measures.
"""

from __future__ import annotations

import gc
import http.client
import itertools
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio

from deskrig.bench.stats import Timing, measure_async
from deskrig.client import connect
from deskrig.http import Readiness
from deskrig.listener import bind_listener
from deskrig.server import DeskrigServer
from deskrig.serving import serve
from deskrig.transport import Transport


def _wait_listening(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the benchmark's HTTP server did not listen on {port}") from None
            time.sleep(0.05)


@contextmanager
def serving(server: DeskrigServer) -> Iterator[str]:
    """``server`` on a free local port, without auth; yields its MCP endpoint.

    What the process made so far (imports, the server) is frozen out of the garbage collector's
    passes while it serves, as ``deskrig rig run`` does once its server is built: otherwise the
    occasional full pass over it (about 90 ms here) lands in some call's time."""
    gc.freeze()
    listener = bind_listener("127.0.0.1", 0)
    port = int(listener.getsockname()[1])
    stop = threading.Event()
    transport = Transport("http", "127.0.0.1", port, no_auth=True)
    thread = threading.Thread(
        target=serve,
        args=(server, transport, listener, None, lambda: Readiness(ready=True, checks={}), stop),
        daemon=True,
    )
    thread.start()
    _wait_listening(port)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop.set()
        thread.join(10)
        gc.unfreeze()


def over_http(server: DeskrigServer, tool: str, arguments: dict[str, Any], name: str, runs: int) -> Timing:
    """``runs`` calls of ``tool`` with ``arguments`` through ``mcp.Client`` over HTTP."""

    async def run(url: str) -> Timing:
        async with connect(url) as client:

            async def call() -> None:
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, result

            return await measure_async(name, call, runs)

    with serving(server) as url:
        return anyio.run(run, url)


#: The stateless protocol revision, whose requests carry their envelope in ``_meta`` and headers.
STATELESS_VERSION = "2026-07-28"


class BareMcp:
    """A bare JSON-RPC MCP client over HTTP: the handshake-era ``initialize`` (so the server gives it
    a session, which recordings are scoped to), then ``tools/call`` POSTs whose replies are parsed as
    JSON and nothing more: no output schema validation. Blocking; one kept-alive connection, opened
    again (and the request sent again) when the server has closed it meanwhile (its keep-alive
    timeout), which is before the request was read.

    ``stateless``: no handshake; each call is a stateless (2026-07-28) request instead, its
    protocol version, client and capabilities in its ``_meta`` and its method and tool in headers."""

    def __init__(self, url: str, token: str | None = None, *, stateless: bool = False) -> None:
        self.url = url
        parts = urlsplit(url)
        assert parts.scheme == "http" and parts.hostname, url
        self._path = parts.path or "/"
        self._connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=30)
        self.stateless = stateless
        self._headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        if stateless:
            self._headers["MCP-Protocol-Version"] = STATELESS_VERSION
        self._ids = itertools.count(1)

    def __enter__(self) -> BareMcp:
        if self.stateless:
            return self
        self._post(
            {
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "deskrig-bench", "version": "1"},
                },
            }
        )
        self._post({"method": "notifications/initialized"})
        return self

    def __exit__(self, *exc: object) -> None:
        self._connection.close()

    def _post(self, message: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        status, content_type, content = self._exchange(body, {**self._headers, **(headers or {})})
        if status >= 400:
            raise RuntimeError(f"HTTP {status} from {self.url}: {content[:500]!r}")
        if content_type.startswith("text/event-stream"):
            text = content.decode()
            return json.loads(next(line[5:] for line in text.splitlines() if line.startswith("data:")))
        return json.loads(content) if content.strip() else None

    def _exchange(self, body: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
        """One POST on the kept-alive connection: the reply's status, content type and body."""
        for attempt in (1, 2):
            try:
                self._connection.request("POST", self._path, body, headers)
                reply = self._connection.getresponse()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._connection.close()
                if attempt == 2:
                    raise
        content = reply.read()
        session = reply.getheader("mcp-session-id")
        if session is not None:
            self._headers["mcp-session-id"] = session
        return reply.status, reply.getheader("content-type", ""), content

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's structured result; AssertionError when the call failed."""
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        headers = None
        if self.stateless:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
                "io.modelcontextprotocol/clientInfo": {"name": "deskrig-bench", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            headers = {"Mcp-Method": "tools/call", "Mcp-Name": tool}
        reply = self._post({"id": next(self._ids), "method": "tools/call", "params": params}, headers)
        result = reply["result"]
        assert not result.get("isError"), reply
        return result.get("structuredContent") or {}
