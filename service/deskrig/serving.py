"""Run an MCP server over stdio or HTTP until told to stop.

Used by ``deskrig serve`` (attach to an existing display) and ``deskrig rig run`` (inside the rig
supervisor). Both stop on a :class:`threading.Event`, set by a signal or by the app exiting.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import uvicorn
from mcp.server.stdio import stdio_server

from deskrig.a11y.access import A11yAccess
from deskrig.config import Settings
from deskrig.desktop import Desktop
from deskrig.errors import ConfigError
from deskrig.guard import uvicorn_config
from deskrig.http import Readiness, create_app
from deskrig.identity import TokenTable
from deskrig.launcher import AppLauncher, SubprocessLauncher
from deskrig.observation import Observer
from deskrig.recording.registry import RecordingRegistry
from deskrig.recording.watch import DisconnectWatch
from deskrig.security import SecurityContext
from deskrig.server import DeskrigServer
from deskrig.tools import Services
from deskrig.transport import Transport

log = logging.getLogger("deskrig.serving")

#: How often the stop event is polled from the event loop.
STOP_POLL_SECONDS = 0.1
#: How long a stopping server lets calls in flight finish before cancelling them (a long
#: type_text would otherwise hold the shutdown for as long as the app takes to read it). Longer
#: than the rig's own grace (rig.SERVE_STOP_GRACE, 5 s) after which it stops the desktop under
#: calls blocked in X: those then fail as tool errors rather than being cancelled mid-response.
GRACEFUL_SHUTDOWN_SECONDS = 8


def build_server(
    desktop: Desktop,
    settings: Settings,
    *,
    session_bus: str | None = None,
    launcher: AppLauncher | None = None,
    display: str | None = None,
) -> DeskrigServer:
    """The MCP server for one desktop. ``session_bus`` leads to its accessibility bus;
    ``launcher`` starts apps on it (default: plain subprocesses with this process's environment);
    ``display`` is the X display the recorder's ffmpeg grabs (default: $DISPLAY)."""
    security = SecurityContext.from_policy(settings.security)
    # Recording (issue 4): the recorder observes action tools (through the same observation path
    # as the screenshot tools), ends a session's recording when its client disconnects, and records
    # from boot with --record. Replay runs through the server's call path, handed to it per call.
    recorder = RecordingRegistry(Observer(desktop, security.blocklist), settings, session_bus, display)
    services = Services(
        desktop=desktop,
        settings=settings,
        security=security,
        a11y=A11yAccess(session_bus, desktop) if session_bus else None,
        launcher=launcher or SubprocessLauncher({}),
        recorder=recorder,
    )
    server = DeskrigServer(services)
    server.mcp.middleware.append(DisconnectWatch(recorder, desktop))
    if settings.record_dir:
        recorder.start_boot(Path(settings.record_dir).expanduser().absolute(), settings.record_video)
    return server


async def _wait_for(stop: threading.Event) -> None:
    while not stop.is_set():
        await anyio.sleep(STOP_POLL_SECONDS)


async def _serve_stdio(server: DeskrigServer, stop: threading.Event) -> None:
    async with stdio_server() as (read, write), anyio.create_task_group() as tg:

        async def stop_when_asked() -> None:
            await _wait_for(stop)
            tg.cancel_scope.cancel()

        tg.start_soon(stop_when_asked)
        await server.mcp.run(read, write, server.mcp.create_initialization_options())
        tg.cancel_scope.cancel()


async def _serve_http(
    server: DeskrigServer,
    transport: Transport,
    listener: socket.socket,
    tokens: TokenTable | None,
    readiness: Callable[[], Readiness],
    stop: threading.Event,
) -> None:
    app = create_app(
        server,
        tokens=tokens,
        allowed_hosts=transport.allowed_hosts,
        readiness=readiness,
        bind_host=transport.host,
    )
    config = uvicorn_config(
        app,
        header_timeout=server.services.settings.header_timeout,
        host=transport.host,
        port=transport.port,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    http = uvicorn.Server(config)

    async def stop_when_asked() -> None:
        # uvicorn takes SIGINT/SIGTERM itself while it serves: pass its stop on, as ours to it.
        while not (stop.is_set() or http.should_exit):
            await anyio.sleep(STOP_POLL_SECONDS)
        http.should_exit = True
        stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_when_asked)
        log.info("MCP over HTTP on http://%s:%d/mcp", transport.host, transport.port)
        await http.serve(sockets=[listener])
        tg.cancel_scope.cancel()
    if not http.started:
        raise ConfigError(f"could not serve HTTP on {transport.host}:{transport.port} (port in use?)")


def serve(
    server: DeskrigServer,
    transport: Transport,
    listener: socket.socket | None,
    tokens: TokenTable | None,
    readiness: Callable[[], Readiness],
    stop: threading.Event,
) -> None:
    """Block serving MCP until ``stop`` is set (or the stdio client hangs up, which sets it).

    HTTP serves on ``listener``, bound beforehand by :func:`deskrig.guard.bind_listener`."""
    try:
        if listener is None:
            anyio.run(_serve_stdio, server, stop)
        else:
            anyio.run(_serve_http, server, transport, listener, tokens, readiness, stop)
    finally:
        stop.set()
        if server.services.recorder is not None:
            server.services.recorder.close()  # finalise the turn folders and mp4s before exit
