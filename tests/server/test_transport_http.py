"""Transports and the runner: auth, Host checks, stdio purity, rate limits, profiles, teardown."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from PIL import Image
from tests.polling import poll
from tests.server.conftest import GREEN, GreenRig
from tests.server.rigproc import (
    DESKRIG,
    INITIALIZE,
    RigProcess,
    color_app,
    free_port,
    http_status,
    read_until_closed,
)

from deskrig.errors import tool_error
from deskrig.rig import EXIT_DISPLAY_LOST

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
        started = time.monotonic()
        for byte in head:  # one byte at a time, well inside the timeout each: still cut off
            try:
                trickle.send(bytes([byte]))
            except OSError:
                break
            time.sleep(0.1)
        assert http_status(f"{rig.base}/healthz") == 200  # the server still serves others
        for sock in [*partial, trickle, keep_alive]:
            assert read_until_closed(sock, timeout=5).startswith(b"HTTP/1.1 408 "), sock
        assert read_until_closed(silent, timeout=5) == b""
        assert time.monotonic() - started < 8
    finally:
        rig.stop()


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


def test_stdio_stdout_carries_only_protocol(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    proc = subprocess.Popen(
        [*DESKRIG, "rig", "run", "--stdio", "--", *color_app("Stdio App", GREEN, log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.stdin and proc.stdout
    messages = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "list_windows", "arguments": {}},
        },
    ]
    for message in messages:
        proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    replies = [json.loads(proc.stdout.readline()) for _ in range(2)]
    proc.stdin.close()  # EOF: the runner ends and tears the rig down
    rest = proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    assert rest.strip() == b""
    assert replies[0]["id"] == 1 and replies[0]["result"]["serverInfo"]["name"] == "deskrig"
    titles = [w["title"] for w in replies[1]["result"]["structuredContent"]["windows"]]
    assert "Stdio App" in titles


def test_stdio_with_the_mcp_client(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    params = StdioServerParameters(
        command=DESKRIG[0],
        args=["rig", "run", "--stdio", "--", *color_app("Client App", GREEN, log)],
        env={**os.environ, "HOME": str(tmp_path)},
    )

    async def run() -> tuple[list[str], dict[str, object]]:
        async with Client(params) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            shot = await client.call_tool("screenshot_window", {"window_title": "client app"})
            return tools, shot.structured_content or {}

    tools, shot = anyio.run(run)
    assert {"list_windows", "screenshot_screen", "screenshot_window", "screenshot_region"} <= set(tools)
    assert "screenshot_capture_full" not in tools
    assert shot["window"]["title"] == "Client App"  # type: ignore[index]


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


def test_acs_profile_shapes(tmp_path: Path) -> None:
    log = tmp_path / "acs.log"
    rig = RigProcess(app=color_app("ACS App", GREEN, log), extra=["--tool-profile", "acs"]).start(tmp_path)
    saves = tmp_path / "home" / "deskrig"
    saves.mkdir(parents=True)
    try:

        async def run(client: Client) -> dict[str, object]:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {
                "screenshot_capture_full",
                "screenshot_capture_window",
                "screenshot_capture_region",
                "screenshot_list_displays",
                "screenshot_list_windows",
            }
            windows = (await client.call_tool("screenshot_list_windows", {})).structured_content
            win = next(w for w in windows["windows"] if w["title"] == "ACS App")
            inline = (
                await client.call_tool(
                    "screenshot_capture_window", {"windowId": str(win["id"]), "enablePIIMasking": True}
                )
            ).structured_content
            saved = (
                await client.call_tool("screenshot_capture_full", {"savePath": str(saves), "format": "jpeg"})
            ).structured_content
            bad = await client.call_tool(
                "screenshot_capture_region", {"x": 0, "y": 0, "width": 0, "height": 5}
            )
            return {"windows": windows, "inline": inline, "saved": saved, "bad": bad.structured_content}

        out = rig.session(run)
        inline, saved, bad = out["inline"], out["saved"], out["bad"]
        assert inline["status"] == "success" and inline["mimeType"] == "image/png" and inline["data"]  # type: ignore[index]
        assert inline["metadata"]["piiMasking"]["enabled"] is False  # type: ignore[index]
        assert saved["status"] == "success" and Path(saved["filePath"]).exists()  # type: ignore[index]
        assert "data" not in saved  # type: ignore[operator]
        assert bad == {"status": "error", "error": bad["error"]} and bad["error"]["code"] == "INVALID_REGION"  # type: ignore[index]
    finally:
        rig.stop()


def test_acs_save_path_is_the_file_to_write_and_displays_count_from_one(tmp_path: Path) -> None:
    log = tmp_path / "acs.log"
    rig = RigProcess(app=color_app("ACS App", GREEN, log), extra=["--tool-profile", "acs"]).start(tmp_path)
    saves = tmp_path / "home" / "deskrig"
    outside = tmp_path / "outside"
    outside.mkdir()
    saves.mkdir(parents=True)
    (saves / "escape.png").symlink_to(outside / "escape.png")

    def capture(**arguments: Any) -> dict[str, Any]:
        result = rig.call("screenshot_capture_full", arguments)
        return result.structured_content  # type: ignore[no-any-return]

    try:
        # The documented example: a file path, its parent created, the extension picking the format.
        png = saves / "screenshots" / "desktop.png"
        saved = capture(savePath=str(png))
        assert saved["status"] == "success" and saved["filePath"] == str(png), saved
        assert png.is_file() and Image.open(png).format == "PNG" and Image.open(png).size == (1280, 800)
        assert saved["mimeType"] == "image/png" and saved["metadata"]["fileSize"] == png.stat().st_size
        jpeg = capture(savePath=str(saves / "full.jpg"))
        assert Image.open(jpeg["filePath"]).format == "JPEG" and jpeg["mimeType"] == "image/jpeg"
        assert Image.open(capture(savePath=str(saves / "x.webp"), format="bmp")["filePath"]).format == "BMP"
        # Saving again replaces the file (atomically: no temp file is left beside it).
        capture(savePath=str(png), display="1")
        assert sorted(p.name for p in png.parent.iterdir()) == ["desktop.png"]
        # An existing directory, or a path ending in '/', keeps the dated layout.
        for folder in [str(saves / "screenshots"), str(saves / "dated") + "/"]:
            path = Path(capture(savePath=folder)["filePath"])
            assert path.parent.parent == Path(folder.rstrip("/")) and path.suffix == ".png", path
        # The same path policy: nothing outside the allowed directories, through a symlink or not.
        for bad in [str(outside / "x.png"), str(saves / "escape.png"), str(saves / ".." / "outside" / "y.png")]:
            refused = capture(savePath=bad)
            assert refused["status"] == "error" and refused["error"]["code"] == "INVALID_PATH", bad
        assert list(outside.iterdir()) == []
        assert capture(savePath=str(saves / "a.gif"))["error"]["code"] == "UNSUPPORTED_FORMAT"
        # Displays are numbered from 1 here too; 0 is all of them.
        (display,) = rig.call("screenshot_list_displays", {}).structured_content["displays"]
        assert display["id"] == 1
        assert capture(display="1")["metadata"]["display"]["id"] == 1
        assert capture(display="0")["metadata"]["region"] == {"x": 0, "y": 0, "width": 1280, "height": 800}
        assert capture(display="2")["error"]["code"] == "DISPLAY_NOT_FOUND"
    finally:
        rig.stop()


def _rig_processes(display: str) -> list[int]:
    """Pids of live processes that belong to the rig on ``display`` (by env or by Xvfb argv), in
    this pid namespace: a rig in a container numbers its displays on its own."""
    found = []
    own_namespace = os.readlink("/proc/self/ns/pid")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "pid") != own_namespace:
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat.split(")")[-1].split()[0] == "Z":
            continue
        if f"DISPLAY={display}".encode() in environ or (
            b"Xvfb" in cmdline[0] and display.encode() in cmdline
        ):
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_tears_everything_down(tmp_path: Path, sig: int) -> None:
    rig = RigProcess(app=["xterm", "-e", "sh", "-c", "sleep 300"]).start(tmp_path)
    display = rig.display
    assert _rig_processes(display)
    assert rig.stop(sig) == 0
    poll("no stray processes", lambda: not _rig_processes(display), timeout=10)


@pytest.mark.parametrize("app", [[], ["xterm", "-e", "sh", "-c", "sleep 300"]], ids=["bare", "xterm"])
def test_display_death_stops_the_runner_cleanly(tmp_path: Path, app: list[str]) -> None:
    """Xvfb killed under a running rig: the runner stops with EXIT_DISPLAY_LOST, quietly, leaving
    nothing behind (before, a bare rig ran on without a display, and a rig with an app died in
    teardown on Xlib's ConnectionClosedError)."""
    rig = RigProcess(app=app).start(tmp_path)
    try:
        details = rig.wait_ready()["details"]
        display = details["display"]
        runtime_dir = Path(details["a11y_bus"].split(",")[0].removeprefix("unix:path=")).parents[1]
        os.kill(details["pids"]["xvfb"], signal.SIGKILL)
        assert rig.proc is not None and rig.proc.wait(timeout=30) == EXIT_DISPLAY_LOST
    finally:
        rig.stop()
    stderr = rig.stderr()
    assert "Traceback" not in stderr and "the X server (Xvfb" in stderr, stderr
    poll("no stray processes", lambda: not _rig_processes(display), timeout=10)
    assert not Path(runtime_dir).exists()


def test_sigterm_tears_down_a_rig_whose_display_is_wedged(tmp_path: Path) -> None:
    """Xvfb alive but not answering (here: stopped), a tool call blocked on it: SIGTERM still ends
    the runner and every process (before, shutdown waited on the call for ever)."""
    rig = RigProcess(app=["xterm"]).start(tmp_path)
    details = rig.wait_ready()["details"]
    try:
        os.kill(details["pids"]["xvfb"], signal.SIGSTOP)
        results: list[bool] = []

        def call_blocked_on_x() -> None:
            # The call must end with an answer, not hang: a tool error, or the JSON-RPC error a
            # server that is shutting down gives a call it cancelled.
            try:
                results.append(rig.call("list_windows").is_error)
            except Exception:
                results.append(True)

        call = threading.Thread(target=call_blocked_on_x, daemon=True)
        call.start()
        time.sleep(1)
        assert rig.stop(timeout=40) == 0
        call.join(timeout=10)
        assert results == [True]
        poll("no stray processes", lambda: not _rig_processes(details["display"]), timeout=10)
        assert "Traceback" not in rig.stderr()
    finally:  # on failure: the others die with the runner, but a stopped Xvfb only by SIGKILL
        if rig.proc is not None and rig.proc.poll() is None:
            rig.proc.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(details["pids"]["xvfb"], signal.SIGKILL)


def test_app_exit_ends_the_runner_with_its_status(tmp_path: Path) -> None:
    marker = tmp_path / "go"
    script = f"import tkinter,os,time; r=tkinter.Tk(); r.title('Short'); r.after(100, lambda: None); r.update(); \
import pathlib; p=pathlib.Path({str(marker)!r}); [time.sleep(0.05) for _ in iter(lambda: p.exists(), True)]; os._exit(7)"
    rig = RigProcess(app=["/usr/bin/python3", "-c", script]).start(tmp_path)
    display = rig.display
    marker.touch()
    assert rig.proc is not None
    assert rig.proc.wait(timeout=30) == 7
    poll("no stray processes", lambda: not _rig_processes(display), timeout=10)


def test_app_dying_at_startup_reports_status_and_stderr(tmp_path: Path) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [
            *DESKRIG,
            "rig",
            "run",
            "--http",
            f"127.0.0.1:{free_port()}",
            "--token",
            "t",
            "--",
            sys.executable,
            "-c",
            "import sys; sys.stderr.write('boom: cannot open thing\\n'); sys.exit(3)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "boom: cannot open thing" in result.stderr
    assert "3" in result.stderr
    assert time.monotonic() - started < 30
