"""`docker compose up` of compose.yaml: the GTK example rig over MCP/HTTP through the published
port, its hardening and a restart, under X11 and (profile `sway`) under sway; the Qt example in
its profile."""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from tests.container.conftest import (
    ALL_PROFILES,
    COMPOSE_FILE,
    DOCKER_POLL_S,
    SERVICES,
    STACK_TIMEOUT_S,
    ComposeStack,
    call_tool,
    docker,
    inspect,
    run,
)
from tests.polling import poll

pytestmark = pytest.mark.docker

GTK_TITLE = "deskrig GTK example"
QT_TITLE = "deskrig Qt example"
#: The display server each GTK service runs, by service.
DISPLAY_SERVER = {"rig": "Xvfb", "example-sway": "sway"}
CAPABILITY_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
#: Run by the image's python3: each process's name, uids, capability sets and NoNewPrivs, as JSON.
PROCESS_PROBE = f"""
import json, pathlib
processes = []
for proc in pathlib.Path("/proc").glob("[0-9]*"):
    try:
        status = dict(line.split(":", 1) for line in (proc / "status").read_text().splitlines())
    except OSError:
        continue  # it ended while listed
    keys = ("Name", "Uid", "NoNewPrivs", *{CAPABILITY_SETS!r})
    processes.append({{key: status[key].split() for key in keys}})
print(json.dumps(processes))
"""


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
        state = call_tool(
            url,
            token,
            "get_app_state",
            {"pid": pid, "role": "label", "name": "Hello", "include_elements": True},
        )
        assert not state.is_error, state
        return next((e["name"] for e in state.structured_content["elements"]), None)

    assert poll("the greeting to update", greeting, timeout=10, interval=DOCKER_POLL_S) == f"Hello, {name}!"


def compose_services(tmp_path: Path, **settings: str) -> dict[str, Any]:
    """compose.yaml's services (every profile's) as compose resolves them with only ``settings``
    set: no .env, no DESKRIG_ or COMPOSE_ variable of the caller's."""
    (tmp_path / "empty.env").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DESKRIG_", "COMPOSE_"))} | settings
    argv = ["docker", "compose", "-f", str(COMPOSE_FILE), "--env-file", str(tmp_path / "empty.env")]
    result = run([*argv, *ALL_PROFILES, "config", "--format", "json"], env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["services"]  # type: ignore[no-any-return]


def test_defaults_publish_each_service_on_its_loopback_port(tmp_path: Path) -> None:
    """With nothing set: 8765, 8766 and 8767 on 127.0.0.1, X11 unless the service is sway's, and
    the sway service hardened exactly as the X11 one."""
    services = compose_services(tmp_path)
    published = {
        name: [(p["host_ip"], p["published"], p["target"]) for p in services[name]["ports"]]
        for name in SERVICES
    }
    assert published == {
        "rig": [("127.0.0.1", "8765", 8765)],
        "example-qt": [("127.0.0.1", "8766", 8765)],
        "example-sway": [("127.0.0.1", "8767", 8765)],
    }
    backends = {name: services[name]["environment"]["DESKRIG_BACKEND"] for name in SERVICES}
    assert backends == {"rig": "x11", "example-qt": "x11", "example-sway": "sway"}
    hardening = ("user", "read_only", "cap_drop", "security_opt", "tmpfs", "mem_limit", "pids_limit")
    rig, sway = services["rig"], services["example-sway"]
    assert {key: sway.get(key) for key in hardening} == {key: rig.get(key) for key in hardening}
    assert sway["image"] == rig["image"] == "deskrig/example-gtk:latest"


@pytest.mark.parametrize(("settings", "tag"), [({}, "latest"), ({"DESKRIG_TAG": "s31"}, "s31")])
def test_deskrig_tag_names_every_image_and_the_examples_base(
    tmp_path: Path, settings: dict[str, str], tag: str
) -> None:
    """DESKRIG_TAG (which `scripts/build-images --tag` sets) is the tag of every image the stack
    builds or runs, and the examples are built on the rig image of that tag (default: latest)."""
    services = compose_services(tmp_path, **settings)
    images = {name: service["image"] for name, service in services.items()}
    assert images == {
        "rig-image": f"deskrig/rig:{tag}",
        "artifacts-dir": f"deskrig/rig:{tag}",
        "rig": f"deskrig/example-gtk:{tag}",
        "example-qt": f"deskrig/example-qt:{tag}",
        "example-sway": f"deskrig/example-gtk:{tag}",
    }
    bases = {name: services[name]["build"]["args"]["RIG_IMAGE"] for name in SERVICES}
    assert set(bases.values()) == {f"deskrig/rig:{tag}"}


def test_mcp_client_finds_the_app_and_sees_its_pixels(backend_stack: ComposeStack) -> None:
    window = window_titled(backend_stack.url, backend_stack.token, GTK_TITLE)
    bounds = window["bounds"]
    assert window["pid"] > 1 and bounds["width"] >= 300 and bounds["height"] >= 100
    image = screenshot(backend_stack.url, backend_stack.token)
    assert image.size == (1280, 800)
    inside = image.crop(
        (bounds["x"], bounds["y"], bounds["x"] + bounds["width"], bounds["y"] + bounds["height"])
    )
    # The window is the light form (with darker text and widgets); the desktop around it is black.
    assert light_fraction(inside) > 0.7
    assert len(colours(inside)) > 20
    # Below the window, where a layout leaves room (sway tiles it over the whole output), is the
    # bare black desktop.
    frame = window["frame_bounds"]
    top = frame["y"] + frame["height"] + 5
    if top < image.height:
        assert set(colours(image.crop((0, top, image.width, image.height)))) == {(0, 0, 0)}


def test_typed_text_reads_back(backend_stack: ComposeStack) -> None:
    window = window_titled(backend_stack.url, backend_stack.token, GTK_TITLE)
    greet_round_trip(backend_stack.url, backend_stack.token, window["pid"], "Ada 李")


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


def test_container_is_hardened(backend_stack: ComposeStack) -> None:
    container = backend_stack.container()
    assert docker("exec", container, "id", "-u").stdout.strip() == "1000"
    write = docker("exec", container, "touch", "/probe")
    assert write.returncode != 0 and "Read-only file system" in write.stderr
    # Every process in the container, PID 1 and the display server included: uid 1000, no
    # capabilities at all, no way to gain any.
    probe = docker("exec", container, "python3", "-c", PROCESS_PROBE)
    assert probe.returncode == 0, probe.stderr
    # A `docker exec` (the healthcheck's, every 2 s) is runc's init, uid 0, for the instant before
    # it becomes the image's user: the engine's own process, not the rig's (CI caught one once).
    processes = [p for p in json.loads(probe.stdout) if not p["Name"][0].startswith("runc:")]
    names = [process["Name"][0] for process in processes]
    assert DISPLAY_SERVER[backend_stack.service] in names, names
    assert len(processes) >= 5, names  # tini, deskrig, the display server, D-Bus, the app, ...
    for process in processes:
        assert process["Uid"] == ["1000"] * 4, process
        assert process["NoNewPrivs"] == ["1"], process
        assert all(int(process[key][0], 16) == 0 for key in CAPABILITY_SETS), process
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
    gtk_stack.up("example-qt")
    qt_url = gtk_stack.url_of("example-qt")
    window = window_titled(qt_url, gtk_stack.token, QT_TITLE)
    greet_round_trip(qt_url, gtk_stack.token, window["pid"], "Grace")
    gtk_stack.compose("--profile", "qt", "rm", "-s", "-f", "example-qt")


def test_restart_comes_back_healthy(backend_stack: ComposeStack) -> None:
    container = backend_stack.container()
    assert docker("restart", "-t", "10", container).returncode == 0
    poll(
        "the restarted rig to be healthy",
        lambda: inspect(container)["State"]["Health"]["Status"] == "healthy",
        STACK_TIMEOUT_S,
        DOCKER_POLL_S,
    )
    # A new app process behind the same published port.
    window_titled(backend_stack.url, backend_stack.token, GTK_TITLE)
