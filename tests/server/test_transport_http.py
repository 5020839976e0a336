"""The HTTP transport: the token, Host checks, /readyz details, ports, slow and idle connections, and
per-client rate limits."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from tests.polling import poll
from tests.server.conftest import GreenRig
from tests.server.rigproc import (
    DESKRIG,
    INITIALIZE,
    RigProcess,
    color_app,
    free_port,
    http_status,
    read_until_closed,
)
from tests.wakeups import process_wakeups

from deskrig.client import connect
from deskrig.errors import tool_error
from deskrig.listener import bind_listener

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def test_http_requires_the_token(green_rig: GreenRig) -> None:
    rig = green_rig.rig
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    for auth in [None, "Bearer wrong-token", "Basic dGVzdC10b2tlbg==", f"Bearer {rig.token}x"]:
        sent = dict(headers, **({"authorization": auth} if auth else {}))
        response = httpx.post(rig.url, json=body, headers=sent)
        assert response.status_code == 401, auth
        assert response.json()["error"]["code"] == "PERMISSION_DENIED"
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(f"{rig.base}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{rig.base}/readyz").json()
    assert ready["ready"] and ready["checks"]["window_manager"] and ready["checks"]["app"]


def test_foreign_host_header_is_refused(green_rig: GreenRig) -> None:
    rig = green_rig.rig
    response = httpx.get(f"{rig.base}/healthz", headers={"host": "evil.example:8765"})
    assert response.status_code == 421
    auth = {"authorization": f"Bearer {rig.token}", "host": "attacker.test"}
    assert httpx.post(rig.url, json={}, headers=auth).status_code == 421
    for host in ("evil.example:8765", "127.0.0.1.evil.example:9000", "localhostx:9000"):
        assert (
            httpx.post(
                rig.url, json=INITIALIZE, headers={**MCP_HEADERS, **rig.auth, "host": host}
            ).status_code
            == 421
        )


def test_loopback_host_on_any_port_is_accepted(green_rig: GreenRig) -> None:
    """As behind `docker run -p 127.0.0.1:9000:8765`: the client's port is not the bound one."""
    rig = green_rig.rig
    for host in ("127.0.0.1:9000", "localhost:1", "[::1]:9000", "localhost", f"127.0.0.1:{rig.port}"):
        headers = {**MCP_HEADERS, **rig.auth, "host": host, "origin": f"http://{host}"}
        assert httpx.post(rig.url, json=INITIALIZE, headers=headers).status_code == 200, host
        assert httpx.get(f"{rig.base}/readyz", headers={"host": host}).status_code == 200, host


def test_readyz_shows_details_only_with_the_token(green_rig: GreenRig) -> None:
    rig = green_rig.rig
    for auth in ({}, {"authorization": "Bearer wrong-token"}):
        anonymous = httpx.get(f"{rig.base}/readyz", headers=auth)
        assert anonymous.status_code == 200
        assert anonymous.json() == {
            "ready": True,
            "checks": {"display": True, "app": True, "window_manager": True},
        }
    detailed = httpx.get(f"{rig.base}/readyz", headers=rig.auth).json()
    assert detailed["ready"] is True and detailed["details"]["display"].startswith(":")
    assert {"xvfb", "app"} <= set(detailed["details"]["pids"])


def test_allowed_host_and_generated_token(tmp_path: Path) -> None:
    # Neither --token nor --no-auth: the runner generates a token and says it on stderr.
    port = free_port()
    argv = [*DESKRIG, "rig", "run", "--http", f"127.0.0.1:{port}", "--allowed-host", "rig1", "--", "xterm"]
    stderr = tmp_path / "stderr"
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("DESKRIG_TOKEN", None)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr.open("wb"), env=env)
    try:
        line = poll(
            "generated token",
            lambda: next((line for line in stderr.read_text().splitlines() if "token" in line), None),
        )
        token = line.rsplit(" ", 1)[-1]
        poll("ready", lambda: http_status(f"http://127.0.0.1:{port}/readyz") == 200, timeout=30)
        headers = {
            "authorization": f"Bearer {token}",
            "host": "rig1:8765",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        assert httpx.post(f"http://127.0.0.1:{port}/mcp", json=INITIALIZE, headers=headers).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_port_in_use_fails_at_once_in_one_line(tmp_path: Path) -> None:
    """Nothing starts (no Xvfb, no app) when the listen address is taken."""
    started = tmp_path / "started"
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    xvfb = fake_bin / "Xvfb"  # records that it ran, then is the real Xvfb
    xvfb.write_text(f'#!/bin/sh\ntouch {started}-xvfb\nexec {shutil.which("Xvfb")} "$@"\n')
    xvfb.chmod(0o755)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        app = ["sh", "-c", f"touch {started}-app; sleep 60"]
        result = subprocess.run(
            [*DESKRIG, "rig", "run", "--http", f"127.0.0.1:{port}", "--token", "t", "--", *app],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "HOME": str(tmp_path)},
        )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"deskrig: INVALID_ARGUMENT: cannot listen on 127.0.0.1:{port}: Address already in use"
        " (another rig or server uses it; choose another port)."
    ]
    assert not list(tmp_path.glob("started-*"))


def test_accepted_connections_send_without_nagle() -> None:
    """The listener's accepted sockets have TCP_NODELAY. With Nagle on, every reply over a
    kept-alive connection waited about 40 ms for the client's delayed ACK between uvicorn's
    header and body writes (asyncio turns Nagle off only when the socket's protocol says TCP)."""
    listener = bind_listener("127.0.0.1", 0)
    port = listener.getsockname()[1]
    accepted: list[int] = []

    async def accept_one() -> None:
        done = asyncio.Event()

        class Recorder(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                accepted.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()
                done.set()

        server = await asyncio.get_running_loop().create_server(Recorder, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.wait_for(done.wait(), timeout=20)
            writer.close()

    asyncio.run(accept_one())
    assert accepted == [1]


def test_slow_request_headers_are_cut_off(tmp_path: Path) -> None:
    """Slowloris: partial request heads (sent at once, trickled, or after a keep-alive request)
    and silent connections are closed after --header-timeout; other clients are served meanwhile."""
    rig = RigProcess(app=["xterm"], extra=["--header-timeout", "1", "--no-a11y"]).start(tmp_path)
    head = f"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:{rig.port}\r\n".encode()
    try:
        partial = [socket.create_connection(("127.0.0.1", rig.port)) for _ in range(5)]
        for sock in partial:
            sock.sendall(head)
        silent = socket.create_connection(("127.0.0.1", rig.port))
        trickle = socket.create_connection(("127.0.0.1", rig.port))
        keep_alive = socket.create_connection(("127.0.0.1", rig.port))
        assert _healthz_on(keep_alive, rig.port).startswith(b"HTTP/1.1 200")
        keep_alive.sendall(head)  # the next request on the same connection stops half-way
        # One byte at a time, well inside the timeout each: cut off on the way, however long the
        # head (a deadline that each byte put off would take this one's 30 s).
        trickled = head + b"x-slow: " + b"." * 300
        sent = 0
        for byte in trickled:
            try:
                trickle.send(bytes([byte]))
            except OSError:
                break
            sent += 1
            time.sleep(0.1)
        assert sent < len(trickled), "a head trickled a byte at a time was never cut off"
        assert http_status(f"{rig.base}/healthz") == 200  # the server still serves others
        for sock in [*partial, trickle, keep_alive]:
            assert read_until_closed(sock, timeout=5).startswith(b"HTTP/1.1 408 "), sock
        assert read_until_closed(silent, timeout=5) == b""
    finally:
        rig.stop()


def _post_head(port: int, length: int, headers: dict[str, str]) -> bytes:
    lines = [
        "POST /mcp HTTP/1.1",
        f"host: 127.0.0.1:{port}",
        *(f"{name}: {value}" for name, value in {**MCP_HEADERS, **headers}.items()),
        f"content-length: {length}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_a_request_body_that_stops_coming_is_cut_off(tmp_path: Path) -> None:
    """A Content-Length larger than the body sent: 408 and closed after --body-timeout, and the
    close alone where the response went out before the body (a 401). A body that keeps coming
    more slowly than that in all, each byte well inside it, is served; so are other clients."""
    rig = RigProcess(app=["xterm"], extra=["--body-timeout", "1", "--no-a11y"]).start(tmp_path)
    body = json.dumps(INITIALIZE).encode()
    try:
        short = socket.create_connection(("127.0.0.1", rig.port))
        short.sendall(_post_head(rig.port, len(body) + 100, rig.auth) + body)
        unauthorized = socket.create_connection(("127.0.0.1", rig.port))
        unauthorized.sendall(_post_head(rig.port, len(body) + 100, {}) + body)
        started = time.monotonic()
        trickle = socket.create_connection(("127.0.0.1", rig.port))
        trickle.sendall(_post_head(rig.port, len(body), rig.auth))
        for at in range(0, len(body), len(body) // 4 + 1):
            time.sleep(0.4)
            trickle.sendall(body[at : at + len(body) // 4 + 1])
        assert time.monotonic() - started > 1.5  # longer than the stall limit, all told
        assert http_status(f"{rig.base}/healthz") == 200
        answer = read_until_closed(short, timeout=5)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        refused = read_until_closed(unauthorized, timeout=5)
        assert refused.startswith(b"HTTP/1.1 401 ") and b"408" not in refused, refused
        trickle.settimeout(5)
        served = trickle.recv(65536)
        assert served.startswith(b"HTTP/1.1 200 "), served
        trickle.close()
    finally:
        rig.stop()
    assert "Traceback" not in rig.stderr()


def test_idle_connections_outlive_the_clients_keep_alive(green_rig: GreenRig) -> None:
    """The server keeps an idle connection open longer than httpx (the MCP SDK's client) does (5 s):
    with equal timeouts, a loaded server closed connections as clients reused them (ReadError)."""
    rig = green_rig.rig
    with socket.create_connection(("127.0.0.1", rig.port)) as sock:
        assert _healthz_on(sock, rig.port).startswith(b"HTTP/1.1 200")
        time.sleep(6)
        assert _healthz_on(sock, rig.port).startswith(b"HTTP/1.1 200")


def _healthz_on(sock: socket.socket, port: int) -> bytes:
    """GET /healthz on an open keep-alive connection; the whole response, or what came before EOF."""
    sock.sendall(f"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\r\n".encode())
    sock.settimeout(5)
    response = b""
    while not response.endswith(b'{"status":"ok"}') and (chunk := sock.recv(4096)):
        response += chunk
    return response


def test_no_auth_is_refused_off_loopback(tmp_path: Path) -> None:
    result = subprocess.run(
        [*DESKRIG, "rig", "run", "--http", "0.0.0.0:8765", "--no-auth", "--", "xterm"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert "--no-auth is only allowed on a loopback address" in result.stderr
    assert result.stdout == ""


def test_rate_limit_per_client(tmp_path: Path) -> None:
    rig = RigProcess(app=["xterm"], extra=["--max-captures-per-minute", "3"]).start(tmp_path)
    try:

        async def burst(client: Client) -> list[object]:
            args = {"x": 0, "y": 0, "width": 8, "height": 8}
            return [await client.call_tool("screenshot_region", args) for _ in range(4)]

        results = rig.session(burst)
        assert [r.is_error for r in results] == [False, False, False, True]
        error = tool_error(results[-1])
        assert error is not None
        assert error["code"] == "RATE_LIMIT_EXCEEDED"
        assert error["details"]["limit"] == 3 and error["details"]["current"] >= 3
        assert error["details"]["reset_at"]
        # Discovery is not a capture: still allowed.
        assert not rig.call("list_windows").is_error
    finally:
        rig.stop()


@pytest.fixture
def idle_rig(tmp_path: Path) -> Iterator[RigProcess]:
    """A rig of its own: nothing another test started in a shared one wakes it."""
    rig = RigProcess(app=color_app("Idle", "#20c040", tmp_path / "app.log")).start(tmp_path)
    try:
        yield rig
    finally:
        rig.stop()


#: How long an idle rig is watched for wake-ups.
IDLE_WINDOW_S = 5.0


@pytest.mark.parametrize("recording", [False, True], ids=["nothing running", "a session recording"])
def test_an_idle_rig_does_not_wake_to_poll(idle_rig: RigProcess, tmp_path: Path, recording: bool) -> None:
    """With an MCP session open (its GET event stream too) and nothing asked, the rig's process
    sleeps. Its server polled for the stop ten times a second and uvicorn's loop ticked ten times
    (12 wake-ups a second measured); then uvicorn's loop woke once a second to date responses and
    sse-starlette's shutdown watcher twice (3 a second, most of an idle rig container's CPU), and
    a session recording's idle watch once more; now nothing polls (the event stream's keepalive
    ping comes every 15 s; 0 a second measured)."""
    assert idle_rig.proc is not None
    pid = idle_rig.proc.pid
    saves = tmp_path / "home" / "deskrig"
    saves.mkdir(parents=True, exist_ok=True)

    async def quiet_window() -> float:
        async with connect(idle_rig.url, idle_rig.token) as client:
            await client.call_tool("list_windows", {})  # whatever a first call starts has started
            if recording:
                started = await client.call_tool("start_recording", {"output_dir": str(saves / "idle")})
                assert not started.is_error, started.structured_content
            before, started_at = process_wakeups(pid), time.monotonic()
            await anyio.sleep(IDLE_WINDOW_S)
            return (process_wakeups(pid) - before) / (time.monotonic() - started_at)

    per_second = anyio.run(quiet_window)
    assert per_second < 0.5, f"the idle rig's threads woke {per_second:.1f} times a second"


def test_responses_are_dated_as_they_are_made(idle_rig: RigProcess) -> None:
    """uvicorn dated responses from a header its main loop refreshed every second; the rig's loop
    no longer wakes for it, so a request dates its response as it arrives."""

    def dated() -> float:
        return parsedate_to_datetime(httpx.get(f"{idle_rig.base}/healthz").headers["date"]).timestamp()

    first = dated()
    later = poll("a response dated a later second", lambda: (date := dated()) > first and date, timeout=5)
    assert abs(later - time.time()) < 2


@pytest.mark.parametrize("stop", ["SIGTERM", "the app exits"])
def test_an_open_session_does_not_hold_a_stopping_rig(idle_rig: RigProcess, stop: str) -> None:
    """An MCP session's GET event stream ends as soon as the server is asked to exit (it waits
    for that exit, woken by it, now that no watcher polls for it) rather than holding the rig's
    exit for uvicorn's whole graceful-shutdown timeout (8 s)."""
    assert idle_rig.proc is not None
    opened, release = threading.Event(), threading.Event()

    async def hold_a_session() -> None:
        with contextlib.suppress(Exception):  # the rig goes away under it
            async with connect(idle_rig.url, idle_rig.token) as client:
                await client.call_tool("list_windows", {})
                opened.set()
                await anyio.to_thread.run_sync(release.wait)

    holder = threading.Thread(target=anyio.run, args=(hold_a_session,))
    holder.start()
    try:
        poll("an open session", opened.is_set)
        app_pid = (idle_rig.readyz() or {})["details"]["pids"]["app"]
        if stop == "SIGTERM":
            idle_rig.proc.send_signal(signal.SIGTERM)
        else:
            os.kill(app_pid, signal.SIGTERM)
        idle_rig.proc.wait(timeout=20)
    finally:
        release.set()
        holder.join(timeout=30)
    idle_rig.assert_exit_not_held("an open session's event stream")
