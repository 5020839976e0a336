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
import contextvars
import hashlib
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types
import pydantic
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from deskrig import quick_imports
from deskrig.config import Settings, ToolProfile
from deskrig.errors import ConfigError, DeskrigError, ErrorCode
from deskrig.files import write_atomic
from deskrig.mcp_face import MORE_REQUESTS, mcp_server
from deskrig.signals import run_woken_by_signals
from deskrig.transport import Transport

if TYPE_CHECKING:
    from deskrig.a11y.access import A11yAccess
    from deskrig.desktop import Desktop
    from deskrig.http import Readiness
    from deskrig.identity import TokenTable
    from deskrig.launcher import AppLauncher
    from deskrig.server import DeskrigServer
    from deskrig.services import AnyTool

log = logging.getLogger("deskrig.serving")
T = TypeVar("T")

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
    a11y: A11yAccess | None = None,
    boot_recording: bool = True,
) -> DeskrigServer:
    """The MCP server for one desktop. ``session_bus`` leads to its accessibility bus on Linux;
    ``a11y``: the accessibility source (default: the desktop's platform's, ``open_access``);
    ``launcher`` starts apps on it (default: plain subprocesses with this process's environment).
    The recorder's video shows the screen through the same observations as screenshots.
    ``boot_recording=False`` leaves the recording of ``--record`` to :func:`start_boot_recording`
    (a rig builds its server while its app starts, and records once the app is up)."""
    from deskrig.a11y.access import open_access
    from deskrig.launcher import SubprocessLauncher
    from deskrig.observation import Observer
    from deskrig.privacy import PiiMasker
    from deskrig.recording.registry import RecordingRegistry
    from deskrig.recording.watch import DisconnectWatch
    from deskrig.security import SecurityContext
    from deskrig.server import DeskrigServer
    from deskrig.tools import Services

    security = SecurityContext.from_policy(settings.security)
    # Recording (issue 4): the recorder observes action tools (through the same observation path
    # as the screenshot tools), ends a session's recording when its client disconnects, and records
    # from boot with --record. Replay runs through the server's call path, handed to it per call.
    a11y = a11y or open_access(desktop, session_bus, settings.a11y_events_idle_timeout)
    # The tree detector and the recorder read the agents' client's live mirrors (one event feed,
    # trees kept current for all); they store no snapshot, so never evict an agent's.
    masker = PiiMasker(settings.security.pii_masking, a11y)
    recorder = RecordingRegistry(Observer(desktop, security.blocklist, masker), settings, a11y)
    services = Services(
        desktop=desktop,
        settings=settings,
        security=security,
        a11y=a11y,
        launcher=launcher or SubprocessLauncher({}),
        recorder=recorder,
        masker=masker,
    )
    server = DeskrigServer(services)
    desktop.held.idle_timeout = settings.held_input_idle_timeout
    server.use(DisconnectWatch(recorder, desktop))
    if boot_recording:
        start_boot_recording(server)
    return server


def start_boot_recording(server: DeskrigServer) -> None:
    """Record every client's actions from now on if the settings say so (``--record DIR``)."""
    from deskrig.recording.registry import registry_or_none

    settings, recorder = server.services.settings, registry_or_none(server.services)
    if settings.record_dir and recorder is not None:
        recorder.start_boot(Path(settings.record_dir).expanduser().absolute(), settings.record_video)


def close_server(server: DeskrigServer) -> None:
    """Finalise the turn folders and mp4s and unload the OCR engine (which complains of leaks
    otherwise); the desktop is its opener's to close."""
    if server.services.recorder is not None:
        server.services.recorder.close()
    if server.services.masker is not None:
        server.services.masker.close()


async def _wait_for(stop: threading.Event) -> None:
    """Until ``stop`` is set: a worker thread sleeps on it (abandoned if the wait is cancelled,
    it ends when ``stop`` is set on the way out), so an idle server does not wake to poll it."""
    await anyio.to_thread.run_sync(stop.wait, abandon_on_cancel=True)


def _stdio_streams(
    first_written: Callable[[], None] | None = None,
) -> contextlib.AbstractAsyncContextManager[tuple[Any, Any]]:
    """stdin and stdout as the server's streams: read and written on the event loop
    (:mod:`deskrig.stdio`, which calls ``first_written`` once the first answer is out); on
    Windows, whose pipes a selector cannot wait for, the SDK's (which has no such call)."""
    if sys.platform != "win32":
        from deskrig.stdio import stdio_streams

        return stdio_streams(first_written)
    from mcp.server.stdio import stdio_server

    return stdio_server()


async def _serve_stdio(
    mcp: Server[Any], stop: threading.Event, first_written: Callable[[], None] | None = None
) -> None:
    async with _stdio_streams(first_written) as (read, write), anyio.create_task_group() as tg:

        async def stop_when_asked() -> None:
            await _wait_for(stop)
            tg.cancel_scope.cancel()

        tg.start_soon(stop_when_asked)
        await mcp.run(read, write, mcp.create_initialization_options())
        tg.cancel_scope.cancel()


async def _settle_recorder(server: DeskrigServer) -> None:
    """Take the "after" observations that the last recorded actions await (a short delay, or the
    next action) now: the loop's end would cancel them, and their turns would be lost. (Over stdio,
    and for a client with a session, the session's end does this.)"""
    if server.services.recorder is None:
        return
    from deskrig.recording.registry import AFTER_CAPTURE_GRACE  # imported with the recorder

    with anyio.move_on_after(AFTER_CAPTURE_GRACE):
        await server.services.recorder.settle()


async def _serve_http(
    server: DeskrigServer,
    transport: Transport,
    listener: socket.socket,
    tokens: TokenTable | None,
    readiness: Callable[[], Readiness],
    stop: threading.Event,
) -> None:
    from deskrig.guard import QuietServer, uvicorn_config  # the HTTP stack: not imported for stdio
    from deskrig.http import create_app

    app = create_app(
        server,
        tokens=tokens,
        allowed_hosts=transport.allowed_hosts,
        readiness=readiness,
        bind_host=transport.host,
        stopping=stop,
    )
    config = uvicorn_config(
        app,
        header_timeout=server.services.settings.header_timeout,
        body_timeout=server.services.settings.body_timeout,
        host=transport.host,
        port=transport.port,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    # uvicorn takes SIGINT/SIGTERM itself while it serves: its stop is passed on as ours at once
    # (the rig's stop watch ends a call that would hold up its draining), and ours to it.
    http = QuietServer(config, on_exit=stop.set)

    async def stop_when_asked() -> None:
        await _wait_for(stop)
        http.exit()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_when_asked)
        log.info("MCP over HTTP on http://%s:%d/mcp", transport.host, transport.port)
        await http.serve(sockets=[listener])
        tg.cancel_scope.cancel()
    await _settle_recorder(server)  # a stateless client's last action
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

    HTTP serves on ``listener``, bound beforehand by :func:`deskrig.listener.bind_listener`."""
    try:
        if listener is None:
            server.one_client = True
            run_woken_by_signals(_serve_stdio, server.mcp, stop)
        else:
            run_woken_by_signals(_serve_http, server, transport, listener, tokens, readiness, stop)
    finally:
        stop.set()
        close_server(server)


#: How long closing waits for a desktop being opened in the background, to close it too.
CLOSE_WAIT_SECONDS = 5.0


def tool_list_cache(profile: ToolProfile) -> Path:
    """Where ``deskrig serve --stdio`` keeps tools/list for ``profile``, named for the code that
    builds it: deskrig's sources, pydantic's version and the MCP types' module (an edit or an upgrade
    of any of them names another file). A source stands for its path, size and modification time,
    as for Python's own bytecode cache: reading and hashing all of them took 9 ms of every start."""
    digest = hashlib.sha256(f"{profile}\0{pydantic.VERSION}\0".encode())
    for source in [types.__file__, *_sources(os.path.dirname(__file__))]:
        stat = os.stat(source)
        digest.update(f"{source}\0{stat.st_mtime_ns}\0{stat.st_size}\0".encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "deskrig" / f"tools-{digest.hexdigest()[:32]}.json"


def _sources(package: str) -> list[str]:
    """The paths of the Python sources under ``package``, in a stable order (``os.walk``, not
    ``Path.rglob``: half the time, and this runs on every start)."""
    found = []
    for directory, subdirectories, files in os.walk(package):
        subdirectories[:] = sorted(name for name in subdirectories if name != "__pycache__")
        found += [os.path.join(directory, name) for name in sorted(files) if name.endswith(".py")]
    return found


def _cached_tools(path: Path) -> list[types.Tool] | None:
    try:
        return [types.Tool.model_validate(tool) for tool in json.loads(path.read_bytes())]
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        log.debug("no usable tool list cache at %s: %s", path, exc)
        return None


def _cache_tools(path: Path, listed: list[types.Tool]) -> None:
    data = json.dumps([tool.model_dump(mode="json", by_alias=True) for tool in listed]).encode()
    try:
        write_atomic(path, data, parents=True)
    except OSError as exc:  # a read-only home: every start builds the schemas
        log.debug("cannot cache the tool list at %s: %s", path, exc)


#: The opening attempts made when a tools/call came in: its handler takes the outcome of the
#: attempt its middleware made (or waited for) instead of trying again.
_ATTEMPTS_SEEN: contextvars.ContextVar[int | None] = contextvars.ContextVar("attempts_seen", default=None)


class DeferredServer:
    """The stdio front of ``deskrig serve``: answers ``initialize`` before the server exists.

    The server proper (``build`` over ``open_desktop``: tools, recorder) is built in threads that
    start when the client has its ``initialize`` answer (:meth:`warm_up`, called once the answer is
    written, or on the next message the client sends); not before, as a thread importing beside
    the answer would hold it up for the GIL. tools/list waits for the
    tool list (read from :func:`tool_list_cache` when this code built it before: the JSON schemas
    are a fifth of the start), tools/call for the server. A desktop that cannot be opened is
    logged, and each tools/call tries again and answers the error while it still cannot be (a
    display started after the server is then used; the client gets the structured error, not a
    dead server). The start-up's cheaper imports (:mod:`deskrig.quick_imports`, on for a process
    started as ``deskrig serve``) end once the first opening is over.
    """

    def __init__(
        self,
        profile: ToolProfile,
        open_desktop: Callable[[], Desktop],
        build: Callable[[Desktop], DeskrigServer],
    ) -> None:
        self.mcp = mcp_server(self._list_tools, self._call_tool)
        self.mcp.middleware.append(self._forward)
        for method, params_type in MORE_REQUESTS.items():
            self.mcp.add_request_handler(method, params_type, self._request_forwarder(method))
        self._profile = profile
        self._open_desktop = open_desktop
        self._build_server = build
        self._begin = threading.Event()
        self._specs: Future[dict[str, AnyTool]] = Future()
        self._listed: Future[list[types.Tool]] = Future()
        self._server: DeskrigServer | None = None
        self._failure: DeskrigError | None = None
        #: Opening attempts made: a call waiting for one in progress takes its outcome.
        self._attempts = 0
        self._closed = False
        self._lock = threading.Lock()
        threading.Thread(target=self._build, name="deskrig-build", daemon=True).start()

    def _build(self) -> None:
        """The tool list, from the cache or with the desktop opened beside its schemas (the round
        trips to the display server overlap them; not the imports: two threads importing the same
        modules may each find the other's half done)."""
        self._begin.wait()
        try:
            cache = tool_list_cache(self._profile)
            listed = _cached_tools(cache)
            if listed is not None:
                self._listed.set_result(listed)
            from deskrig.server import describe_tools
            from deskrig.tools import tools_for_profile

            specs = tools_for_profile(self._profile)
            self._specs.set_result({spec.name: spec for spec in specs})
            threading.Thread(target=self._open_first, name="deskrig-open", daemon=True).start()
            if listed is None:
                # Kept before it is answered: a client may close as soon as it has the list, and
                # the process would end with the write not done.
                listed = describe_tools(specs)
                _cache_tools(cache, listed)
                self._listed.set_result(listed)
        except BaseException as exc:  # answered to tools/list and tools/call, not lost in a thread
            quick_imports.end()
            for future in (self._specs, self._listed):
                if not future.done():
                    future.set_exception(exc)
            raise

    def warm_up(self) -> None:
        """Start building the server: ``initialize`` has been answered."""
        self._begin.set()

    def _open_first(self) -> None:
        try:
            with contextlib.suppress(DeskrigError):  # logged by _open; each tools/call tries again
                self._open(0)
        finally:
            quick_imports.end()

    def _open(self, seen: int) -> DeskrigServer:
        """The server, opened now unless an attempt was made since the caller saw ``seen`` of them."""
        with self._lock:
            if self._server is None and self._attempts == seen and not self._closed:
                self._attempts += 1
                try:
                    desktop = self._open_desktop()
                    try:
                        self._specs.result()  # the tools, imported by _build
                        self._server = self._build_server(desktop)
                        self._server.one_client = True
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
        """The server, opened now unless the request already tried (the middleware, then the
        handler: one attempt, and one logged failure, per call)."""
        if self._server is not None:
            return self._server
        seen = _ATTEMPTS_SEEN.get()
        return await anyio.to_thread.run_sync(self._open, self._attempts if seen is None else seen)

    async def _wait(self, future: Future[T]) -> T:
        if future.done():  # every call after the first: no thread hop
            return future.result()
        self.warm_up()
        return await anyio.to_thread.run_sync(future.result)

    async def _forward(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Starts the build after ``initialize``, and runs the server's own middleware on its calls."""
        if ctx.method != "initialize":
            self.warm_up()
        if ctx.method != "tools/call":
            return await call_next(ctx)
        await self._wait(self._specs)
        seen = _ATTEMPTS_SEEN.set(self._attempts)
        try:
            try:
                server = await self._server_now()
            except DeskrigError:
                return await call_next(ctx)  # answered by _call_tool, with this attempt's error
            for middleware in reversed(server.middleware):
                call_next = _chained(middleware, call_next)
            return await call_next(ctx)
        finally:
            _ATTEMPTS_SEEN.reset(seen)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await self._wait(self._listed))

    def _request_forwarder(self, method: str) -> Callable[[ServerRequestContext[Any, Any], Any], Any]:
        """A handler of ``method`` that waits for the server and hands the request to it."""

        async def forward(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
            await self._wait(self._specs)
            try:
                server = await self._server_now()
            except DeskrigError as exc:
                raise MCPError(types.INTERNAL_ERROR, f"{exc.code.value}: {exc.message}") from exc
            entry = server.mcp.get_request_handler(method)
            assert entry is not None, method
            return await entry.handler(ctx, params)

        return forward

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        from deskrig.server import error_result, lookup_tool

        spec = lookup_tool(await self._wait(self._specs), params.name)
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
            close_server(server)
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
        run_woken_by_signals(_serve_stdio, front.mcp, stop, front.warm_up)
    finally:
        stop.set()
        front.close()
