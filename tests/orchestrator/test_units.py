"""The orchestrator's pieces that need no Docker: FIFO slots, leases, reaper verdicts, waits, feed paths,
the swarm runtime's placement of a task (over the engine's task listings, scripted), what a stop
asked by a signal or POST /shutdown means (over a stand-in for uvicorn's server)."""

from __future__ import annotations

import http.server
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn, cast

import anyio
import docker
import httpx
import pytest
from tests.orchestrator.helpers import labels_of

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.mirror import FeedError, _safe_relative
from deskrig.orchestrator.models import RIG_PORT, OrchestratorConfig, SessionInfo, SessionSpec, SessionState
from deskrig.orchestrator.reaper import Lease, Reaper
from deskrig.orchestrator.runtime import ContainerState, RigHandle
from deskrig.orchestrator.service import StopAsks
from deskrig.orchestrator.session import Session, rig_request
from deskrig.orchestrator.slots import Slots
from deskrig.orchestrator.swarm_backend import PLACEMENT_ATTEMPTS, Placement, SwarmRuntime
from deskrig.orchestrator.waits import (
    STATUS_POLL,
    AllOf,
    HttpStatus,
    Probe,
    Running,
    WaitStrategy,
    rig_ready,
    wait_for,
)


@pytest.mark.anyio
async def test_slots_are_granted_in_request_order() -> None:
    slots = Slots(2)
    a, b, c, d = (slots.request(key) for key in "abcd")
    assert a.is_set() and b.is_set() and not c.is_set() and not d.is_set()
    assert (slots.position("c"), slots.position("d")) == (1, 2)
    slots.release("d")  # gave up waiting: leaves the line
    e = slots.request("e")
    slots.release("a")
    assert c.is_set() and not e.is_set() and slots.position("e") == 1
    slots.release("b")
    assert e.is_set() and slots.position("e") is None
    slots.release("b")  # twice is harmless
    assert slots.request("f").is_set() is False


def test_a_lease_is_held_while_its_process_lives_even_after_sigkill(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from deskrig.orchestrator.reaper import Lease; "
            "Lease(Path(sys.argv[1]), 'o-child').acquire(); print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    lease_file = tmp_path / "leases" / "o-child.lock"
    assert Lease.held(lease_file)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert not Lease.held(lease_file)
    assert not lease_file.exists()  # the stale file is cleared


def test_reaper_verdicts_follow_labels(tmp_path: Path) -> None:
    mine = Lease(tmp_path, "o-me")
    mine.acquire()
    try:
        reaper = Reaper(runtime=None, orchestrator_id="o-me", live_sessions=lambda: {"s-live"})  # type: ignore[arg-type]
        now = time.time()

        def handle(
            owner: str, session: str, expires: float = 0, host: str | None = None, lease: Path | None = None
        ) -> RigHandle:
            labels = labels_of(owner, session, expires_at=expires, host=host, lease=lease)
            return RigHandle(id=session, name=session, endpoint="", labels=labels)

        my_lease = mine.path
        assert reaper.verdict(handle("o-me", "s-live", lease=my_lease), now) is None
        assert "no live session" in (reaper.verdict(handle("o-me", "s-old", lease=my_lease), now) or "")
        assert "expired" in (reaper.verdict(handle("o-me", "s-live", expires=now - 3600), now) or "")
        gone = tmp_path / "leases" / "o-dead.lock"
        assert "o-dead is gone" in (reaper.verdict(handle("o-dead", "s-x", lease=gone), now) or "")
        # Another orchestrator on this host that is alive, and one elsewhere: not ours to judge.
        assert reaper.verdict(handle("o-other", "s-y", lease=my_lease), now) is None
        assert reaper.verdict(handle("o-far", "s-z", host="elsewhere", lease=gone), now) is None
    finally:
        mine.release()


class _Readyz(http.server.BaseHTTPRequestHandler):
    ready_after = 3
    calls = 0

    def do_GET(self) -> None:
        type(self).calls += 1
        ready = self.calls > self.ready_after
        body = b'{"ready": true}' if ready else b'{"ready": false, "checks": {"app": false}}'
        self.send_response(200 if ready else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def readyz_server() -> Iterator[tuple[str, type[_Readyz]]]:
    handler = type("Handler", (_Readyz,), {"calls": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


class _Target:
    def __init__(self, endpoint: str, http: httpx.AsyncClient, running: bool = True) -> None:
        self.endpoint = endpoint
        self.http = http
        self.running = running
        self.status_calls = 0

    async def status(self) -> ContainerState:
        self.status_calls += 1
        return ContainerState(
            self.running, "running" if self.running else "exited with code 1", None if self.running else 1
        )

    async def logs(self, tail: int) -> str:
        return "deskrig: starting\ndeskrig: the app exited with code 1\n"


@pytest.mark.anyio
async def test_wait_polls_readyz_until_it_answers_200(readyz_server: tuple[str, type[_Readyz]]) -> None:
    endpoint, handler = readyz_server
    async with httpx.AsyncClient() as http:
        await wait_for(_Target(endpoint, http), AllOf((Running(), HttpStatus())), 5, interval=0.01)
    assert handler.calls == 4


@pytest.mark.anyio
async def test_the_rig_wait_asks_readyz_at_every_poll_and_the_runtime_seldom(
    readyz_server: tuple[str, type[_Readyz]],
) -> None:
    """A rig's wait asks /readyz often (a rig that is up should not wait long for the next probe)
    and the runtime whether its container runs only every STATUS_POLL: on swarm that question is a
    task listing from the manager, needless while /readyz is what the wait is for."""
    endpoint, handler = readyz_server
    handler.ready_after = 20
    async with httpx.AsyncClient() as http:
        target = _Target(endpoint, http)
        started = time.monotonic()
        await wait_for(target, rig_ready(), 30, interval=0.01)
        waited = time.monotonic() - started
    assert handler.calls == 21
    assert 1 <= target.status_calls <= 1 + waited / STATUS_POLL


@pytest.mark.anyio
async def test_wait_timeout_says_what_it_saw_and_attaches_logs(
    readyz_server: tuple[str, type[_Readyz]],
) -> None:
    endpoint, handler = readyz_server
    handler.ready_after = 10**6
    async with httpx.AsyncClient() as http:
        with pytest.raises(DeskrigError) as raised:
            await wait_for(_Target(endpoint, http), HttpStatus(), 0.3, interval=0.05)
    error = raised.value
    assert error.code is ErrorCode.RIG_FAILED
    assert "timed out after 0.3 s" in error.message and "HTTP 503" in error.message
    assert error.details and error.details["logs"][-1] == "deskrig: the app exited with code 1"


@pytest.mark.anyio
@pytest.mark.parametrize("strategy", [AllOf((Running(), HttpStatus())), rig_ready()], ids=["all-of", "rig"])
async def test_wait_gives_up_at_once_when_the_container_exited(strategy: WaitStrategy) -> None:
    async with httpx.AsyncClient() as http:
        with pytest.raises(DeskrigError) as raised:
            await wait_for(_Target("http://127.0.0.1:9", http, running=False), strategy, 30)
    # Gave up, not timed out after the 30 s.
    assert "gave up" in raised.value.message and "exited with code 1" in raised.value.message
    # Why it exited, in the message itself: a report that prints only the message still says it.
    assert raised.value.message.endswith("; its last log line: deskrig: the app exited with code 1")


@pytest.mark.parametrize("path", ["../etc/passwd", "/abs/file", "turn-00001/../../x", ".incoming/x", ""])
def test_feed_paths_that_could_escape_are_refused(path: str) -> None:
    with pytest.raises(FeedError):
        _safe_relative(path)


def test_feed_paths_inside_are_accepted() -> None:
    assert str(_safe_relative("turn-00001/after.png")) == "turn-00001/after.png"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("spec", "variables"),
    [
        (SessionSpec(), {}),
        (SessionSpec(backend="sway", size="800x600"), {"DESKRIG_BACKEND": "sway", "DESKRIG_SIZE": "800x600"}),
        (SessionSpec(backend="x11"), {"DESKRIG_BACKEND": "x11"}),
    ],
    ids=["image-defaults", "sway", "x11"],
)
async def test_session_options_become_the_rigs_variables(
    spec: SessionSpec, variables: dict[str, str], config: OrchestratorConfig, tmp_path: Path
) -> None:
    info = SessionInfo(
        id="s-1", state=SessionState.STARTING, spec=spec, created_at=0, artifacts_dir=str(tmp_path)
    )
    session = Session(info=info, token="t", slot=anyio.Event())
    request = rig_request(session, config, orchestrator_id="o-1", lease=tmp_path / "lease")
    # Unset options leave the image's own defaults (its ENV) alone.
    chosen = {
        name: value for name, value in request.env.items() if name in ("DESKRIG_BACKEND", "DESKRIG_SIZE")
    }
    assert chosen == variables


_PORT_TAKEN_ERR = (
    "starting container failed: driver failed programming external connectivity on endpoint "
    "deskrig-s1.1.t1 (5b51): Error starting userland proxy: listen tcp4 0.0.0.0:32821: bind: "
    "address already in use"
)


def _task(
    task_id: str, state: str, *, err: str = "", code: int | None = None, port: int = 0, node: str = "n1"
) -> dict[str, Any]:
    """A swarm task as the engine lists it, its container named after it; tasks are created in the
    order of their ids."""
    status: dict[str, Any] = {"State": state, "Err": err, "ContainerStatus": {"ContainerID": f"c-{task_id}"}}
    if code is not None:
        status["ContainerStatus"]["ExitCode"] = code
    if port:
        status["PortStatus"] = {"Ports": [{"TargetPort": RIG_PORT, "PublishedPort": port}]}
    return {"ID": task_id, "CreatedAt": task_id, "NodeID": node, "Status": status}


class _SwarmClient:
    """The engine calls ``SwarmRuntime._place`` and ``_destroy`` make, answered from a script of
    task lists (the last one stays), on node n1 of a swarm; what they changed is recorded."""

    def __init__(self, tasks: list[list[dict[str, Any]]]) -> None:
        self.script = tasks
        self.forced: list[str] = []
        self.removed: list[str] = []  # services and containers, in order
        self.node_listings = 0
        self.api = SimpleNamespace(
            tasks=self.tasks,
            nodes=self.nodes,
            remove_service=self.removed.append,
            remove_container=lambda container, force: self.removed.append(container),
        )
        self.services = SimpleNamespace(get=self.service)

    def info(self) -> dict[str, Any]:
        return {"Swarm": {"NodeID": "n1"}}

    def tasks(self, filters: dict[str, str]) -> list[dict[str, Any]]:
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def nodes(self) -> list[dict[str, Any]]:
        self.node_listings += 1
        return [{"ID": "n1", "Status": {"Addr": "10.0.0.1"}}]

    def service(self, service_id: str) -> SimpleNamespace:
        return SimpleNamespace(force_update=lambda: self.forced.append(service_id))


def _swarm_runtime(config: OrchestratorConfig, client: _SwarmClient) -> SwarmRuntime:
    return SwarmRuntime(config, client=cast(docker.DockerClient, client))


def test_a_swarm_task_whose_port_was_taken_is_replaced_and_the_next_placed(
    config: OrchestratorConfig,
) -> None:
    """The engine picked a host port that a socket took before its proxy bound it: the session's
    rig is not at fault, so its service gets a new task (the engine would not pick again)."""
    failed = _task("t1", "failed", err=_PORT_TAKEN_ERR, code=128)
    client = _SwarmClient(
        [[failed], [failed], [failed, _task("t2", "starting")], [failed, _task("t2", "running", port=32900)]]
    )
    runtime = _swarm_runtime(config, client)
    placement = Placement("svc", {})  # a node not listed yet: listed once, when the task is on it
    first = runtime._place(placement)
    assert not first.done and not first.fatal and "address already in use" in first.observed
    assert client.forced == ["svc"]
    assert not runtime._place(placement).fatal  # the failed task, newest until its successor exists
    assert client.forced == ["svc"]
    assert runtime._place(placement) == Probe(done=False, observed="task starting")
    assert runtime._place(placement).done
    assert placement.endpoint == "http://10.0.0.1:32900" and client.node_listings == 1


def test_a_port_taken_every_time_or_any_other_end_of_a_task_is_its_rigs() -> None:
    placement = Placement("svc", {})
    for attempt in range(1, PLACEMENT_ATTEMPTS):
        assert not placement.look(_task(f"t{attempt}", "failed", err=_PORT_TAKEN_ERR, code=128)).fatal
    last = placement.look(_task("tn", "failed", err=_PORT_TAKEN_ERR, code=128))
    assert last.fatal and last.observed == f"exited with code 128: {_PORT_TAKEN_ERR}"
    exited = Placement("svc", {}).look(_task("t1", "failed", err="task: non-zero exit (1)", code=1))
    assert exited.fatal and exited.observed == "exited with code 1"
    rejected = Placement("svc", {}).look(_task("t1", "rejected", err="No such image: nowhere:latest"))
    assert rejected.fatal and rejected.observed == "rejected by the cluster: No such image: nowhere:latest"


def test_removing_a_swarm_rig_removes_its_container_here_and_waits_for_another_nodes(
    config: OrchestratorConfig,
) -> None:
    """The swarm stops a removed service's container a second or two later: on this engine's node
    the runtime removes it itself, as the Docker runtime does; another node's is waited for."""
    ended = _task("t0", "failed", code=1)
    client = _SwarmClient(
        [
            [ended, _task("t1", "running"), _task("t2", "running", node="n2")],
            [_task("t2", "running", node="n2")],
        ]
    )
    runtime = _swarm_runtime(config, client)
    handle = RigHandle(id="svc", name="deskrig-s1", endpoint="")
    assert runtime._destroy(handle) == {"t2"}
    assert client.removed == ["svc", "c-t1"]
    assert not runtime._tasks_stopped(handle, {"t2"}).done
    client.script = [[_task("t2", "shutdown", node="n2")]]
    assert runtime._tasks_stopped(handle, {"t2"}).done


class ExitedAtOnce(Exception):
    """What a fake exit-at-once raises, with the signal and what asked first."""


def stop_asks() -> tuple[StopAsks, SimpleNamespace]:
    """Stop asks over a stand-in for uvicorn's server, whose exit at once raises ExitedAtOnce."""

    def exit_at_once(signum: int, first: str) -> NoReturn:
        raise ExitedAtOnce(signum, first)

    asks = StopAsks(exit_at_once)
    server = SimpleNamespace(should_exit=False)
    asks.server = server
    return asks, server


def test_a_post_while_uvicorn_holds_a_signal_leaves_that_signal_first() -> None:
    """uvicorn took SIGTERM (its handler sets should_exit and holds the signal until its
    connections drain); a POST /shutdown handled meanwhile must not count first, or the held
    SIGTERM, raised again after the drain, would be taken for a second ask: an exit at once,
    without stopping the sessions."""
    asks, server = stop_asks()
    server.should_exit = True  # uvicorn's handle_exit
    asks.post()
    asks.signal(signal.SIGTERM)  # raised again by uvicorn once drained
    assert asks.first == "SIGTERM"


def test_a_signal_after_a_post_or_a_signal_exits_at_once_and_a_second_post_does_nothing() -> None:
    asks, server = stop_asks()
    asks.post()
    assert (asks.first, server.should_exit) == ("POST /shutdown", True)
    asks.post()
    assert asks.first == "POST /shutdown"
    with pytest.raises(ExitedAtOnce) as exited:
        asks.signal(signal.SIGINT)
    assert exited.value.args == (signal.SIGINT, "POST /shutdown")

    asks, server = stop_asks()
    asks.signal(signal.SIGTERM)
    assert (asks.first, server.should_exit) == ("SIGTERM", True)
    with pytest.raises(ExitedAtOnce) as exited:
        asks.signal(signal.SIGTERM)
    assert exited.value.args == (signal.SIGTERM, "SIGTERM")
