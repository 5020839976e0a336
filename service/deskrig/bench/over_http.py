"""Timing a tool end to end over MCP/HTTP: the server on a local port in a thread, a real MCP
client calling it."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import anyio

from deskrig.bench.stats import Timing, measure_async
from deskrig.client import connect
from deskrig.guard import bind_listener
from deskrig.http import Readiness
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


def over_http(server: DeskrigServer, tool: str, arguments: dict[str, Any], name: str, runs: int) -> Timing:
    """``runs`` calls of ``tool`` with ``arguments`` through an MCP client over HTTP."""
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

    async def run() -> Timing:
        async with connect(f"http://127.0.0.1:{port}/mcp") as client:

            async def call() -> None:
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, result

            return await measure_async(name, call, runs)

    try:
        return anyio.run(run)
    finally:
        stop.set()
        thread.join(10)
