"""Run an MCP server over stdio or HTTP until told to stop.

Used by ``deskrig serve`` (attach to an existing display) and ``deskrig rig run`` (inside the rig
supervisor). Both stop on a :class:`threading.Event`, set by a signal or by the app exiting.

``deskrig serve --stdio`` starts in two steps (:class:`DeferredServer`): MCP clients spawn stdio
servers on every start and wait for ``initialize``, so it is answered with the MCP SDK alone
imported; the tools, the desktop backend, imaging, accessibility and recording load after it. This
module therefore imports them inside the functions that need them (tests/server/test_stdio_start.py
fails if ``initialize`` is answered with any of them loaded).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from deskrig.config import Settings, ToolProfile
from deskrig.errors import ConfigError, DeskrigError, ErrorCode
from deskrig.mcp_face import mcp_server
from deskrig.transport import Transport

if TYPE_CHECKING:
    from deskrig.desktop import Desktop
    from deskrig.http import Readiness
    from deskrig.identity import TokenTable
    from deskrig.launcher import AppLauncher
    from deskrig.server import DeskrigServer
    from deskrig.services import AnyTool

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
    from deskrig.a11y.access import A11yAccess
    from deskrig.launcher import SubprocessLauncher
    from deskrig.observation import Observer
    from deskrig.recording.registry import RecordingRegistry
    from deskrig.recording.watch import DisconnectWatch
    from deskrig.security import SecurityContext
    from deskrig.server import DeskrigServer
    from deskrig.tools import Services

    security = SecurityContext.from_policy(settings.security)
    # Recording (issue 4): the recorder observes action tools (through the same observation path
    # as the screenshot tools), ends a session's recording when its client disconnects, and records
    # from boot with --record. Replay runs through the server's call path, handed to it per call.
    recorder = RecordingRegistry(Observer(desktop, security.blocklist), settings, session_bus, display)
    services = Services(
        desktop=desktop,
        settings=settings,
        security=security,
        a11y=A11yAccess(session_bus) if session_bus else None,
        launcher=launcher or SubprocessLauncher({}),
        recorder=recorder,
    )
    server = DeskrigServer(services)
    server.use(DisconnectWatch(recorder, desktop))
    if settings.record_dir:
        recorder.start_boot(Path(settings.record_dir).expanduser().absolute(), settings.record_video)
    return server


async def _wait_for(stop: threading.Event) -> None:
    while not stop.is_set():
        await anyio.sleep(STOP_POLL_SECONDS)


async def _serve_stdio(mcp: Server[Any], stop: threading.Event) -> None:
    async with stdio_server() as (read, write), anyio.create_task_group() as tg:

        async def stop_when_asked() -> None:
            await _wait_for(stop)
            tg.cancel_scope.cancel()

        tg.start_soon(stop_when_asked)
        await mcp.run(read, write, mcp.create_initialization_options())
        tg.cancel_scope.cancel()


async def _serve_http(
    server: DeskrigServer,
    transport: Transport,
    listener: socket.socket,
    tokens: TokenTable | None,
    readiness: Callable[[], Readiness],
    stop: threading.Event,
) -> None:
    import uvicorn  # the HTTP stack: not imported for stdio

    from deskrig.guard import uvicorn_config
    from deskrig.http import create_app

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
            anyio.run(_serve_stdio, server.mcp, stop)
        else:
            anyio.run(_serve_http, server, transport, listener, tokens, readiness, stop)
    finally:
        stop.set()
        if server.services.recorder is not None:
            server.services.recorder.close()  # finalise the turn folders and mp4s before exit


#: How long closing waits for a desktop being opened in the background, to close it too.
CLOSE_WAIT_SECONDS = 5.0


class ToolList(NamedTuple):
    specs: dict[str, AnyTool]
    #: As tools/list shows them.
    listed: list[types.Tool]


class DeferredServer:
    """The stdio front of ``deskrig serve``: answers ``initialize`` before the server exists.

    The server proper (``build`` over ``open_desktop``: tools, recorder) is built in threads that
    start when the client has its ``initialize`` answer, on the next message it sends; not before,
    as a thread importing beside the answer would hold it up for the GIL. tools/list waits for the
    tool list, tools/call for the server. A desktop that cannot be opened is logged, and each
    tools/call tries again and answers the error while it still cannot be (a display started after
    the server is then used; the client gets the structured error, not a dead server).
    """

    def __init__(
        self,
        profile: ToolProfile,
        open_desktop: Callable[[], Desktop],
        build: Callable[[Desktop], DeskrigServer],
    ) -> None:
        self.mcp = mcp_server(self._list_tools, self._call_tool)
        self.mcp.middleware.append(self._forward)
        self._profile = profile
        self._open_desktop = open_desktop
        self._build_server = build
        self._begin = threading.Event()
        self._tools: Future[ToolList] = Future()
        self._server: DeskrigServer | None = None
        self._failure: DeskrigError | None = None
        #: Opening attempts made: a call waiting for one in progress takes its outcome.
        self._attempts = 0
        self._closed = False
        self._lock = threading.Lock()
        threading.Thread(target=self._build, name="deskrig-build", daemon=True).start()

    def _build(self) -> None:
        """The tool list, with the desktop opened beside its schemas: the round trips to the display
        server overlap them. (Not beside the imports: two threads importing the same modules may
        each find the other's half done.)"""
        self._begin.wait()
        try:
            from deskrig.server import describe_tools
            from deskrig.tools import tools_for_profile

            specs = tools_for_profile(self._profile)
            threading.Thread(target=self._open_first, name="deskrig-open", daemon=True).start()
            self._tools.set_result(ToolList({spec.name: spec for spec in specs}, describe_tools(specs)))
        except BaseException as exc:  # answered to tools/list and tools/call, not lost in a thread
            self._tools.set_exception(exc)
            raise

    def _open_first(self) -> None:
        with contextlib.suppress(DeskrigError):  # logged by _open; each tools/call tries again
            self._open(0)

    def _open(self, seen: int) -> DeskrigServer:
        """The server, opened now unless an attempt was made since the caller saw ``seen`` of them."""
        with self._lock:
            if self._server is None and self._attempts == seen and not self._closed:
                self._attempts += 1
                try:
                    desktop = self._open_desktop()
                    try:
                        self._tools.result()  # its schemas are built once, by _build
                        self._server = self._build_server(desktop)
                    except BaseException:
                        desktop.close()
                        raise
                    self._failure = None
                except DeskrigError as exc:
                    self._failure = exc
                    log.error("cannot open the desktop: %s: %s", exc.code.value, exc.message)
            if self._server is not None:
                return self._server
            if self._failure is None:  # closed before the first attempt
                raise DeskrigError(ErrorCode.CANCELLED, "the server is stopping")
            raise self._failure

    async def _server_now(self) -> DeskrigServer:
        if self._server is not None:
            return self._server
        seen = self._attempts
        return await anyio.to_thread.run_sync(self._open, seen)

    async def _tool_list(self) -> ToolList:
        if self._tools.done():  # every call after the first: no thread hop
            return self._tools.result()
        self._begin.set()
        return await anyio.to_thread.run_sync(self._tools.result)

    async def _forward(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Starts the build after ``initialize``, and runs the server's own middleware on its calls."""
        if ctx.method != "initialize":
            self._begin.set()
        if ctx.method == "tools/call":
            await self._tool_list()
            try:
                server = await self._server_now()
            except DeskrigError:
                return await call_next(ctx)  # answered by _call_tool
            for middleware in reversed(server.middleware):
                call_next = _chained(middleware, call_next)
        return await call_next(ctx)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=(await self._tool_list()).listed)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        from deskrig.server import error_result, lookup_tool

        spec = lookup_tool((await self._tool_list()).specs, params.name)
        try:
            server = await self._server_now()
        except DeskrigError as exc:
            return error_result(spec, exc.info())
        return await server.call_tool(ctx, params)

    def close(self) -> None:
        """Stop opening; finalise the recordings and close the desktop if they were opened."""
        if not self._lock.acquire(timeout=CLOSE_WAIT_SECONDS):
            log.warning("the desktop was still opening at exit; left to the process's end")
            return
        try:
            self._closed = True
            server = self._server
        finally:
            self._lock.release()
        if server is not None:
            if server.services.recorder is not None:
                server.services.recorder.close()
            server.services.desktop.close()


def _chained(middleware: ServerMiddleware[Any], call_next: CallNext) -> CallNext:
    async def call(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        return await middleware(ctx, call_next)

    return call


def serve_stdio_deferred(
    profile: ToolProfile,
    open_desktop: Callable[[], Desktop],
    build: Callable[[Desktop], DeskrigServer],
    stop: threading.Event,
) -> None:
    """Serve MCP over stdio at once, building the server behind :class:`DeferredServer`, until
    ``stop`` is set or the client hangs up."""
    front = DeferredServer(profile, open_desktop, build)
    try:
        anyio.run(_serve_stdio, front.mcp, stop)
    finally:
        stop.set()
        front.close()
