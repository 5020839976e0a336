"""MCP resources (the screen, the recording state, turn files, subscriptions) over HTTP, and MCP
logging (the rig's warnings as notifications/message) over stdio, with real MCP clients."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPDeprecationWarning, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from PIL import Image
from tests.polling import poll
from tests.server.conftest import GREEN, GreenRig
from tests.server.helpers import close_to, rgb
from tests.server.rigproc import DESKRIG, RigProcess, color_app, connect_stateless

from deskrig.client import rig_http_client


@contextlib.contextmanager
def session_era() -> Iterator[None]:
    """Subscriptions and logging/setLevel: deprecated for the 2026-07-28 protocol, still how a
    session (handshake) client asks for them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


@pytest.fixture(scope="module")
def green(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GreenRig]:
    tmp = tmp_path_factory.mktemp("resources-rig")
    log = tmp / "green.log"
    (tmp / "home" / "deskrig").mkdir(parents=True)
    rig = RigProcess(app=color_app("Fixture Resources", GREEN, log, size="300x200", pos="100,120")).start(tmp)
    rig_of = GreenRig(rig, log, tmp, tmp / "audit.jsonl")
    rig_of.app_geometry()
    yield rig_of
    rig.stop()


def test_resources_list_read_and_subscribe(green: GreenRig) -> None:
    app = green.app_geometry()
    output = green.tmp / "home" / "deskrig" / "turns"
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    async def run() -> dict[str, Any]:
        async with (
            rig_http_client(green.rig.token) as http,
            Client(
                streamable_http_client(green.rig.url, http_client=http),
                mode="legacy",
                message_handler=on_message,
            ) as client,
        ):
            before = {str(r.uri) for r in (await client.list_resources()).resources}
            screen = (await client.read_resource("screen://current")).contents[0]
            with session_era():
                await client.subscribe_resource("recording://state")
            await client.call_tool("start_recording", {"output_dir": str(output)})
            await client.call_tool("move_cursor", {"x": app["x"] + 5, "y": app["y"] + 5})
            with anyio.fail_after(30):  # as a client would: re-read the state on each update
                turns, read = 0, 0
                while turns < 1:
                    await anyio.sleep(0.1)
                    if len(updates) > read:
                        read = len(updates)
                        state = (await client.read_resource("recording://state")).contents[0]
                        turns = json.loads(state.text)["session"]["turns"]
            listed = {str(r.uri): r for r in (await client.list_resources()).resources}
            state = (await client.read_resource("recording://state")).contents[0]
            turn = (await client.read_resource("turn://1")).contents[0]
            after = (await client.read_resource("turn://1/after.png")).contents[0]
            errors = {}
            for uri in ("turn://2", "turn://1/../../etc/passwd", "nothing://here"):
                try:
                    await client.read_resource(uri)
                except MCPError as exc:
                    errors[uri] = exc.error.code
            try:
                with session_era():
                    await client.subscribe_resource("screen://current")
            except MCPError as exc:
                errors["subscribe"] = exc.error.code
            return {
                "before": before,
                "screen": screen,
                "listed": listed,
                "state": state,
                "turn": turn,
                "after": after,
                "errors": errors,
            }

    seen = anyio.run(run)
    assert seen["before"] == {"screen://current", "recording://state"}
    image = Image.open(io.BytesIO(base64.b64decode(seen["screen"].blob)))
    assert image.size == (1280, 800) and seen["screen"].mime_type == "image/png"
    assert close_to(image.convert("RGB").getpixel((app["x"] + 50, app["y"] + 50)), rgb(GREEN))

    assert {"turn://1", "turn://1/after.png", "turn://1/action.json"} <= set(seen["listed"])
    assert seen["listed"]["turn://1/after.png"].mime_type == "image/png"
    state = json.loads(seen["state"].text)
    assert state["session"]["recording"] and state["session"]["turns"] == 1 and state["boot"] is None
    files = {f["path"] for f in json.loads(seen["turn"].text)["files"]}
    assert "turn-00001/after.png" in files
    assert base64.b64decode(seen["after"].blob) == (output / "turn-00001" / "after.png").read_bytes()
    assert seen["errors"] == {
        "turn://2": -32002,
        "turn://1/../../etc/passwd": -32002,
        "nothing://here": -32002,
        "subscribe": types.INVALID_PARAMS,
    }


def test_a_stateless_client_listening_to_the_state_hears_each_turn(green: GreenRig) -> None:
    """The 2026-07-28 protocol: subscriptions/listen naming recording://state gets
    notifications/resources/updated (and the resource list's change) when its own turn lands."""
    app = green.app_geometry()
    output = green.tmp / "home" / "deskrig" / "stateless-turns"
    assert green.rig.token is not None

    async def run() -> tuple[Any, list[Any], dict[str, Any], set[str]]:
        async with connect_stateless(green.rig.url, green.rig.token) as client:
            async with client.listen(
                resource_subscriptions=["recording://state", "screen://current"], resources_list_changed=True
            ) as subscription:
                honored = subscription.honored
                started = await client.call_tool("start_recording", {"output_dir": str(output)})
                assert not started.is_error, started.content
                events: list[Any] = []
                state: dict[str, Any] = {}
                with anyio.fail_after(30):  # as a client would: re-read the state on each update
                    await client.call_tool("move_cursor", {"x": app["x"] + 5, "y": app["y"] + 5})
                    async for event in subscription:
                        events.append(event)
                        read = (await client.read_resource("recording://state")).contents[0]
                        state = json.loads(read.text)
                        if state["session"]["turns"] == 1 and ResourcesListChanged() in events:
                            break
                listed = {str(r.uri) for r in (await client.list_resources()).resources}
            await client.call_tool("stop_recording", {})
        async with (  # the capability a 2026-07-28 client discovers
            rig_http_client(green.rig.token) as http,
            Client(streamable_http_client(green.rig.url, http_client=http)) as discovering,
        ):
            assert discovering.protocol_version == "2026-07-28"
            resources = discovering.server_capabilities.resources
            assert resources is not None and resources.subscribe
        return honored, events, state, listed

    honored, events, state, listed = anyio.run(run)
    assert honored.resource_subscriptions == ["recording://state"] and honored.resources_list_changed
    assert ResourceUpdated("recording://state") in events and ResourcesListChanged() in events
    assert state["session"]["recording"] and "turn://1/after.png" in listed


def _ffmpeg_writing(folder: Path) -> int | None:
    """The pid of the ffmpeg writing a video into ``folder``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"ffmpeg") and any(str(folder).encode() in a for a in argv):
            return int(entry.name)
    return None


def test_rig_warnings_reach_clients_that_set_a_level_over_stdio(tmp_path: Path) -> None:
    """A dead app and a recorder error (ffmpeg killed under a recording) are notifications/message
    on the protocol stream of a client that asked for warnings."""
    output = tmp_path / "deskrig" / "video"
    params = StdioServerParameters(
        command=DESKRIG[0],
        args=["rig", "run", "--stdio", "--", *color_app("Stdio Log", GREEN, tmp_path / "app.log")],
        env={**os.environ, "HOME": str(tmp_path)},
    )
    messages: list[types.LoggingMessageNotificationParams] = []
    output_seen: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        messages.append(params)

    async def run() -> None:
        async with Client(params, mode="legacy", logging_callback=on_log) as client:
            with session_era():
                await client.set_logging_level("warning")
            crash = ["sh", "-c", "echo boom >&2; exit 3"]
            await client.call_tool("launch_app", {"command": crash, "wait_for_window": False})
            with anyio.fail_after(30):
                while not messages:
                    await anyio.sleep(0.1)
            output_log = Path(messages[0].data["message"].rpartition("its output: ")[2])
            output_seen.append(output_log.read_text().strip())  # the rig removes it when it stops
            started = await client.call_tool(
                "start_recording", {"output_dir": str(output), "record_video": True}
            )
            assert not started.is_error, started.content
            pid = await anyio.to_thread.run_sync(lambda: poll("ffmpeg", lambda: _ffmpeg_writing(output)))
            os.kill(pid, signal.SIGKILL)
            with anyio.fail_after(30):
                while len(messages) < 2:
                    await anyio.sleep(0.1)

    anyio.run(run)
    dead_app, recorder = messages
    assert dead_app.level == "warning" and dead_app.logger == "deskrig.rig.supervisor"
    assert "exited with status 3" in dead_app.data["message"]
    assert output_seen == ["boom"]
    assert recorder.level == "warning" and recorder.logger == "deskrig.recording.video"
    assert "ffmpeg stopped unexpectedly" in recorder.data["message"]
