"""Accessibility element bounds are screen coordinates on every backend.

GTK under Wayland reports AT-SPI extents relative to its window; the desktop's ``a11y_origins``
says where each window's coordinates start and the accessibility client shifts them. Its popup
menus are placed by the rules in :mod:`deskrig.a11y.placement`. Checked through the real tools
(an MCP server built as a rig builds it, over the session's desktop and accessibility bus)
against the GTK form's own report of its layout, its log of clicks and menu items, and the
pixels (a menu item's bounds show its text on the menu's background); the matching of elements
to windows on the scripted desktop at the end.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from tests.polling import poll
from tests.toolkits import MENU_CLICK_AFTER_S

from deskrig.a11y import Element, ElementRef, PathStep
from deskrig.a11y.placement import open_submenus, placed, pointer_popups, toplevel_origins, toplevels
from deskrig.config import SecurityPolicy, Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.errors import tool_error
from deskrig.model import Bounds, DisplayInfo, Point
from deskrig.serving import build_server

from .forms import Forms


@asynccontextmanager
async def tools(forms: Forms, tmp_path: Path) -> AsyncIterator[Client]:
    """An MCP client of a server over the forms' desktop and accessibility bus."""
    settings = Settings(security=SecurityPolicy(allowed_directories=[str(tmp_path)]))
    server = build_server(forms.desktop, settings, session_bus=forms.session_bus)
    try:
        async with Client(server.mcp, mode="legacy") as client:
            yield client
    finally:
        if server.services.recorder is not None:
            server.services.recorder.close()
        server.services.security.close()


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, tool_error(result))
    return result.structured_content  # type: ignore[no-any-return]


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    error = tool_error(result)
    assert error is not None, (tool, result.structured_content)
    return error


def element(state: dict[str, Any], role: str, name: str) -> dict[str, Any]:
    (found,) = [e for e in state["elements"] if e["role"] == role and e["name"] == name]
    return found


def test_a11y_origins_are_where_each_toolkit_counts_from(backend: Forms) -> None:
    gtk = backend.window(backend.gtk)
    # Native Wayland GTK counts from its content area; X clients (Xvfb, Xwayland) from the screen's.
    expected = [(gtk.id, Point(x=gtk.bounds.x, y=gtk.bounds.y))] if backend.gtk.window_relative else []
    assert [(w.id, origin) for w, origin in backend.desktop.a11y_origins(backend.gtk.pid)] == expected
    assert backend.desktop.a11y_origins(backend.tk.pid) == []


def test_element_bounds_are_where_the_widgets_are_on_screen(backend: Forms, tmp_path: Path) -> None:
    async def run() -> dict[str, Any]:
        async with tools(backend, tmp_path) as client:
            return await ok(client, "get_app_state", {"pid": backend.gtk.pid, "include_elements": True})

    state = anyio.run(run)

    for role, name, widget in (("push button", "Click me", "button"), ("text", "Name", "entry")):
        bounds = Bounds.model_validate(element(state, role, name)["bounds"])
        assert bounds == backend.widget(backend.gtk, widget), (role, name)


def test_a_click_on_an_element_lands_on_it(backend: Forms, tmp_path: Path) -> None:
    before = (backend.gtk.events("button") or [{"count": 0}])[-1]["count"]

    async def run() -> dict[str, Any]:
        async with tools(backend, tmp_path) as client:
            state = await ok(
                client,
                "get_app_state",
                {"pid": backend.gtk.pid, "role": "push button", "include_elements": True},
            )
            button = element(state, "push button", "Click me")
            target = {"snapshot_id": state["snapshot_id"], "index": button["index"]}
            return await ok(client, "click", {"element": target})

    result = anyio.run(run)

    backend.gtk.wait("button", lambda e: e["count"] == before + 1, "the element click to press the button")
    x, y = backend.center(backend.gtk, "button")
    assert (result["target"]["point"]["x"], result["target"]["point"]["y"]) == (x, y)


@dataclass(frozen=True)
class Popup:
    """A menu of the GTK form, how it opens and the item a test picks in it, and what the form
    logs when that item activates."""

    opener: str
    button: str
    item: str
    event: str
    logged: dict[str, str]
    #: Where on the opener to press, from its top-left (None: its centre).
    at: tuple[int, int] | None = None
    #: A key pressed once the menu is up (one that moves its highlight, never the menu).
    key: str | None = None

    @property
    def id(self) -> str:
        return "+".join([self.opener, *([self.key] if self.key else [])])

    def press_point(self, forms: Forms) -> tuple[int, int]:
        if self.at is None:
            return forms.center(forms.gtk, self.opener)
        widget = forms.widget(forms.gtk, self.opener)
        return widget.x + self.at[0], widget.y + self.at[1]


#: One menu opened each way GTK 3 anchors one: to a menu bar item, to a menu button, over a
#: combo box, and (a context menu) at the pointer inside an entry's text area.
POPUPS = [
    Popup("file_menu", "left", "Save", "menu_item", {"menu": "file", "item": "Save"}),
    Popup("menubutton", "left", "Beta", "menu_item", {"menu": "actions", "item": "Beta"}),
    Popup("combo", "left", "Large", "combo", {"active": "Large"}),
    Popup("entry", "right", "Stamp", "menu_item", {"menu": "context", "item": "Stamp"}, at=(40, 10)),
    # The context menu stays placed from the press after a key its opener did not send.
    Popup("entry", "right", "Stamp", "menu_item", {"menu": "context", "item": "Stamp"}, (40, 10), "Down"),
]


def shows_a_menu_item(forms: Forms, bounds: Bounds) -> bool:
    """Whether ``bounds`` show a menu item: text (dark pixels) on the menu's light background."""
    rgb = forms.desktop.capture(bounds).convert("L").tobytes()
    dark = sum(1 for v in rgb if v < 100) / len(rgb)
    light = sum(1 for v in rgb if v > 200) / len(rgb)
    return 0.01 < dark < 0.4 and light > 0.5


async def open_popup(forms: Forms, client: Client, popup: Popup) -> dict[str, Any]:
    """Open ``popup`` by its pointer press (then press its key); its item's element once listed,
    with its snapshot id and when (monotonic seconds) the menu was opened."""
    x, y = popup.press_point(forms)
    await ok(client, "right_click" if popup.button == "right" else "click", {"x": x, "y": y})
    opened_at = time.monotonic()
    query = {"role": "menu item", "name": popup.item, "pid": forms.gtk.pid}
    await ok(client, "wait_for", {**query, "timeout_ms": 5000})
    if popup.key is not None:
        await ok(client, "press_key", {"key": popup.key})
    state = await ok(
        client,
        "get_app_state",
        {"pid": forms.gtk.pid, "role": "menu item", "name": popup.item, "include_elements": True},
    )
    (item,) = [e for e in state["elements"] if e["name"] == popup.item]
    return {"snapshot_id": state["snapshot_id"], "opened_at": opened_at, **item}


@pytest.mark.parametrize("popup", POPUPS, ids=[p.id for p in POPUPS])
def test_popup_menu_items_are_where_they_are_drawn_and_clicks_land(
    backend: Forms, tmp_path: Path, popup: Popup
) -> None:
    before = len(backend.gtk.events(popup.event))

    async def run() -> dict[str, Any]:
        async with tools(backend, tmp_path) as client:
            try:
                item = await open_popup(backend, client, popup)
                bounds = Bounds.model_validate(item["bounds"])
                await anyio.to_thread.run_sync(
                    lambda: poll(
                        f"{popup.item!r} drawn at {bounds}", lambda: shows_a_menu_item(backend, bounds)
                    )
                )
                target = {"snapshot_id": item["snapshot_id"], "index": item["index"]}
                await anyio.sleep(max(0.0, item["opened_at"] + MENU_CLICK_AFTER_S - time.monotonic()))
                await ok(client, "click", {"element": target})
                return item
            except BaseException:
                await client.call_tool("press_key", {"key": "Escape"})
                raise

    anyio.run(run)

    event = backend.gtk.wait(popup.event, lambda e: len(backend.gtk.events(popup.event)) > before)
    assert {k: event[k] for k in popup.logged} == popup.logged


def test_a_context_menu_the_compositor_flipped_has_unknown_bounds_on_wayland(
    backend: Forms, tmp_path: Path
) -> None:
    """Pressed near the entry's right end the context menu does not fit right of the pointer on
    sway's screen and is flipped, where GTK under Wayland does not say: no bounds rather than
    wrong ones. An X11 toolkit knows where its menu went: there it is placed and clicked."""
    entry = backend.widget(backend.gtk, "entry")
    popup = Popup(
        "entry",
        "right",
        "Stamp",
        "menu_item",
        {"menu": "context", "item": "Stamp"},
        at=(entry.width - 100, 10),
    )
    before = len(backend.gtk.events("menu_item"))

    async def run() -> dict[str, Any]:
        async with tools(backend, tmp_path) as client:
            try:
                item = await open_popup(backend, client, popup)
                target = {"element": {"snapshot_id": item["snapshot_id"], "index": item["index"]}}
                if backend.gtk.window_relative:
                    error = await refused(client, "click", target)
                    assert (error["code"], error["details"]["reason"]) == (
                        "ELEMENT_NOT_FOUND",
                        "bounds_unknown",
                    )
                else:
                    await anyio.sleep(max(0.0, item["opened_at"] + MENU_CLICK_AFTER_S - time.monotonic()))
                    await ok(client, "click", target)
                return item
            finally:
                if backend.gtk.window_relative:
                    await ok(client, "press_key", {"key": "Escape"})

    item = anyio.run(run)

    if backend.gtk.window_relative:
        assert item.get("bounds_unknown") is True and "bounds" not in item
    else:
        backend.gtk.wait("menu_item", lambda e: len(backend.gtk.events("menu_item")) > before)


async def listed_menu_item(
    forms: Forms, client: Client, name: str, role: str = "menu item"
) -> dict[str, Any]:
    """The context menu's item ``name`` once listed, with its snapshot id (an item that opens a
    submenu has the role "menu" in GTK 3)."""
    query = {"role": role, "name": name, "pid": forms.gtk.pid}
    await ok(client, "wait_for", {**query, "timeout_ms": 5000})
    state = await ok(
        client, "get_app_state", {"pid": forms.gtk.pid, "role": role, "name": name, "include_elements": True}
    )
    (item,) = [e for e in state["elements"] if e["name"] == name]
    return {"snapshot_id": state["snapshot_id"], **item}


async def after_the_menu_guard(opened_at: float) -> None:
    await anyio.sleep(max(0.0, opened_at + MENU_CLICK_AFTER_S - time.monotonic()))


@pytest.mark.parametrize("opening", ["keyboard", "submenu"])
def test_a_context_menu_the_last_press_did_not_open_is_placed_right_or_not_at_all(
    backend: Forms, tmp_path: Path, opening: str
) -> None:
    """The last press deskrig made did not open the menu: it was a click elsewhere before the
    keyboard opened the context menu (Shift+F10), or the click on "More" that opened the
    submenu. Its items have unknown bounds, or bounds where a click activates them."""
    entry = backend.widget(backend.gtk, "entry")
    wanted = "Stamp" if opening == "keyboard" else "Deep"
    before = len(backend.gtk.events("menu_item"))

    async def run() -> dict[str, Any]:
        async with tools(backend, tmp_path) as client:
            try:
                if opening == "keyboard":
                    # A press where a context menu fits; the keyboard opens one at the entry's corner.
                    await ok(client, "click", {"x": entry.x + 40, "y": entry.y + 10})
                    await ok(client, "press_key", {"key": "shift+F10"})
                else:
                    await ok(client, "right_click", {"x": entry.x + 40, "y": entry.y + 10})
                    opened_at = time.monotonic()
                    more = await listed_menu_item(backend, client, "More", role="menu")
                    await after_the_menu_guard(opened_at)
                    await ok(
                        client,
                        "click",
                        {"element": {"snapshot_id": more["snapshot_id"], "index": more["index"]}},
                    )
                opened_at = time.monotonic()
                item = await listed_menu_item(backend, client, wanted)
                if not item.get("bounds_unknown"):
                    await after_the_menu_guard(opened_at)
                    await ok(
                        client,
                        "click",
                        {"element": {"snapshot_id": item["snapshot_id"], "index": item["index"]}},
                    )
                return item
            finally:
                for _ in range(2):  # the submenu, then the menu (none left: Escape in the entry is harmless)
                    await ok(client, "press_key", {"key": "Escape"})

    item = anyio.run(run)

    if item.get("bounds_unknown"):
        assert "bounds" not in item or item["bounds"] is None
    else:
        event = backend.gtk.wait(
            "menu_item", lambda e: len(backend.gtk.events("menu_item")) > before, f"{wanted!r} activated"
        )
        assert event == {"event": "menu_item", "menu": "context", "item": wanted}


def scripted_element(index: int, toplevel: str, bounds: Bounds | None, nth: int = 0) -> Element:
    path = [PathStep("frame", toplevel, nth), PathStep("push button", f"b{index}", 0)]
    return Element(
        index=index,
        parent=0,
        depth=2,
        role="push button",
        name=f"b{index}",
        states=[],
        bounds=bounds,
        ref=ElementRef(":1.5", f"/org/a11y/atspi/accessible/{index}"),
        path=path,
    )


def test_elements_move_with_the_window_of_their_top_level_on_the_scripted_desktop() -> None:
    world = ScriptedDesktop()
    size = {"width": 200, "height": 100}
    world.add_window("Main", Bounds(x=100, y=50, **size), pid=7, a11y_window_relative=True)
    world.add_window("Dialog", Bounds(x=300, y=400, **size), pid=7, a11y_window_relative=True)
    world.add_window("Twin", Bounds(x=500, y=10, **size), pid=7, a11y_window_relative=True)
    world.add_window("Twin", Bounds(x=500, y=600, **size), pid=7, a11y_window_relative=True)
    world.add_window("Main", Bounds(x=700, y=700, **size), pid=8, a11y_window_relative=True)
    world.add_window("Plain", Bounds(x=900, y=100, **size), pid=7)  # reports screen coordinates
    desktop = world.open()
    inside = Bounds(x=10, y=20, width=30, height=40)
    elements = [
        scripted_element(1, "Main", inside),
        scripted_element(2, "Dialog", inside),
        # Two windows with that title: the toolkit's first top-level of it is the older window.
        scripted_element(3, "Twin", inside, nth=1),
        scripted_element(4, "Twin", inside),
        scripted_element(5, "Main", None),  # not showing
        scripted_element(6, "Plain", inside),
    ]

    origins = toplevel_origins(desktop.a11y_origins(7), toplevels(elements))
    moved = placed(elements, origins)

    assert {step.name: origin for step, origin in origins.shifted.items() if step.name != "Twin"} == {
        "Main": Point(x=100, y=50),
        "Dialog": Point(x=300, y=400),
    }
    assert [e.bounds for e in moved] == [
        Bounds(x=110, y=70, width=30, height=40),
        Bounds(x=310, y=420, width=30, height=40),
        Bounds(x=510, y=620, width=30, height=40),
        Bounds(x=510, y=30, width=30, height=40),
        None,
        inside,
    ]
    assert elements[0].bounds == inside  # the snapshot's own elements are left alone


CONTEXT_MENU = [PathStep("window", "", 0), PathStep("menu", "", 0)]
#: As GTK under Wayland reports the entry's context menu pressed at (1011, 55) in a window at
#: (640, 0): relative to the entry's text area, at (122, 38) in the window.
REPORTED_POPUP = Bounds(x=249, y=17, width=161, height=177)
REPORTED_ITEM = Bounds(x=255, y=131, width=149, height=26)


def context_menu_item(index: int) -> Element:
    return scripted_element(index, "", REPORTED_ITEM).model_copy(
        update={"role": "menu item", "path": [*CONTEXT_MENU, PathStep("menu item", f"b{index}", 0)]}
    )


def context_submenu_item(index: int) -> Element:
    """An item of a submenu of the context menu, listed under its item "More" (showing: it has bounds)."""
    item = context_menu_item(index)
    return item.model_copy(update={"path": [*CONTEXT_MENU, PathStep("menu", "More", 0), item.path[-1]]})


@pytest.mark.parametrize(
    ("press", "reported", "placed_at"),
    [
        (Point(x=1011, y=55), REPORTED_POPUP, Point(x=1017, y=169)),
        # Not right of the press: 1200 + 161 > 1280, so sway flipped it where GTK does not say.
        (Point(x=1200, y=55), REPORTED_POPUP, None),
        # Not below it either.
        (Point(x=1011, y=700), REPORTED_POPUP, None),
        # A press that cannot have opened it: the anchor would lie left of the window.
        (Point(x=700, y=55), REPORTED_POPUP, None),
        (None, REPORTED_POPUP, None),
        (Point(x=1011, y=55), None, None),  # the toolkit reports no extents for the popup
    ],
)
@pytest.mark.parametrize("submenu_open", [False, True], ids=["", "submenu_open"])
def test_a_context_menu_is_placed_at_the_press_or_has_unknown_bounds(
    press: Point | None, reported: Bounds | None, placed_at: Point | None, submenu_open: bool
) -> None:
    """With a submenu open the last press may be the click on its item: never placed from it."""
    world = ScriptedDesktop()
    world.add_window("Form", Bounds(x=640, y=0, width=640, height=800), pid=7, a11y_window_relative=True)
    desktop = world.open()
    displays = [
        DisplayInfo(id=1, name="HEADLESS-1", bounds=Bounds(x=0, y=0, width=1280, height=800), primary=True)
    ]
    # The combo box's menu is listed under the combo box in the frame: the frame's window places it.
    combo_item = scripted_element(1, "Form", REPORTED_ITEM)
    elements = [combo_item, context_menu_item(2), *([context_submenu_item(3)] if submenu_open else [])]
    assert pointer_popups(elements) == {CONTEXT_MENU[0]}
    assert open_submenus(elements) == ({CONTEXT_MENU[0]} if submenu_open else set())

    origins = toplevel_origins(
        desktop.a11y_origins(7),
        toplevels(elements),
        {CONTEXT_MENU[0]: reported},
        press,
        displays,
        open_submenus(elements),
    )
    combo, item, *_ = placed(elements, origins)

    assert combo.bounds == REPORTED_ITEM.model_copy(update={"x": 895, "y": 131})
    if placed_at is None or submenu_open:
        assert item.bounds is None and item.bounds_unknown
    else:
        assert item.bounds == REPORTED_ITEM.model_copy(update={"x": placed_at.x, "y": placed_at.y})
