"""The clipboard and held-input tools through a real MCP client, over the scripted desktop: what
the tools send, their structured errors, and held input released when the client goes."""

from __future__ import annotations

import base64
import time

import anyio
import pytest
from tests.polling import poll
from tests.wakeups import started_thread, thread_asleep, thread_wakeups, threads_called

from deskrig.desktop.scripted import ScriptedDesktop

from .conftest import RigFactory

pytestmark = pytest.mark.anyio

#: The thread that releases what idle holders hold.
HELD_IDLE_THREAD = "deskrig-held-input-idle"


def held_events(world: ScriptedDesktop) -> list[tuple[str, tuple[str, ...], str | None]]:
    return [(e.kind, e.keys, e.button) for e in world.events if e.kind.endswith(("_down", "_up"))]


async def test_a_held_shift_rides_on_clicks_until_key_up(rig: RigFactory, world: ScriptedDesktop) -> None:
    async with rig() as tools:
        down = await tools.ok("key_down", {"key": "shift"})
        assert down["detail"] == {"held_keys": ["Shift_L"], "held_buttons": []}
        await tools.ok("click", {"x": 150, "y": 150})
        assert world.events[-1].modifiers == ("Shift_L",)
        await tools.ok("key_up", {"key": "Shift_L"})
        await tools.ok("click", {"x": 150, "y": 150})
        assert world.events[-1].modifiers == ()


async def test_key_up_of_a_key_not_held_is_invalid_and_sends_nothing(
    rig: RigFactory, world: ScriptedDesktop
) -> None:
    async with rig() as tools:
        await tools.ok("key_down", {"key": "ctrl"})
        sent = len(world.events)
        error = await tools.error("key_up", {"key": "shift"})
        assert error["code"] == "INVALID_ARGUMENT" and error["details"]["held_keys"] == ["Control_L"]
        assert error["remediation"]
        assert len(world.events) == sent
        await tools.error("mouse_up", {"button": "left"})
        await tools.error("mouse_down", {"button": "left", "x": 10})  # x without y
        assert len(world.events) == sent


async def test_everything_held_is_released_when_the_client_disconnects(
    rig: RigFactory, world: ScriptedDesktop
) -> None:
    async with rig() as tools:
        await tools.ok("key_down", {"key": "shift"})
        await tools.ok("mouse_down", {"button": "left", "x": 150, "y": 150})
        server = tools.server
    with anyio.fail_after(5):
        while server.services.desktop.held.state("stdio").keys:
            await anyio.sleep(0.02)
    assert held_events(world)[-2:] == [("button_up", (), "left"), ("key_up", ("Shift_L",), None)]


async def test_clipboard_round_trip_and_structured_errors(rig: RigFactory, world: ScriptedDesktop) -> None:
    async with rig() as tools:
        done = await tools.ok("set_clipboard", {"text": "héllo"})
        assert done["effect"] == "confirmed"
        read = await tools.ok("get_clipboard", {})
        assert (read["text"], read["mime"], read["size"]) == ("héllo", "text/plain;charset=utf-8", 6)
        assert "UTF8_STRING" in read["available"]

        png = b"\x89PNG\r\n\x1a\n\x00\xff"
        await tools.ok(
            "set_clipboard",
            {"selection": "primary", "data": base64.b64encode(png).decode(), "mime": "image/png"},
        )
        image = await tools.ok("get_clipboard", {"selection": "primary", "mime": "image/png"})
        assert base64.b64decode(image["data"]) == png and image["text"] is None

        unknown = await tools.error("get_clipboard", {"mime": "text/html"})
        assert unknown["code"] == "UNSUPPORTED_FORMAT" and "UTF8_STRING" in unknown["details"]["available"]
        for bad in (
            {"data": "!!!", "mime": "image/png"},
            {"data": "AAAA"},
            {},
            {"text": "x", "mime": "nope"},
        ):
            assert (await tools.error("set_clipboard", bad))["code"] == "INVALID_ARGUMENT", bad
        assert (await tools.ok("get_clipboard", {}))["text"] == "héllo", "a refused set changed the clipboard"


def test_the_held_input_idle_watch_sleeps_until_a_holder_could_be_idle(world: ScriptedDesktop) -> None:
    """It looked every second for as long as the server ran, once any client had held a key."""
    desktop = world.open()
    try:
        held = desktop.held
        held.idle_timeout = 30.0
        others = threads_called(HELD_IDLE_THREAD)  # other tests' desktops may have left theirs
        held.key_down("stateless", "shift")
        watch = started_thread(HELD_IDLE_THREAD, others)
        poll("the idle watch asleep", lambda: thread_asleep(watch))
        before = thread_wakeups(watch)
        time.sleep(2.5)
        assert thread_wakeups(watch) - before == 0
        assert held.state("stateless").keys == ("Shift_L",)
    finally:
        desktop.close()


def test_an_unwatched_holder_is_released_after_its_idle_time(world: ScriptedDesktop) -> None:
    """A stateless client's connection cannot be watched: its idle time ends what it holds, while a
    watched client (its disconnect releases it) keeps holding."""
    desktop = world.open()
    try:
        held = desktop.held
        held.idle_timeout = 0.3
        held.watch("watched")
        held.key_down("watched", "ctrl")
        held.key_down("stateless", "shift")
        poll("the idle holder's shift released", lambda: not held.state("stateless").keys)
        assert held.state("watched").keys == ("Control_L",)
        assert ("key_up", ("Shift_L",), None) in held_events(world)
    finally:
        desktop.close()
    assert held_events(world)[-1] == ("key_up", ("Control_L",), None), "closing the desktop left a key down"
