"""The accessibility tools on macOS (AX) and Windows (UI Automation), on any OS: the real MCP server
and an in-memory client over the scripted desktop, with each platform's accessibility source
(``NativeTreeSource`` with its mapping, ``MacAX`` / ``WindowsUIA``) reading trees recorded from the
Tk form on a real host (tests/native/data) through the scripted reader that ships with the
interface. The same tests, parametrized by platform: get_app_state, click by element, set_value
(text and number), wait_for an element, the recorder's state, and the errors."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from PIL import Image

from deskrig.a11y import macos_ax, windows_uia
from deskrig.a11y.access import A11yAccess
from deskrig.a11y.macos_ax import MacAX
from deskrig.a11y.scripted import ScriptedReader
from deskrig.a11y.source import NativePlatform
from deskrig.a11y.windows_uia import WindowsUIA, app_root
from deskrig.config import SecurityPolicy, Settings
from deskrig.desktop.macos_windows import AX_ERROR_API_DISABLED, ax_failure
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.errors import tool_error
from deskrig.model import Bounds
from deskrig.server import DeskrigServer
from deskrig.serving import build_server

from .recorded import load
from .windows_data import load as load_windows

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Recorded:
    """One platform's recorded tree of the Tk form, and what the tests look for in it."""

    platform: NativePlatform
    prefix: str
    pid: int
    tree: dict[str, Any]
    window: tuple[str, Bounds]
    #: (role, name) of a button, of an editable text, and a slider's name.
    button: tuple[str, str]
    text: tuple[str, str]
    slider: str
    #: The native operations set_value uses on the text and on the slider.
    text_write: str
    range_write: str
    #: A new node as the platform's reader describes it: (kind "label" or "button", name, bounds).
    node: Callable[[str, str, Bounds], dict[str, Any]]


def ax_node(kind: str, name: str, at: Bounds) -> dict[str, Any]:
    named = {"value": name} if kind == "label" else {"title": name}
    return {
        "role": "AXStaticText" if kind == "label" else "AXButton",
        **named,
        "position": {"x": at.x, "y": at.y},
        "size": {"width": at.width, "height": at.height},
    }


def uia_node(kind: str, name: str, at: Bounds) -> dict[str, Any]:
    return {
        "ControlType": 50020 if kind == "label" else 50000,
        "Name": name,
        "BoundingRectangle": [at.x, at.y, at.width, at.height],
        "RuntimeId": [42, at.x, at.y],
    }


def recorded(name: str) -> Recorded:
    if name == "macos":
        ax = load("ax_tree_form.json")
        return Recorded(
            MacAX(),
            "ax",
            ax["pid"],
            ax["tree"],
            ("Form", Bounds(x=200, y=120, width=420, height=318)),
            ("push button", "Submit"),
            ("text", "Name"),
            "Volume",
            "AXValue",
            "AXValue",
            ax_node,
        )
    uia = load_windows("uia_tk_form")
    return Recorded(
        WindowsUIA(),
        "uia",
        uia["pid"],
        app_root("python.exe", [uia["root"]]),
        ("deskrig form", Bounds(x=289, y=200, width=502, height=506)),
        ("push button", "Click me"),
        ("text", "Entry"),
        "Volume",
        "Value",
        "RangeValue",
        uia_node,
    )


@dataclass
class NativeTools:
    client: Client
    server: DeskrigServer
    world: ScriptedDesktop
    reader: ScriptedReader
    app: Recorded

    async def ok(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        assert not result.is_error, (tool, tool_error(result))
        return result.structured_content  # type: ignore[no-any-return]

    async def error(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        error = tool_error(await self.client.call_tool(tool, arguments))
        assert error is not None, f"{tool} succeeded"
        return error

    def element(self, role_name: tuple[str, str]) -> dict[str, Any]:
        return {"role": role_name[0], "name": role_name[1], "pid": self.app.pid}


@contextlib.asynccontextmanager
async def serve(platform: str, tmp_path: Path) -> AsyncIterator[NativeTools]:
    """The server over a scripted desktop showing the form's window, with ``platform``'s source."""
    app = recorded(platform)
    world = ScriptedDesktop((("screen", Bounds(x=0, y=0, width=1512, height=982)),))
    title, bounds = app.window
    world.add_window(title, bounds, (240, 240, 240), app="python", pid=app.pid)
    reader = ScriptedReader(app.prefix, {app.pid: app.tree})
    access = A11yAccess.native(app.platform, lambda: reader)
    settings = Settings(security=SecurityPolicy(allowed_directories=[str(tmp_path)]))
    server = build_server(world.open(), settings, a11y=access)
    try:
        async with Client(server.mcp, mode="legacy") as client:
            yield NativeTools(client, server, world, reader, app)
    finally:
        if server.services.recorder is not None:
            server.services.recorder.close()
        server.services.desktop.close()
        server.services.security.close()


@pytest.fixture(params=["macos", "windows"])
async def native(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[NativeTools]:
    async with serve(request.param, tmp_path) as tools:
        yield tools


def _by_name(state: dict[str, Any], role: str, name: str) -> dict[str, Any]:
    (found,) = [e for e in state["elements"] if e["role"] == role and e["name"] == name]
    return found


async def test_get_app_state_reads_the_platform_tree_as_on_linux(native: NativeTools) -> None:
    by_pid = await native.ok("get_app_state", {"pid": native.app.pid, "include_elements": True})
    window_id = native.world.windows()[0].id
    by_window = await native.ok("get_app_state", {"window_id": window_id, "include_elements": True})

    assert by_pid["source"] == "fetch" and not by_pid["truncated"]
    root, frame = by_pid["elements"][:2]
    assert root["role"] == "application" and root["parent"] is None
    assert (frame["role"], frame["parent"], frame["depth"]) == ("frame", 0, 1)
    assert [e["role"] for e in by_window["elements"]] == [e["role"] for e in by_pid["elements"]]
    assert by_window["snapshot_id"] != by_pid["snapshot_id"]
    button = _by_name(by_pid, *native.app.button)
    assert "click" in button["actions"] and button["bounds"] is not None
    assert f'{native.app.button[0]} "{native.app.button[1]}"' in by_pid["text"]
    matching = await native.ok(
        "get_app_state", {"pid": native.app.pid, "name": native.app.slider, "include_elements": True}
    )
    assert [e["name"] for e in matching["elements"]] == [native.app.slider]


async def test_a_click_on_an_element_lands_on_its_centre(native: NativeTools) -> None:
    state = await native.ok("get_app_state", {"pid": native.app.pid, "include_elements": True})
    button = _by_name(state, *native.app.button)
    box = button["bounds"]
    centre = (box["x"] + box["width"] // 2, box["y"] + box["height"] // 2)

    by_query = await native.ok("click", {"element": native.element(native.app.button)})
    by_index = await native.ok(
        "click", {"element": {"snapshot_id": state["snapshot_id"], "index": button["index"]}}
    )

    clicks = [(e.x, e.y) for e in native.world.events if e.kind == "button"]
    assert clicks == [centre, centre]
    for result in (by_query, by_index):
        assert result["target"]["element"]["name"] == native.app.button[1]


async def test_set_value_writes_text_through_the_platform_and_reads_it_back(native: NativeTools) -> None:
    result = await native.ok("set_value", {"element": native.element(native.app.text), "value": "Grace"})

    assert result["effect"] == "confirmed"
    ((_, _, operation, value),) = native.reader.performed
    assert (operation, value) == (native.app.text_write, "Grace")
    state = await native.ok("get_app_state", {"pid": native.app.pid, "include_elements": True})
    assert _by_name(state, *native.app.text)["text"] == "Grace"


#: How each platform's reader marks the element with the keyboard focus, and finds it by address.
FOCUSED = {"ax": {"focused": True}, "uia": {"HasKeyboardFocus": True}}
NODE_AT = {"ax": macos_ax.node_at, "uia": windows_uia.node_at}


async def test_typed_text_is_read_back_through_the_platforms_own_accessibility(native: NativeTools) -> None:
    text = native.element(native.app.text)
    await native.ok("set_value", {"element": text, "value": "Grace"})  # what the app shows once typed
    ((pid, address, _, _),) = native.reader.performed
    with native.reader.editing(pid) as tree:
        NODE_AT[native.app.prefix](tree, address).update(FOCUSED[native.app.prefix])

    typed = await native.ok("type_text", {"element": text, "text": "Grace"})

    assert typed["effect"] == "confirmed"
    api = {"ax": "the AX API", "uia": "UI Automation"}[native.app.prefix]
    assert (
        typed["evidence"][-1]
        == f"the focused element's text contains the typed text (read back through {api})"
    )


async def test_set_value_sets_a_slider_within_its_range(native: NativeTools) -> None:
    slider = {"role": "slider", "name": native.app.slider, "pid": native.app.pid}
    result = await native.ok("set_value", {"element": slider, "value": 42})

    assert result["effect"] == "confirmed"
    ((_, _, operation, value),) = native.reader.performed
    assert (operation, value) == (native.app.range_write, 42.0)

    refused = await native.error("set_value", {"element": slider, "value": 1000})
    assert refused["code"] == "INVALID_ARGUMENT" and len(native.reader.performed) == 1


async def test_a_value_is_refused_where_none_can_be_set(native: NativeTools) -> None:
    refused = await native.error("set_value", {"element": native.element(native.app.button), "value": "x"})
    assert refused["code"] == "INVALID_ARGUMENT" and native.reader.performed == []


async def test_wait_for_sees_an_element_appear(native: NativeTools) -> None:
    def add_done_label() -> None:
        with native.reader.editing(native.app.pid) as tree:
            done = native.app.node("label", "Done", Bounds(x=300, y=650, width=40, height=16))
            tree["children"][0]["children"].append(done)

    asyncio.get_running_loop().call_later(0.3, add_done_label)
    found = await native.ok(
        "wait_for", {"role": "label", "name": "Done", "pid": native.app.pid, "timeout_ms": 20000}
    )
    assert found["element"]["name"] == "Done"
    anywhere = await native.ok("wait_for", {"role": "label", "name": "Done", "timeout_ms": 20000})
    assert anywhere["element"] == found["element"] | {"snapshot_id": anywhere["element"]["snapshot_id"]}

    missing = await native.error("wait_for", {"name": "Nowhere", "pid": native.app.pid, "timeout_ms": 300})
    assert missing["code"] == "TIMEOUT"


def _drop_slider(tree: dict[str, Any], name: str, before: int) -> None:
    """Remove the slider called ``name`` (``before=0``) or the sibling ``before`` places before it."""
    for node in tree.get("children", []):
        named = [c.get("description") or c.get("Name") for c in node.get("children", [])]
        if name in named:
            del node["children"][named.index(name) - before]
            return
        _drop_slider(node, name, before)


async def test_an_element_gone_since_its_snapshot_is_element_not_found(native: NativeTools) -> None:
    state = await native.ok("get_app_state", {"pid": native.app.pid, "include_elements": True})
    slider = _by_name(state, "slider", native.app.slider)
    with native.reader.editing(native.app.pid) as tree:
        _drop_slider(tree, native.app.slider, before=0)

    target = {"snapshot_id": state["snapshot_id"], "index": slider["index"]}
    gone = await native.error("set_value", {"element": target, "value": 5})
    assert gone["code"] == "ELEMENT_NOT_FOUND" and native.reader.performed == []


async def test_an_element_is_found_again_after_an_earlier_sibling_went(native: NativeTools) -> None:
    """An AX reference is the element's child position: once a sibling before it goes, that
    position is another element's, and the element is found again by its path."""
    state = await native.ok("get_app_state", {"pid": native.app.pid, "include_elements": True})
    slider = _by_name(state, "slider", native.app.slider)
    with native.reader.editing(native.app.pid) as tree:
        _drop_slider(tree, native.app.slider, before=1)

    target = {"snapshot_id": state["snapshot_id"], "index": slider["index"]}
    result = await native.ok("set_value", {"element": target, "value": 7})

    assert result["effect"] == "confirmed"
    after = await native.ok("get_app_state", {"pid": native.app.pid, "include_elements": True})
    assert _by_name(after, "slider", native.app.slider)["value"]["current"] == 7.0


def _insert_before(tree: dict[str, Any], name: str, node: dict[str, Any]) -> None:
    """Put ``node`` just before the element called ``name``."""
    for parent in [tree, *tree.get("children", [])]:
        names = [c.get("title") or c.get("Name") for c in parent.get("children", [])]
        if name in names:
            parent["children"].insert(names.index(name), node)
            return
        if parent is not tree:
            _insert_before(parent, name, node)


async def test_a_click_by_index_reaches_its_element_after_a_same_role_sibling_came_before_it(
    native: NativeTools,
) -> None:
    """The button's old AX position is now the new button's (same role): only its path tells them apart."""
    state = await native.ok("get_app_state", {"pid": native.app.pid, "include_elements": True})
    button = _by_name(state, *native.app.button)
    box = button["bounds"]
    reset = native.app.node("button", "Reset", Bounds(x=5, y=5, width=30, height=20))
    with native.reader.editing(native.app.pid) as tree:
        _insert_before(tree, native.app.button[1], reset)

    await native.ok("click", {"element": {"snapshot_id": state["snapshot_id"], "index": button["index"]}})

    clicks = [(e.x, e.y) for e in native.world.events if e.kind == "button"]
    assert clicks == [(box["x"] + box["width"] // 2, box["y"] + box["height"] // 2)]


async def test_the_recorder_keeps_the_platform_tree_of_each_turn(native: NativeTools, tmp_path: Path) -> None:
    """It reads the tools' source and stores none of its trees, so never evicts an agent's snapshot."""
    output = tmp_path / "recording"
    await native.ok("start_recording", {"output_dir": str(output)})
    snapshots = native.server.services.a11y.snapshots if native.server.services.a11y else None
    stored = len(snapshots) if snapshots is not None else 0
    await native.ok("click", {"element": native.element(native.app.button)})
    await native.ok("stop_recording", {})
    assert snapshots is not None and len(snapshots) == stored + 1  # the click's lookup, not the turn's

    after = json.loads((output / "turn-00001" / "after_state.json").read_text())
    assert after["pid"] == native.app.pid
    assert any(e["name"] == native.app.button[1] for e in after["elements"])


async def test_pii_in_the_platform_tree_is_masked(native: NativeTools) -> None:
    await native.ok("set_value", {"element": native.element(native.app.text), "value": "ada@example.org"})
    state = await native.ok(
        "get_app_state", {"pid": native.app.pid, "mask_pii": True, "include_elements": True}
    )

    assert "ada@example.org" not in json.dumps(state)
    assert state["pii_masking"] is not None


async def test_the_pii_tree_detector_masks_a_field_from_the_platform_tree(native: NativeTools) -> None:
    """A screenshot under masking blacks out the field the platform's tree says holds an address
    (the whole field: AX and UIA text ranges are not read)."""
    await native.ok("set_value", {"element": native.element(native.app.text), "value": "ada@example.org"})
    state = await native.ok("get_app_state", {"pid": native.app.pid, "include_elements": True})
    field = _by_name(state, *native.app.text)["bounds"]

    shot = await native.client.call_tool(
        "screenshot_window", {"window_id": native.world.windows()[0].id, "mask_pii": True}
    )

    assert not shot.is_error, tool_error(shot)
    report = shot.structured_content["pii_masking"]
    assert report["engines"].get("tree", 0) >= 1 and report["counts"] == {"email": 1}
    image = Image.open(io.BytesIO(base64.b64decode(shot.content[0].data))).convert("RGB")
    window = native.app.window[1]
    centre = (field["x"] - window.x + field["width"] // 2, field["y"] - window.y + field["height"] // 2)
    assert image.getpixel(centre) == (0, 0, 0)
    assert image.getpixel((2, window.height - 3)) == (240, 240, 240)


async def test_without_accessibility_permission_the_tools_say_where_to_grant_it(tmp_path: Path) -> None:
    async with serve("macos", tmp_path) as mac:
        mac.reader.failure = ax_failure(AX_ERROR_API_DISABLED, "read the accessibility tree", "Terminal")

        for tool, arguments in (
            ("get_app_state", {"pid": mac.app.pid}),
            ("set_value", {"element": mac.element(mac.app.text), "value": "x"}),
        ):
            error = await mac.error(tool, arguments)
            assert error["code"] == "PERMISSION_DENIED", error
            assert "System Settings > Privacy & Security > Accessibility" in error["remediation"]
        waited = await mac.error("wait_for", {"name": "Name", "pid": mac.app.pid, "timeout_ms": 300})
        assert waited["code"] == "TIMEOUT" and "PERMISSION_DENIED" in json.dumps(waited)
