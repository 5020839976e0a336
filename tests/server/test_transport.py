"""Transports and the runner: auth, Host checks, stdio purity, rate limits, profiles, teardown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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
from tests.server.rigproc import DESKRIG, INITIALIZE, RigProcess, color_app, free_port, http_status

from deskrig.errors import tool_error


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
    """Pids of live processes that belong to the rig on ``display`` (by env or by Xvfb argv)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
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
