"""Accessibility element bounds are screen coordinates on every backend.

GTK under Wayland reports AT-SPI extents relative to its window; the desktop's ``a11y_origins``
says where each window's coordinates start and the accessibility client shifts them. Checked
through the real tools (an MCP server built as a rig builds it, over the session's desktop and
accessibility bus) against the GTK form's own report of its layout and its log of clicks; the
matching of elements to windows on the scripted desktop at the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from deskrig.a11y import Element, ElementRef, PathStep
from deskrig.a11y.placement import placed, toplevel_origins, toplevels
from deskrig.config import SecurityPolicy, Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.errors import tool_error
from deskrig.model import Bounds, Point
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
            return await ok(client, "get_app_state", {"pid": backend.gtk.pid})

    state = anyio.run(run)

    for role, name, widget in (("push button", "Click me", "button"), ("text", "Name", "entry")):
        bounds = Bounds.model_validate(element(state, role, name)["bounds"])
        assert bounds == backend.widget(backend.gtk, widget), (role, name)


def test_a_click_on_an_element_lands_on_it(backend: Forms, tmp_path: Path) -> None:
    before = (backend.gtk.events("button") or [{"count": 0}])[-1]["count"]

    async def run() -> dict[str, Any]:
        async with tools(backend, tmp_path) as client:
            state = await ok(client, "get_app_state", {"pid": backend.gtk.pid, "role": "push button"})
            button = element(state, "push button", "Click me")
            target = {"snapshot_id": state["snapshot_id"], "index": button["index"]}
            return await ok(client, "click", {"element": target})

    result = anyio.run(run)

    backend.gtk.wait("button", lambda e: e["count"] == before + 1, "the element click to press the button")
    x, y = backend.center(backend.gtk, "button")
    assert (result["target"]["point"]["x"], result["target"]["point"]["y"]) == (x, y)


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

    origins = toplevel_origins(desktop, 7, toplevels(elements))
    moved = placed(elements, origins)

    assert {step.name: origin for step, origin in origins.items() if step.name != "Twin"} == {
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
