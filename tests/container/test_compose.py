"""`docker compose up` of compose.yaml: the GTK example rig over MCP/HTTP through the published
port, its hardening, a restart, and the Qt example in its profile."""

from __future__ import annotations

import base64
import io
from typing import Any

import httpx
import pytest
from PIL import Image
from tests.container.conftest import DOCKER_POLL_S, STACK_TIMEOUT_S, ComposeStack, call_tool, docker, inspect
from tests.polling import poll

pytestmark = pytest.mark.docker

GTK_TITLE = "deskrig GTK example"
QT_TITLE = "deskrig Qt example"


def window_titled(url: str, token: str, title: str) -> dict[str, Any]:
    result = call_tool(url, token, "list_windows", {})
    assert not result.is_error, result
    (window,) = [w for w in result.structured_content["windows"] if w["title"] == title]
    return window  # type: ignore[no-any-return]


def screenshot(url: str, token: str) -> Image.Image:
    result = call_tool(url, token, "screenshot_screen", {})
    assert not result.is_error, result
    (block,) = [c for c in result.content if c.type == "image"]
    return Image.open(io.BytesIO(base64.b64decode(block.data))).convert("RGB")


def colours(image: Image.Image) -> dict[tuple[int, int, int], int]:
    """Pixel count per colour."""
    return {colour: count for count, colour in image.getcolors(image.width * image.height) or []}


def light_fraction(image: Image.Image) -> float:
    """Share of pixels that are light grey/white: a GTK or Qt window's background."""
    counts = colours(image)
    return sum(n for colour, n in counts.items() if min(colour) >= 200) / sum(counts.values())


def greet_round_trip(url: str, token: str, pid: int, name: str) -> None:
    """Type into the focused name field, press Greet, read the answer from the a11y tree."""
    typed = call_tool(url, token, "type_text", {"text": name})
    assert not typed.is_error, typed
    clicked = call_tool(url, token, "click", {"element": {"role": "button", "name": "Greet", "pid": pid}})
    assert not clicked.is_error, clicked

    def greeting() -> str | None:
        # A label's accessible name is its text.
        state = call_tool(url, token, "get_app_state", {"pid": pid, "role": "label", "name": "Hello"})
        assert not state.is_error, state
        return next((e["name"] for e in state.structured_content["elements"]), None)

    assert poll("the greeting to update", greeting, timeout=10, interval=DOCKER_POLL_S) == f"Hello, {name}!"


def test_mcp_client_finds_the_app_and_sees_its_pixels(gtk_stack: ComposeStack) -> None:
    window = window_titled(gtk_stack.url, gtk_stack.token, GTK_TITLE)
    bounds = window["bounds"]
    assert window["pid"] > 1 and bounds["width"] >= 300 and bounds["height"] >= 100
    image = screenshot(gtk_stack.url, gtk_stack.token)
    assert image.size == (1280, 800)
    inside = image.crop(
        (bounds["x"], bounds["y"], bounds["x"] + bounds["width"], bounds["y"] + bounds["height"])
    )
    # The window is the light form (with darker text and widgets); the desktop around it is black.
    assert light_fraction(inside) > 0.7
    assert len(colours(inside)) > 20
    frame = window["frame_bounds"]
    below = image.crop((0, frame["y"] + frame["height"] + 5, 1280, 800))
    assert set(colours(below)) == {(0, 0, 0)}


def test_typed_text_reads_back(gtk_stack: ComposeStack) -> None:
    window = window_titled(gtk_stack.url, gtk_stack.token, GTK_TITLE)
    greet_round_trip(gtk_stack.url, gtk_stack.token, window["pid"], "Ada 李")


def test_token_is_required_on_the_published_port(gtk_stack: ComposeStack) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(timeout=10) as http:
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": gtk_stack.token}):
            response = http.post(gtk_stack.url, json=body, headers=headers | auth)
            assert response.status_code == 401, (auth, response.text)
            assert response.json()["error"]["code"] == "PERMISSION_DENIED"
        # The probes stay open (Docker's HEALTHCHECK has no token).
        assert http.get(f"http://127.0.0.1:{gtk_stack.port}/readyz").json()["ready"] is True


def test_container_is_hardened(gtk_stack: ComposeStack) -> None:
    container = gtk_stack.container()
    assert docker("exec", container, "id", "-u").stdout.strip() == "1000"
    write = docker("exec", container, "touch", "/probe")
    assert write.returncode != 0 and "Read-only file system" in write.stderr
    # Every process in the container, PID 1 included: no capabilities at all, no way to gain any.
    statuses = docker(
        "exec", container, "sh", "-c", "cat /proc/[0-9]*/status 2>/dev/null | grep -E '^(Cap|NoNewPrivs)'"
    ).stdout.splitlines()
    assert len(statuses) >= 5 * 6  # tini, deskrig, Xvfb, openbox, the app, ...
    for line in statuses:
        key, value = line.split(":")
        if key == "NoNewPrivs":
            assert value.strip() == "1", line
        else:
            assert int(value, 16) == 0, line
    assert docker("exec", container, "test", "-e", "/var/run/docker.sock").returncode != 0
    host = inspect(container)["HostConfig"]
    assert host["Privileged"] is False and host["ReadonlyRootfs"] is True
    assert host["NetworkMode"] not in ("host", "none")
    assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert host["Memory"] > 0 and host["PidsLimit"] > 0
    assert [b["HostIp"] for b in host["PortBindings"]["8765/tcp"]] == ["127.0.0.1"]


def test_artifacts_dir_is_the_rigs(gtk_stack: ComposeStack) -> None:
    # compose's one-shot artifacts-dir service hands the bind mount to uid 1000.
    assert gtk_stack.artifacts.stat().st_uid == 1000
    probe = docker(
        "exec", gtk_stack.container(), "sh", "-c", "echo ok > /artifacts/.probe && cat /artifacts/.probe"
    )
    assert probe.stdout.strip() == "ok"
    assert (gtk_stack.artifacts / ".probe").read_text() == "ok\n"


def test_qt_example_in_its_profile(gtk_stack: ComposeStack) -> None:
    gtk_stack.up("example-qt", profile="qt")
    qt_url = f"http://127.0.0.1:{gtk_stack.qt_port}/mcp"
    window = window_titled(qt_url, gtk_stack.token, QT_TITLE)
    greet_round_trip(qt_url, gtk_stack.token, window["pid"], "Grace")
    gtk_stack.compose("--profile", "qt", "rm", "-s", "-f", "example-qt")


def test_restart_comes_back_healthy(gtk_stack: ComposeStack) -> None:
    container = gtk_stack.container()
    assert docker("restart", "-t", "10", container).returncode == 0
    poll(
        "the restarted rig to be healthy",
        lambda: inspect(container)["State"]["Health"]["Status"] == "healthy",
        STACK_TIMEOUT_S,
        DOCKER_POLL_S,
    )
    # A new app process behind the same published port.
    window_titled(gtk_stack.url, gtk_stack.token, GTK_TITLE)
