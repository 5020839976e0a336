"""`deskrig serve` attached to an existing display (native mode), and `deskrig doctor`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from tests.desktop.conftest import SCREEN, start_xvfb, stop_process
from tests.polling import poll
from tests.rigprocs import BACKENDS
from tests.server.conftest import GREEN
from tests.server.rigproc import DESKRIG, RigProcess, color_app, free_port, http_status, read_events
from tests.sway.swayproc import start_sway

from deskrig.errors import tool_error


def test_serve_attaches_to_an_existing_display(tmp_path: Path) -> None:
    xvfb, display = start_xvfb(tmp_path)
    env = {**os.environ, "DISPLAY": display, "HOME": str(tmp_path), "NO_AT_BRIDGE": "1"}
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    log = tmp_path / "app.log"
    app = subprocess.Popen(color_app("Native App", GREEN, log, pos="40,50"), env=env)
    port = free_port()
    server = subprocess.Popen(
        [*DESKRIG, "serve", "--http", f"127.0.0.1:{port}", "--token", "T"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "serve.err").open("wb"),
    )
    try:
        ready = poll("app ready", lambda: read_events(log, "ready"))[-1]
        poll("serve ready", lambda: http_status(f"http://127.0.0.1:{port}/readyz") == 200)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        assert httpx.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers).status_code == 401

        attached = RigProcess(app=[], token="T", port=port)
        windows = attached.call("list_windows", {}).structured_content["windows"]
        (window,) = [w for w in windows if w["title"] == "Native App"]
        assert window["pid"] == ready["pid"]
        # No window manager here: the client area is where the app says it is.
        assert window["bounds"] == {k: ready[k] for k in ("x", "y", "width", "height")}
        shot = attached.call("screenshot_window", {"window_id": window["id"]})
        assert shot.structured_content["window"]["id"] == window["id"]
        # No session bus: no accessibility, and a clear error saying so.
        error = tool_error(attached.call("get_app_state", {"pid": ready["pid"]}))
        assert error["code"] == "A11Y_UNAVAILABLE"
    finally:
        server.terminate()
        assert server.wait(timeout=20) == 0
        assert server.stdout is not None and server.stdout.read() == b""
        app.terminate()
        app.wait(timeout=10)
        stop_process(xvfb)


@contextlib.contextmanager
def running_display(backend: str, tmp_path: Path) -> Iterator[tuple[dict[str, str], Callable[[], None]]]:
    """A display of ``backend`` (Xvfb, or a headless sway) to attach to: the variables that
    name it, and a function that SIGKILLs its server."""
    if backend == "x11":
        xvfb, display = start_xvfb(tmp_path)

        def kill_xvfb() -> None:
            xvfb.kill()
            xvfb.wait(timeout=10)

        try:
            yield {"DISPLAY": display}, kill_xvfb
        finally:
            stop_process(xvfb)
    else:
        sway = start_sway(tmp_path, SCREEN)

        def kill_sway() -> None:
            os.kill(sway.proc.pid, signal.SIGKILL)
            sway.proc.wait(timeout=10)

        try:
            yield sway.env, kill_sway
        finally:
            sway.stop()


@pytest.mark.parametrize("backend", BACKENDS)
def test_serve_answers_structured_errors_and_stops_cleanly_after_its_display_died(
    tmp_path: Path, backend: str
) -> None:
    """The display's connections are already closed by the server when teardown closes them."""
    with running_display(backend, tmp_path) as (display_env, kill_display):
        _serve_until_the_display_dies(tmp_path, display_env, kill_display)


def _serve_until_the_display_dies(
    tmp_path: Path, display_env: dict[str, str], kill_display: Callable[[], None]
) -> None:
    host_env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SWAYSOCK")}
    env = {**host_env, **display_env, "HOME": str(tmp_path), "NO_AT_BRIDGE": "1"}
    port = free_port()
    stderr = tmp_path / "serve.err"
    server = subprocess.Popen(
        [*DESKRIG, "serve", "--http", f"127.0.0.1:{port}", "--token", "T"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr.open("wb"),
    )
    try:
        poll("serve ready", lambda: http_status(f"http://127.0.0.1:{port}/readyz") == 200)
        attached = RigProcess(app=[], token="T", port=port)
        assert not attached.call("list_windows", {}).is_error
        kill_display()
        for tool in ("screenshot_screen", "list_windows", "click"):
            arguments = {"x": 5, "y": 5} if tool == "click" else {}
            result = attached.call(tool, arguments)
            assert result.is_error, tool
            assert (tool_error(result) or {}).get("code") in ("DISPLAY_NOT_FOUND", "INPUT_FAILED"), tool
        assert http_status(f"http://127.0.0.1:{port}/readyz") == 503
    finally:
        server.terminate()
        status = server.wait(timeout=20)
    assert status == 0, stderr.read_text()
    assert "Traceback" not in stderr.read_text()


def test_doctor_reports_backend_and_displays(tmp_path: Path) -> None:
    xvfb, display = start_xvfb(tmp_path)
    try:
        out = subprocess.run(
            [*DESKRIG, "doctor", "--display", display], capture_output=True, text=True, timeout=30
        )
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert report["backend"] == "x11"
        assert report["screen"]["width"] > 0 and report["displays"][0]["primary"]
        assert isinstance(report["diagnostics"], list)
    finally:
        stop_process(xvfb)


def test_serve_without_a_display_fails_clearly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    out = subprocess.run(
        [*DESKRIG, "serve", "--stdio"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 1
    assert "DISPLAY_NOT_FOUND" in out.stderr and out.stdout == ""
