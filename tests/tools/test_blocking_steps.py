"""Where a tool's blocking steps run: served to one client (stdio), a quick one runs on the event
loop, without a worker-thread hop; anything slow, or that needs the event loop from a worker
thread (the PII tree detector), and every call of a server with many clients, in a worker thread.
The answers are the same either way."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.tools.screen import ScreenshotScreenInput

from .conftest import RigFactory, ToolClient

pytestmark = pytest.mark.anyio

#: (tool, arguments, quick): whether the tool's desktop calls are quick enough for the event loop.
CALLS: list[tuple[str, dict[str, Any], bool]] = [
    ("get_screen_size", {}, True),
    ("get_cursor_position", {}, True),
    ("list_displays", {}, True),
    ("screenshot_screen", {"format": "jpeg"}, True),
    ("screenshot_screen", {"format": "png"}, True),
    ("screenshot_region", {"x": 0, "y": 0, "width": 64, "height": 64, "format": "jpeg"}, True),
    ("screenshot_screen", {"format": "webp"}, False),  # Pillow encodes the whole frame
    ("screenshot_screen", {"format": "jpeg", "max_width": 640}, False),  # scaled first
    ("screenshot_screen", {"format": "png", "save_dir": "{tmp}"}, False),  # writes a file
    ("screenshot_window", {"window_title": "Editor"}, False),  # a window's pixels may wait
]


@pytest.fixture
def desktop_threads(world: ScriptedDesktop, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The threads the scripted desktop's model is read from."""
    threads: list[int] = []

    def noting_thread(read: Callable[..., Any]) -> Callable[..., Any]:
        def noted(*args: Any) -> Any:
            threads.append(threading.get_ident())
            return read(*args)

        return noted

    for name in ("screen_bounds", "displays", "window"):
        monkeypatch.setattr(world, name, noting_thread(getattr(world, name)))
    yield threads


async def call_from(
    tools: ToolClient, tool: str, arguments: dict[str, Any], tmp_path: Path
) -> dict[str, Any]:
    arguments = {key: str(tmp_path) if value == "{tmp}" else value for key, value in arguments.items()}
    return await tools.ok(tool, arguments)


@pytest.mark.parametrize(("tool", "arguments", "quick"), CALLS)
async def test_one_client_runs_quick_steps_on_the_event_loop(
    rig: RigFactory,
    desktop_threads: list[int],
    tmp_path: Path,
    tool: str,
    arguments: dict[str, Any],
    quick: bool,
) -> None:
    loop_thread = threading.get_ident()
    async with rig() as tools:
        tools.server.one_client = True
        served_alone = await call_from(tools, tool, arguments, tmp_path)
        alone = list(desktop_threads)
        desktop_threads.clear()
        tools.server.one_client = False
        served_among_many = await call_from(tools, tool, arguments, tmp_path)
    assert alone and desktop_threads
    assert all((thread == loop_thread) == quick for thread in alone), (alone, loop_thread)
    assert loop_thread not in desktop_threads  # many clients: always a worker thread
    different = {"timestamp", "from_cache", "saved_path"}
    assert {k: v for k, v in served_alone.items() if k not in different} == {
        k: v for k, v in served_among_many.items() if k not in different
    }


@pytest.mark.parametrize(
    ("options", "policy", "quick"),
    [
        ({"format": "jpeg"}, {}, True),
        ({"format": "JPG"}, {}, True),
        ({"format": "bmp"}, {}, False),
        ({"format": "jpeg", "mask_pii": True}, {}, False),
        ({"format": "jpeg"}, {"pii_masking": {"enabled": True}}, False),
    ],
)
async def test_a_capture_that_masks_personal_data_is_never_quick(
    rig: RigFactory, options: dict[str, Any], policy: dict[str, Any], quick: bool
) -> None:
    """Masking reads the accessibility tree through the event loop from a worker thread (on the
    loop's own thread the tree detector would find no boxes, and OCR alone would mask)."""
    async with rig(**policy) as tools:
        assert tools.server.services.capture.is_quick(ScreenshotScreenInput(**options)) is quick
