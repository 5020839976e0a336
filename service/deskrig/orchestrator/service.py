"""The orchestrator as a background service, and the client the CLI talks to it with.

``deskrig orchestrator serve`` runs one :class:`Orchestrator` behind the HTTP API on a loopback
port and writes where it listens to a user-local state file (``<state_dir>/orchestrator.json``,
mode 0600, holding the API token). The CLI finds the service there; ``session start`` starts one
in the background when none answers, so sessions outlive the command that started them.
SIGTERM, SIGINT and ``POST /shutdown`` stop every session (finalizing its recording, copying the
last turns, removing its rig), then the service exits 0; a SIGTERM or SIGINT once a stop is under
way (asked by a signal or by ``POST /shutdown``) exits at once (status 128 + the signal), leaving
the remaining rigs to the next orchestrator's reaper.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, Protocol

import httpx2
from pydantic import BaseModel, ValidationError

from deskrig.errors import DeskrigError, ErrorCode, http_error_info
from deskrig.files import write_atomic
from deskrig.listener import bind_listener
from deskrig.orchestrator.artifacts import ArtifactListing
from deskrig.orchestrator.models import (
    DEFAULT_RUNTIME,
    OrchestratorConfig,
    RuntimeName,
    SessionInfo,
    SessionSpec,
    Timestamp,
)
from deskrig.signals import handling_signals, run_woken_by_signals

log = logging.getLogger("deskrig.orchestrator.service")

STATE_FILE = "orchestrator.json"
LOG_FILE = "orchestrator.log"
#: How long a background start may take (Docker connection, start-up reap) before we give up.
START_TIMEOUT = 30.0


class ServiceState(BaseModel):
    url: str
    token: str
    pid: int
    orchestrator_id: str
    started_at: Timestamp
    runtime: RuntimeName = DEFAULT_RUNTIME  # a state file from before the runtime choice: docker


def read_state(state_dir: Path) -> ServiceState | None:
    try:
        return ServiceState.model_validate_json((state_dir / STATE_FILE).read_bytes())
    except (FileNotFoundError, ValidationError):
        return None


def _write_state(state_dir: Path, state: ServiceState) -> None:
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(state_dir / STATE_FILE, state.model_dump_json(indent=2).encode(), mode=0o600)


def _remove_state(state_dir: Path, pid: int) -> None:
    state = read_state(state_dir)
    if state is not None and state.pid == pid:
        (state_dir / STATE_FILE).unlink(missing_ok=True)


def serve(config: OrchestratorConfig, *, host: str = "127.0.0.1", port: int = 0) -> None:
    """Run the service in the foreground until a signal or ``POST /shutdown``."""
    import uvicorn

    from deskrig.guard import uvicorn_config
    from deskrig.orchestrator.api import create_api
    from deskrig.orchestrator.core import Orchestrator

    token = secrets.token_urlsafe(32)
    sock = bind_listener(host, port)
    port = sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    asks = StopAsks(lambda signum, by: _exit_at_once(config.state_dir, signum, by))

    async def run() -> None:
        try:
            async with Orchestrator(config) as orchestrator:
                app = create_api(orchestrator, token=token, on_shutdown=asks.post)
                asks.server = server = uvicorn.Server(
                    uvicorn_config(
                        app,
                        lifespan="off",
                        timeout_graceful_shutdown=5,
                    )
                )
                state = ServiceState(
                    url=f"http://{url_host}:{port}",
                    token=token,
                    pid=os.getpid(),
                    orchestrator_id=orchestrator.id,
                    started_at=time.time(),
                    runtime=config.runtime,
                )
                _write_state(config.state_dir, state)
                log.info("orchestrator %s serving on %s", orchestrator.id, state.url)
                if asks.first is None:
                    await server.serve(sockets=[sock])
                log.info("orchestrator %s stopping its sessions", orchestrator.id)
        finally:
            # Only now: `orchestrator stop` waits for this file to go, i.e. for the sessions to end.
            _remove_state(config.state_dir, os.getpid())

    with handling_signals(asks.signal):
        run_woken_by_signals(run)


class Exiting(Protocol):
    """What :class:`StopAsks` sets on the HTTP server to end its serving (uvicorn's ``Server``)."""

    should_exit: bool


class StopAsks:
    """Who asked the service to stop first, and what a later ask means.

    A stop is asked by SIGINT, SIGTERM or POST /shutdown. The first stops every session; a signal
    once a stop is under way means "now" (`docker stop` after `orchestrator stop` is one), while a
    POST then changes nothing (an HTTP client asking twice does not mean "now").

    uvicorn handles SIGINT and SIGTERM itself while it serves, holds them until its connections are
    drained, then raises them again, which would end the process before the orchestrator stops its
    sessions: :meth:`signal` takes that delivery, and any signal outside serving. A POST handled
    while uvicorn holds a signal finds the server exiting already and counts for nothing: the held
    signal asked first and names itself when it is raised again (counted first, the POST would
    have that signal taken for a second one, which exits without stopping the sessions).
    """

    def __init__(self, exit_at_once: Callable[[int, str], NoReturn]) -> None:
        #: What asked first ("SIGTERM", "POST /shutdown"); None while nothing has.
        self.first: str | None = None
        #: The HTTP server, once it exists.
        self.server: Exiting | None = None
        self._exit_at_once = exit_at_once

    def signal(self, signum: int) -> None:
        if self.first is not None:
            self._exit_at_once(signum, self.first)
        self._ask(signal.Signals(signum).name)

    def post(self) -> None:
        if self.server is not None and self.server.should_exit:
            return  # a stop under way: asked by an earlier POST, or by a signal uvicorn holds
        self._ask("POST /shutdown")

    def _ask(self, by: str) -> None:
        if self.first is None:
            self.first = by
        if self.server is not None:
            self.server.should_exit = True


def _exit_at_once(state_dir: Path, signum: int, stop_asked_by: str) -> NoReturn:
    """End the process now, without stopping the sessions: their rigs carry this orchestrator's
    lease, which the kernel drops with the process, so the next orchestrator's reaper takes them."""
    sys.stderr.write(
        f"deskrig: {signal.Signals(signum).name} while stopping (asked by {stop_asked_by}): exiting now; "
        "the next orchestrator removes the rigs left\n"
    )
    sys.stderr.flush()
    _remove_state(state_dir, os.getpid())
    os._exit(128 + signum)


class ServiceClient:
    """The orchestrator service's HTTP API as Python calls; errors come back as DeskrigError."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self._http = httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: object) -> httpx2.Response:
        try:
            response = self._http.request(method, path, **kwargs)  # type: ignore[arg-type]
        except httpx2.HTTPError as exc:
            raise DeskrigError(
                ErrorCode.RUNTIME_UNAVAILABLE,
                f"the orchestrator service at {self.url} does not answer: {exc}",
                remediation="Start it with `deskrig orchestrator serve --background`.",
            ) from exc
        if response.status_code >= 400:
            info = http_error_info(response.text)
            if info is None:
                raise DeskrigError(
                    ErrorCode.INTERNAL_ERROR,
                    f"{method} {path}: HTTP {response.status_code} {response.text[:300]}",
                )
            raise DeskrigError(info.code, info.message, details=info.details, remediation=info.remediation)
        return response

    def alive(self) -> bool:
        try:
            self._request("GET", "/sessions")
        except DeskrigError:
            return False
        return True

    def start(self, spec: SessionSpec, *, wait: bool = True) -> SessionInfo:
        response = self._request(
            "POST",
            "/sessions",
            params={"wait": str(wait).lower()},
            content=spec.model_dump_json(exclude_unset=True),
            headers={"Content-Type": "application/json"},
            timeout=None if wait else 30.0,
        )
        return SessionInfo.model_validate_json(response.content)

    def get(self, session_id: str) -> SessionInfo:
        return SessionInfo.model_validate_json(self._request("GET", f"/sessions/{session_id}").content)

    def list(self) -> list[SessionInfo]:
        return [SessionInfo.model_validate(item) for item in self._request("GET", "/sessions").json()]

    def stop(self, session_id: str) -> SessionInfo:
        response = self._request("DELETE", f"/sessions/{session_id}", timeout=120.0)
        return SessionInfo.model_validate_json(response.content)

    def logs(self, session_id: str, tail: int | None = None) -> str:
        params = {} if tail is None else {"tail": str(tail)}
        return self._request("GET", f"/sessions/{session_id}/logs", params=params).text

    def artifacts(self, session_id: str) -> ArtifactListing:
        return ArtifactListing.model_validate_json(
            self._request("GET", f"/sessions/{session_id}/artifacts").content
        )

    def artifact(self, session_id: str, path: str) -> bytes:
        return self._request("GET", f"/sessions/{session_id}/artifacts/{path}").content

    def shutdown(self) -> None:
        self._request("POST", "/shutdown")


def connect_service(state_dir: Path) -> ServiceClient | None:
    """A client for the running service, or None when none answers."""
    state = read_state(state_dir)
    if state is None:
        return None
    client = ServiceClient(state.url, state.token)
    if client.alive():
        return client
    client.close()
    return None


def start_background(state_dir: Path, serve_args: list[str]) -> ServiceClient:
    """Start ``deskrig orchestrator serve`` detached from this process; return once it answers."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = state_dir / LOG_FILE
    command = [sys.executable, "-m", "deskrig.cli", "orchestrator", "serve", "--state-dir", str(state_dir)]
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(
            [*command, *serve_args],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,  # not hit by the shell's Ctrl-C, outlives this command
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        state = read_state(state_dir)
        if state is not None and state.pid == proc.pid:
            client = ServiceClient(state.url, state.token)
            if client.alive():
                return client
            client.close()
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    else:
        proc.terminate()
    tail = log_path.read_text(errors="replace").splitlines()[-15:]
    raise DeskrigError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        f"the orchestrator service did not start (exit code {proc.poll()}); log: {log_path}",
        details={"log": tail},
    )


def ensure_service(
    state_dir: Path, serve_args: list[str] | None = None, *, runtime: RuntimeName | None = None
) -> ServiceClient:
    """The running service of ``state_dir``, else a new one started with ``serve_args``; with
    ``runtime``, the running one must use it (a session never lands on another runtime unasked)."""
    client = connect_service(state_dir)
    if client is None:
        return start_background(state_dir, serve_args or [])
    state = read_state(state_dir)
    running = state.runtime if state is not None else DEFAULT_RUNTIME
    if runtime is not None and runtime != running:
        client.close()
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"the orchestrator service for {state_dir} runs the {running} runtime, not {runtime}",
            details={"running": running, "asked": runtime, "state_dir": str(state_dir)},
            remediation="Stop it first (`deskrig orchestrator stop`), or use another --state-dir.",
        )
    return client


def stop_service(state_dir: Path, timeout: float = 120.0) -> bool:
    """Stop the running service and its sessions; False when none was running."""
    state = read_state(state_dir)
    if state is None:
        return False
    with ServiceClient(state.url, state.token) as client:
        try:
            client.shutdown()
        except DeskrigError:
            # Not answering: it hangs, or died hard (the next orchestrator reaps its rigs).
            if _is_service(state.pid):
                os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = read_state(state_dir)
        if current is None or current.pid != state.pid:
            return True
        if not _is_service(state.pid):
            (state_dir / STATE_FILE).unlink(missing_ok=True)  # left by a service that is gone
            return True
        time.sleep(0.1)
    raise DeskrigError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        f"the orchestrator service (pid {state.pid}) did not stop within {timeout:g} s",
        remediation=f"Look at {state_dir / LOG_FILE}; `kill {state.pid}` ends it.",
    )


def _is_service(pid: int) -> bool:
    """Whether ``pid`` is a live ``deskrig orchestrator serve`` (not a zombie, not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"orchestrator\0serve" in cmdline
