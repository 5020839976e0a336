"""The front of ``deskrig serve --stdio`` (DeferredServer), in process over the scripted desktop:
after ``initialize`` it opens the desktop without waiting for a call (the warm-up); a first call
racing the warm-up gets its answer from the desktop the warm-up opens; a warm-up that cannot open
the desktop leaves the first call the structured error, not a dead server; and garbage collection,
paused for the start-up, is back on with the start-up's objects frozen once the warm-up is over.

(That nothing is opened before ``initialize`` is answered is test_stdio_start.py's check of the
modules loaded at that moment, on a real display.)"""

from __future__ import annotations

import gc
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from mcp import Client
from tests.polling import poll
from tests.server.helpers import error_of, image_of

from deskrig.config import Settings
from deskrig.desktop.base import Desktop
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.server import DeskrigServer
from deskrig.serving import DeferredServer, build_server

GREEN = (0, 200, 0)


class Openings:
    """``open_desktop`` for the front, over ``world``: counts attempts and what it opened; finds no
    display while ``display_up`` is False; while ``held`` is clear, an attempt waits (``entered``
    is then set)."""

    def __init__(self, world: ScriptedDesktop, display_up: bool = True) -> None:
        self.world = world
        self.display_up = display_up
        self.attempts = 0
        self.opened: list[Desktop] = []
        self.entered = threading.Event()
        self.held = threading.Event()
        self.held.set()

    def __call__(self) -> Desktop:
        self.attempts += 1
        self.entered.set()
        self.held.wait()
        if not self.display_up:
            raise DeskrigError(ErrorCode.DISPLAY_NOT_FOUND, "no display yet", remediation="Start one.")
        self.opened.append(self.world.open())
        return self.opened[-1]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ScriptedDesktop:
    """A screen filled by one green window; the tool list is cached under ``tmp_path``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    desktop = ScriptedDesktop()
    desktop.add_window("Editor", desktop.screen_bounds(), GREEN, app="editor", pid=101)
    return desktop


@pytest.fixture(autouse=True)
def start_up_without_collection() -> Iterator[None]:
    """As ``deskrig serve --stdio`` starts (the front freezes what exists once it has opened the
    desktop: this process's objects are unfrozen afterwards)."""
    gc.disable()
    yield
    gc.unfreeze()
    gc.enable()


def build(desktop: Desktop) -> DeskrigServer:
    return build_server(desktop, Settings())


def serve(front: DeferredServer, scenario: Callable[[Client], Awaitable[None]]) -> None:
    """Run ``scenario`` with an MCP client of ``front`` (the SDK's in-memory transport, with the
    initialize handshake), then close the front as ``serve_stdio_deferred`` does."""

    async def run() -> None:
        async with Client(front.mcp, mode="legacy") as client:
            await scenario(client)

    try:
        anyio.run(run)
    finally:
        front.close()


async def until(what: str, check: Callable[[], object]) -> None:
    await anyio.to_thread.run_sync(lambda: poll(what, check))


async def screenshot_is_green(client: Client) -> None:
    result = await client.call_tool("screenshot_screen", {})
    assert not result.is_error, result.content
    image = image_of(result)
    assert image.getpixel((image.width // 2, image.height // 2)) == GREEN


def test_the_warm_up_opens_the_desktop_after_initialize_without_a_call(world: ScriptedDesktop) -> None:
    openings = Openings(world)
    front = DeferredServer("default", openings, build)

    async def scenario(client: Client) -> None:
        await until("the warm-up's opening", lambda: openings.opened)
        await until("garbage collection back on", gc.isenabled)
        assert gc.get_freeze_count() > 0  # the start-up's objects, out of every pass
        await screenshot_is_green(client)
        await screenshot_is_green(client)

    assert openings.attempts == 0  # built, not initialized: nothing opened
    serve(front, scenario)
    assert openings.attempts == 1


def test_a_first_call_racing_the_warm_up_gets_the_desktop_it_opens(world: ScriptedDesktop) -> None:
    openings = Openings(world)
    openings.held.clear()
    front = DeferredServer("default", openings, build)

    async def scenario(client: Client) -> None:
        await anyio.to_thread.run_sync(openings.entered.wait)  # the warm-up is opening
        async with anyio.create_task_group() as tg:
            tg.start_soon(screenshot_is_green, client)
            await wait_all_tasks_blocked()  # the call waits for the opening in progress
            openings.held.set()

    serve(front, scenario)
    assert openings.attempts == 1 and len(openings.opened) == 1  # one desktop, one set of connections


def test_a_warm_up_that_cannot_open_the_desktop_leaves_the_first_call_the_structured_error(
    world: ScriptedDesktop,
) -> None:
    """The warm-up finds no display, nor does the first call: it is answered the structured
    error; a call once the display is up gets its answer."""
    openings = Openings(world, display_up=False)
    front = DeferredServer("default", openings, build)

    async def scenario(client: Client) -> None:
        await until("the warm-up's attempt", lambda: openings.attempts)
        await until("garbage collection back on", gc.isenabled)
        error = error_of(await client.call_tool("screenshot_screen", {}))
        assert error["code"] == "DISPLAY_NOT_FOUND" and error["message"] == "no display yet"
        assert openings.attempts == 2, (
            "the warm-up's attempt, then one a call (not one in its middleware and another in its handler)"
        )
        openings.display_up = True
        await screenshot_is_green(client)

    serve(front, scenario)
    assert len(openings.opened) == 1
