"""An in-memory :class:`Runtime` with scripted rigs, shipped with the interface (like httpx's
``MockTransport``): the session core's queue, timeouts, reaper and crash paths run without Docker.

Each created rig follows a :class:`RigScript`: it becomes ready after a delay, fails to start,
exits later (the app crashed), never becomes ready (hangs), or disappears (removed from outside);
:meth:`MemoryRuntime.engine_outage` makes the "engine" unreachable for a while. Rigs carry their
labels, so :meth:`list_by_label` feeds the reaper as Docker's label filter does; :meth:`seed` adds
rigs some other orchestrator (or nobody) created.

The orchestrator reaches a rig only over HTTP, so every rig answers its endpoints (``/readyz``,
``/status``, ``/recording/finalize``, an empty ``/recording/events`` feed) from a tiny stand-in
server on a loopback port, each rig under its own path prefix. A real socket rather than an httpx
``MockTransport`` or an ASGI app because the orchestrator's HTTP clients (the core's, the
mirror's, the readiness wait's) are built where they are used, with no transport to inject:
a loopback server needs no special case in them, and the code under test is the code that runs.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.mirror import ArtifactMirror
from deskrig.orchestrator.rig_client import EVENTS, FINALIZE, READYZ, STATUS
from deskrig.orchestrator.runtime import LABEL_SESSION, ContainerState, RigHandle, RigRequest
from deskrig.orchestrator.waits import wait_until_ready


@dataclass(frozen=True)
class RigScript:
    """How one scripted rig behaves; times are seconds after it was created."""

    ready_after: float = 0.0  # math.inf: it hangs, /readyz never says ready
    fail_to_start: str | None = None  # create() raises RIG_FAILED with this text
    logs: tuple[str, ...] = ("rig: display up", "rig: app started")
    #: What ``/status`` reports as the last MCP activity, seconds after creation (None: none yet).
    active_at: float | None = None


HANGS = RigScript(ready_after=math.inf)


@dataclass
class MemoryRig:
    handle: RigHandle
    script: RigScript
    token: str
    created: float = field(default_factory=time.monotonic)
    created_wall: float = field(default_factory=time.time)
    #: Set by :meth:`MemoryRuntime.exit`: the app exited, the container stopped with this code.
    exit_code: int | None = None
    #: Set by :meth:`MemoryRuntime.vanish`: removed from outside the orchestrator.
    vanished: bool = False

    def age(self) -> float:
        return time.monotonic() - self.created

    def status(self) -> ContainerState:
        if self.vanished:
            return ContainerState(running=False, detail="gone (removed from outside)")
        if self.exit_code is not None:
            return ContainerState(
                running=False, detail=f"exited with code {self.exit_code}", exit_code=self.exit_code
            )
        return ContainerState(running=True, detail="running")

    def ready(self) -> bool:
        return self.status().running and self.age() >= self.script.ready_after


class MemoryRuntime:
    """Rigs as records in a dict, following scripts; see the module docstring."""

    name = "memory"

    def __init__(self, script: RigScript | None = None) -> None:
        #: The script of every rig not given one by :meth:`script_next`.
        self.default_script = script or RigScript()
        self.rigs: dict[str, MemoryRig] = {}
        #: Names of the rigs destroyed, in order: what the reaper and teardown removed.
        self.destroyed: list[str] = []
        self.created: list[RigRequest] = []
        #: Every HTTP request the rigs answered, as (method, rig name, path).
        self.requests: list[tuple[str, str, str]] = []
        self._next_scripts: deque[RigScript] = deque()
        self._engine_down_until = 0.0
        self._server: ThreadingHTTPServer | None = None
        self._counter = 0
        #: Nodes of the scripted "cluster": capacity is ``per_node`` times this.
        self.nodes = 1

    # --- scripting --------------------------------------------------------------------------------

    def script_next(self, *scripts: RigScript) -> None:
        """The scripts of the next rigs created, in order (then the default again)."""
        self._next_scripts.extend(scripts)

    def engine_outage(self, seconds: float) -> None:
        """Every call raises RUNTIME_UNAVAILABLE for ``seconds`` (a restarting engine)."""
        self._engine_down_until = time.monotonic() + seconds

    def exit(self, session_id: str, code: int = 1) -> None:
        """The rig of session ``session_id`` stops as when its app exits with ``code``. Crashes are
        commands rather than timed script entries, so that a loaded machine cannot turn a crash
        after start-up into a failure to start."""
        self._rig_of(session_id).exit_code = code

    def vanish(self, session_id: str) -> None:
        """The rig of session ``session_id`` is removed from outside the orchestrator."""
        self._rig_of(session_id).vanished = True

    def _rig_of(self, session_id: str) -> MemoryRig:
        return next(rig for rig in self.rigs.values() if rig.handle.labels.get(LABEL_SESSION) == session_id)

    def seed(self, labels: dict[str, str], script: RigScript | None = None, *, token: str = "") -> RigHandle:
        """A running rig created by someone else (another orchestrator, or by hand)."""
        return self._add(labels, script or self.default_script, token)

    # --- the Runtime protocol ---------------------------------------------------------------------

    async def capacity(self, per_node: int) -> int:
        self._check_engine()
        return per_node * self.nodes

    async def create(self, request: RigRequest) -> RigHandle:
        self._check_engine()
        script = self._next_scripts.popleft() if self._next_scripts else self.default_script
        self.created.append(request)
        if script.fail_to_start is not None:
            raise DeskrigError(
                ErrorCode.RIG_FAILED,
                f"cannot create a rig from {request.image}: {script.fail_to_start}",
                details={"image": request.image},
            )
        return self._add(request.labels, script, token=request.env.get("DESKRIG_TOKEN", ""))

    async def wait_ready(self, handle: RigHandle, timeout: float) -> None:
        await wait_until_ready(self, handle, timeout, interval=0.05)

    def stream_artifacts(self, handle: RigHandle, token: str, dest: Path) -> ArtifactMirror:
        return ArtifactMirror(handle.endpoint, token, dest)

    async def status(self, handle: RigHandle) -> ContainerState:
        self._check_engine()
        rig = self.rigs.get(handle.id)
        return rig.status() if rig is not None else ContainerState(running=False, detail="gone")

    async def logs(self, handle: RigHandle, tail: int | None = None) -> str:
        self._check_engine()
        rig = self.rigs.get(handle.id)
        if rig is None:
            return ""
        lines = list(rig.script.logs)
        if rig.exit_code is not None:
            lines.append(f"rig: the app exited with code {rig.exit_code}")
        lines = lines if tail is None else lines[-tail:] if tail else []
        return "".join(line + "\n" for line in lines)

    async def destroy(self, handle: RigHandle) -> None:
        self._check_engine()
        if self.rigs.pop(handle.id, None) is not None:
            self.destroyed.append(handle.name)

    async def list_by_label(self, labels: dict[str, str]) -> list[RigHandle]:
        self._check_engine()
        return [
            rig.handle
            for rig in self.rigs.values()
            if all(rig.handle.labels.get(key) == value for key, value in labels.items())
        ]

    async def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # --- internals --------------------------------------------------------------------------------

    def _check_engine(self) -> None:
        if time.monotonic() < self._engine_down_until:
            raise DeskrigError(
                ErrorCode.RUNTIME_UNAVAILABLE, "the in-memory engine is down (scripted outage)"
            )

    def _add(self, labels: dict[str, str], script: RigScript, token: str) -> RigHandle:
        self._counter += 1
        rig_id = f"m{self._counter}"
        name = f"deskrig-{labels.get(LABEL_SESSION) or rig_id}"
        handle = RigHandle(
            id=rig_id, name=name, endpoint=f"{self._base_url()}/rigs/{rig_id}", labels=dict(labels)
        )
        self.rigs[rig_id] = MemoryRig(handle, script, token)
        return handle

    def _base_url(self) -> str:
        if self._server is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
            self._server.daemon_threads = True
            threading.Thread(
                target=self._server.serve_forever, args=(0.02,), name="memory-rigs", daemon=True
            ).start()
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"


def _handler(runtime: MemoryRuntime) -> type[BaseHTTPRequestHandler]:
    class RigStandIn(BaseHTTPRequestHandler):
        """The rig's HTTP face: ``/rigs/<id>/<path>``."""

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: nothing writes to stdout or stderr."""

        def _answer(self) -> None:
            _, _, rest = self.path.partition("/rigs/")
            rig_id, _, path = rest.partition("/")
            path = "/" + path.partition("?")[0]
            rig = runtime.rigs.get(rig_id)
            runtime.requests.append((self.command, rig.handle.name if rig else rig_id, path))
            if rig is None or not rig.status().running:
                self._send(502, {"error": "no such rig"})
            elif path == READYZ:
                ready = rig.ready()
                self._send(200 if ready else 503, {"ready": ready, "app": "up" if ready else "starting"})
            elif rig.token and self.headers.get("Authorization") != f"Bearer {rig.token}":
                self._send(401, {"error": "bad token"})
            elif path == STATUS:
                active = rig.script.active_at
                last = None if active is None else rig.created_wall + active
                self._send(200, {"last_activity": last or rig.created_wall})
            elif path == FINALIZE:
                self._send(200, {"finalized": True})
            elif path == EVENTS:
                self._send(200, None, content_type="text/event-stream")
            else:
                self._send(404, {"error": f"no {path}"})

        def _send(self, code: int, body: object, content_type: str = "application/json") -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return RigStandIn
