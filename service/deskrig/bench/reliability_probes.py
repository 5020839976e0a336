"""Probes: the battery of auth, Host, Origin, path and body attacks, each against what a safe rig
answers. Raw HTTP (``http.client``, sockets) where the attack is in the request itself; an MCP
client where it is in a tool's arguments.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic import BaseModel

from deskrig.bench.reliability_calls import call_fresh
from deskrig.bench.reliability_outcomes import table, write
from deskrig.bench.reliability_rig import INITIALIZE, BenchRig

INITIALIZE_BODY = json.dumps(INITIALIZE).encode()
SLOW_CLIENTS = 5


class ProbeResult(BaseModel):
    group: str
    probe: str
    expected: str
    observed: str
    met: bool


@dataclass(frozen=True)
class Answer:
    status: int | None
    body: bytes
    error: str | None = None

    def describe(self) -> str:
        return self.error or f"HTTP {self.status}"


def http_request(
    rig: BenchRig,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None = None,
    timeout: float = 30.0,
) -> Answer:
    connection = http.client.HTTPConnection("127.0.0.1", rig.port, timeout=timeout)
    try:
        # A Host among the headers replaces the one http.client would add.
        connection.request(method, path, body=body, headers={"Host": f"127.0.0.1:{rig.port}", **headers})
        response = connection.getresponse()
        return Answer(response.status, response.read())
    except (OSError, http.client.HTTPException) as exc:
        return Answer(None, b"", type(exc).__name__)
    finally:
        connection.close()


def mcp_post(rig: BenchRig, headers: dict[str, str], body: bytes = INITIALIZE_BODY) -> Answer:
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    return http_request(rig, "POST", "/mcp", {**base, **headers}, body)


def _status(expected: int) -> Callable[[Answer], bool]:
    return lambda answer: answer.status == expected


def _client_error(answer: Answer) -> bool:
    return answer.status is not None and 400 <= answer.status < 500


def _http_probes(rig: BenchRig, body_mib: int, wait: float) -> list[ProbeResult]:
    bearer = {"Authorization": f"Bearer {rig.token}"}
    port = rig.port
    cases: list[tuple[str, str, str, Callable[[], Answer], Callable[[Answer], bool]]] = [
        ("auth", "no token", "401", lambda: mcp_post(rig, {}), _status(401)),
        (
            "auth",
            "wrong token",
            "401",
            lambda: mcp_post(rig, {"Authorization": "Bearer wrong"}),
            _status(401),
        ),
        (
            "auth",
            "right token, Basic scheme",
            "401",
            lambda: mcp_post(rig, {"Authorization": f"Basic {rig.token}"}),
            _status(401),
        ),
        ("auth", "right token in the query string only", "401", lambda: _query_token(rig), _status(401)),
        ("auth", "right token (control)", "200", lambda: mcp_post(rig, bearer), _status(200)),
        (
            "auth",
            "right token, lower-case scheme",
            "200",
            lambda: mcp_post(rig, {"Authorization": f"bearer {rig.token}"}),
            _status(200),
        ),
        (
            "host",
            "foreign Host",
            "421",
            lambda: mcp_post(rig, {**bearer, "Host": "evil.example"}),
            _status(421),
        ),
        (
            "host",
            "foreign Host on the rig's port",
            "421",
            lambda: mcp_post(rig, {**bearer, "Host": f"evil.example:{port}"}),
            _status(421),
        ),
        (
            "host",
            "loopback prefix of a foreign name",
            "421",
            lambda: mcp_post(rig, {**bearer, "Host": f"127.0.0.1.evil.example:{port}"}),
            _status(421),
        ),
        (
            "host",
            "loopback on another port (a published port)",
            "200",
            lambda: mcp_post(rig, {**bearer, "Host": "127.0.0.1:9000"}),
            _status(200),
        ),
        (
            "host",
            "localhost on the rig's port",
            "200",
            lambda: mcp_post(rig, {**bearer, "Host": f"localhost:{port}"}),
            _status(200),
        ),
        (
            "origin",
            "foreign Origin",
            "4xx",
            lambda: mcp_post(rig, {**bearer, "Origin": "http://evil.example"}),
            _client_error,
        ),
        (
            "origin",
            "loopback Origin",
            "200",
            lambda: mcp_post(rig, {**bearer, "Origin": f"http://127.0.0.1:{port}"}),
            _status(200),
        ),
        (
            "body",
            "garbled JSON",
            "4xx",
            lambda: mcp_post(rig, bearer, b'{"jsonrpc": "2.0", "id": 1,'),
            _client_error,
        ),
        ("body", "not UTF-8", "4xx", lambda: mcp_post(rig, bearer, b"\xff\xfe\x00garbage"), _client_error),
        (
            "body",
            f"{body_mib} MiB body",
            "4xx",
            lambda: mcp_post(rig, bearer, b'{"x": "' + b"a" * (body_mib * 2**20) + b'"}'),
            _client_error,
        ),
        (
            "body",
            "Content-Length larger than the body",
            f"4xx or closed within {wait:g} s",
            lambda: _short_body(rig, bearer, wait),
            lambda a: a.error != "TimeoutError" and (a.status is None or _client_error(a)),
        ),
    ]
    results = [_readyz_without_token(rig)]
    for group, name, expected, probe, check in cases:
        started = time.monotonic()
        answer = probe()
        observed = f"{answer.describe()} ({time.monotonic() - started:.1f} s)"
        results.append(
            ProbeResult(group=group, probe=name, expected=expected, observed=observed, met=check(answer))
        )
    healthy = rig.readyz() is not None
    results.append(
        ProbeResult(
            group="body",
            probe="the rig answers after the body probes",
            expected="/readyz answers",
            observed="answers" if healthy else "no answer",
            met=healthy,
        )
    )
    return results


def _query_token(rig: BenchRig) -> Answer:
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    return http_request(rig, "POST", f"/mcp?token={rig.token}", base, INITIALIZE_BODY)


def _short_body(rig: BenchRig, headers: dict[str, str], wait: float) -> Answer:
    """Promise 1000 bytes, send 10, and wait up to ``wait`` seconds for the rig to answer or close."""
    base = {"Content-Type": "application/json", "Accept": "application/json", "Content-Length": "1000"}
    return http_request(rig, "POST", "/mcp", {**base, **headers}, b'{"jsonrpc"', timeout=wait)


def _readyz_without_token(rig: BenchRig) -> ProbeResult:
    answer = rig.readyz(token=False)
    text = "" if answer is None else json.dumps(answer[1])
    # ``checks`` (e.g. ``"display": true``) is up/down; ``details`` holds the pids and socket paths.
    leaks = [word for word in ("details", "pids", "a11y_bus", "unix:path") if word in text]
    return ProbeResult(
        group="auth",
        probe="/readyz without a token",
        expected="up/down only (no pids, sockets)",
        observed=f"shows {', '.join(leaks)}" if leaks else "up/down only",
        met=not leaks,
    )


PATH_PROBES: list[tuple[str, str, dict[str, Any]]] = [
    ("save_dir with ..", "screenshot_screen", {"save_dir": "~/deskrig/../../etc"}),
    ("save_dir outside", "screenshot_screen", {"save_dir": "/etc"}),
    ("save_dir through a symlink out", "screenshot_screen", {"save_dir": "~/deskrig/out-link"}),
    ("output_dir with ..", "start_recording", {"output_dir": "/tmp/../root/x"}),
    ("acs savePath with ..", "screenshot_capture_full", {"savePath": "~/deskrig/../../../tmp/x.png"}),
    ("replay outside", "replay_trajectory", {"dir": "/etc"}),
]


async def _path_probes(rig: BenchRig, timeout: float) -> list[ProbeResult]:
    outside = rig.root / "outside"
    outside.mkdir()
    os.symlink(outside, rig.allowed / "out-link")
    results = []
    for name, tool, arguments in PATH_PROBES:
        outcome = await call_fresh(rig, tool, arguments, timeout)
        observed = outcome.code or outcome.kind
        written = any(outside.iterdir())
        results.append(
            ProbeResult(
                group="path",
                probe=f"{name} ({tool})",
                expected="INVALID_PATH, nothing written",
                observed=observed + (", wrote outside" if written else ""),
                met=outcome.code == "INVALID_PATH" and not written,
            )
        )
    return results


def _slow_headers(rig: BenchRig, wait: float) -> list[ProbeResult]:
    """Open connections that never finish their headers; the rig should close them in bounded time."""
    sockets = []
    for _ in range(SLOW_CLIENTS):
        sock = socket.create_connection(("127.0.0.1", rig.port), timeout=5)
        sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{rig.port}\r\nX-Slow: ".encode())
        sockets.append(sock)
    try:
        healthy_meanwhile = rig.readyz() is not None
        deadline = time.monotonic() + wait
        closed: set[int] = set()
        while len(closed) < len(sockets) and time.monotonic() < deadline:
            for index, sock in enumerate(sockets):
                if index not in closed and _closed_by_peer(sock):
                    closed.add(index)
            time.sleep(0.2)
    finally:
        for sock in sockets:
            sock.close()
    return [
        ProbeResult(
            group="slow headers",
            probe=f"{SLOW_CLIENTS} connections with unfinished headers",
            expected=f"closed within {wait:g} s",
            observed=f"{len(closed)} of {SLOW_CLIENTS} closed",
            met=len(closed) == len(sockets),
        ),
        ProbeResult(
            group="slow headers",
            probe="the rig answers others meanwhile",
            expected="/readyz answers",
            observed="answers" if healthy_meanwhile else "no answer",
            met=healthy_meanwhile,
        ),
    ]


def _closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(0.0)
    try:
        sock.recv(4096)  # an answer (a 408) or EOF: either way the rig ended the request
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def run_probes(timeout: float, slow_wait: float, body_mib: int) -> list[ProbeResult]:
    # The rig's header and body deadlines are half the probes' wait, so a closed stalled
    # connection is seen.
    deadline = str(max(1.0, slow_wait / 2))
    rig = BenchRig(
        app=["xterm"],
        extra=[
            "--tool-profile",
            "all",
            "--no-a11y",
            "--header-timeout",
            deadline,
            "--body-timeout",
            deadline,
        ],
    )
    try:
        rig.start()
        results = _http_probes(rig, body_mib, slow_wait)
        results += anyio.run(_path_probes, rig, timeout)
        results += _slow_headers(rig, slow_wait)
        return results
    finally:
        rig.cleanup()


def print_probes(results: list[ProbeResult]) -> None:
    rows = [[r.group, r.probe, r.expected, r.observed, "yes" if r.met else "NO"] for r in results]
    table("reliability: probes", ["group", "probe", "expected", "observed", "met"], rows, numeric_from=5)
    write(f"\n- probes as expected: {sum(r.met for r in results)} of {len(results)}\n")
