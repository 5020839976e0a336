"""Discovery and capture tools over the scripted desktop: what they list, the pixels they return,
what the security policy hides, and how they refuse."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from deskrig.desktop.scripted import FRAME_COLOR, MANAGED_FRAME, ScriptedDesktop
from deskrig.model import Bounds

from .conftest import BLUE, EDITOR_PID, GREEN, TERMINAL_PID, RigFactory, ToolClient

pytestmark = pytest.mark.anyio


def image_of(result: Any) -> Image.Image:
    (block,) = [block for block in result.content if block.type == "image"]
    return Image.open(io.BytesIO(base64.b64decode(block.data)))


async def shot(tools: ToolClient, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], Image.Image]:
    result = await tools.call(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content, image_of(result)


async def test_no_display_is_needed() -> None:
    assert "DISPLAY" not in os.environ and "WAYLAND_DISPLAY" not in os.environ


async def test_list_windows_is_top_most_first_and_filters(rig: RigFactory) -> None:
    async with rig() as tools:
        windows = (await tools.ok("list_windows"))["windows"]
        by_pid = (await tools.ok("list_windows", {"pid": EDITOR_PID}))["windows"]
        by_title = (await tools.ok("list_windows", {"title": "term"}))["windows"]

    assert [(w["title"], w["z_order"], w["focused"]) for w in windows] == [
        ("Terminal", 0, True),
        ("Editor", 1, False),
    ]
    assert windows[1]["bounds"] == {"x": 100, "y": 100, "width": 400, "height": 300}
    assert windows[1]["pid"] == EDITOR_PID and windows[1]["app"] == "editor"
    assert [w["title"] for w in by_pid] == ["Editor"]
    assert [w["pid"] for w in by_title] == [TERMINAL_PID]


async def test_displays_screen_size_and_cursor(rig: RigFactory, world: ScriptedDesktop) -> None:
    async with rig() as tools:
        displays = (await tools.ok("list_displays"))["displays"]
        size = await tools.ok("get_screen_size")
        await tools.ok("move_cursor", {"x": 640, "y": 400})
        cursor = await tools.ok("get_cursor_position")

    assert displays == [
        {
            "id": 1,
            "name": "screen",
            "bounds": {"x": 0, "y": 0, "width": 1280, "height": 800},
            "primary": True,
            "scale": 1.0,
        }
    ]
    assert size == {"width": 1280, "height": 800}
    assert cursor == {"x": 640, "y": 400, "display_id": 1}
    assert world.pointer == (640, 400)


async def test_second_display_is_listed_and_captured_alone(rig: RigFactory) -> None:
    two = ScriptedDesktop(
        [
            ("left", Bounds(x=0, y=0, width=640, height=480)),
            ("right", Bounds(x=640, y=0, width=800, height=600)),
        ],
        primary=1,
    )
    two.add_window("Right", Bounds(x=700, y=50, width=100, height=100), GREEN)

    async with rig(two) as tools:
        displays = (await tools.ok("list_displays"))["displays"]
        size = await tools.ok("get_screen_size")
        metadata, image = await shot(tools, "screenshot_screen", {"display_id": 1})
        missing = await tools.error("screenshot_screen", {"display_id": 3})

    assert [(d["id"], d["name"], d["primary"]) for d in displays] == [(1, "right", True), (2, "left", False)]
    assert size == {"width": 1440, "height": 600}
    assert image.size == (800, 600) and metadata["origin"] == {"x": 640, "y": 0}
    assert image.getpixel((60, 50)) == GREEN
    assert missing["code"] == "DISPLAY_NOT_FOUND" and missing["details"]["available"] == [1, 2]


async def test_screenshot_screen_composites_the_windows_in_stacking_order(rig: RigFactory) -> None:
    async with rig() as tools:
        metadata, image = await shot(tools, "screenshot_screen", {})
        jpeg, small = await shot(tools, "screenshot_screen", {"format": "jpeg", "max_width": 640})

    assert (metadata["width"], metadata["height"], metadata["scale"]) == (1280, 800, 1.0)
    assert metadata["mime_type"] == "image/png" and image.format == "PNG"
    assert metadata["window_capture"] is None
    assert image.getpixel((150, 150)) == GREEN
    assert image.getpixel((450, 350)) == BLUE, "the terminal is on top where they overlap"
    assert image.getpixel((50, 50)) == (0, 0, 0)
    assert (jpeg["mime_type"], small.format, small.size, jpeg["scale"]) == (
        "image/jpeg",
        "JPEG",
        (640, 400),
        0.5,
    )


async def test_an_unchanged_screen_is_served_from_cache_until_a_window_changes(
    rig: RigFactory, world: ScriptedDesktop
) -> None:
    async with rig() as tools:
        first, _ = await shot(tools, "screenshot_screen", {})
        again, _ = await shot(tools, "screenshot_screen", {})
        world.paint(world.windows()[1].id, BLUE)
        changed, image = await shot(tools, "screenshot_screen", {})

    assert (first["from_cache"], again["from_cache"], changed["from_cache"]) == (False, True, False)
    assert image.getpixel((150, 150)) == BLUE


async def test_screenshot_region_is_that_part_of_the_screen(rig: RigFactory) -> None:
    async with rig() as tools:
        metadata, image = await shot(
            tools, "screenshot_region", {"x": 290, "y": 240, "width": 20, "height": 20, "format": "bmp"}
        )
        outside = await tools.error("screenshot_region", {"x": 1270, "y": 0, "width": 20, "height": 20})
        empty = await tools.error("screenshot_region", {"x": 0, "y": 0, "width": 0, "height": 20})
        bad_format = await tools.error(
            "screenshot_region", {"x": 0, "y": 0, "width": 8, "height": 8, "format": "gif"}
        )

    assert image.size == (20, 20) and image.format == "BMP"
    assert metadata["region"] == {"x": 290, "y": 240, "width": 20, "height": 20}
    assert image.getpixel((5, 5)) == GREEN and image.getpixel((15, 15)) == BLUE
    assert outside["code"] == empty["code"] == "INVALID_REGION"
    assert outside["details"]["screen"] == {"x": 0, "y": 0, "width": 1280, "height": 800}
    assert bad_format["code"] == "UNSUPPORTED_FORMAT"


async def test_screenshot_window_is_its_own_pixels_even_when_covered(
    rig: RigFactory, world: ScriptedDesktop
) -> None:
    async with rig() as tools:
        metadata, image = await shot(tools, "screenshot_window", {"window_title": "editor"})
        unknown = await tools.error("screenshot_window", {"window_id": 12345})
        neither = await tools.error("screenshot_window", {})
        world.minimize(world.windows()[1].id)
        minimized = await tools.error("screenshot_window", {"window_title": "Editor"})

    assert image.size == (400, 300)
    assert image.getcolors() == [(400 * 300, GREEN)]
    assert metadata["source"] == "window" and metadata["window"]["title"] == "Editor"
    assert metadata["window_capture"] == "model"
    assert (unknown["code"], unknown["details"]) == ("WINDOW_NOT_FOUND", {"window_id": 12345})
    assert unknown["remediation"]
    assert neither["code"] == "INVALID_ARGUMENT"
    assert minimized["code"] == "CAPTURE_FAILED"


async def test_screenshot_window_with_frame_includes_the_decoration(rig: RigFactory) -> None:
    managed = ScriptedDesktop(frame=MANAGED_FRAME)
    managed.add_window("Editor", Bounds(x=100, y=100, width=400, height=300), GREEN)
    async with rig(managed) as tools:
        framed, with_frame = await shot(
            tools, "screenshot_window", {"window_title": "Editor", "include_frame": True}
        )
        _, client_only = await shot(tools, "screenshot_window", {"window_title": "Editor"})

    assert with_frame.size == (402, 321)
    assert framed["region"] == {"x": 99, "y": 80, "width": 402, "height": 321}
    assert with_frame.getpixel((200, 5)) == FRAME_COLOR and with_frame.getpixel((200, 100)) == GREEN
    assert client_only.getcolors() == [(400 * 300, GREEN)]


async def test_blocked_window_is_hidden_blacked_out_and_refused(rig: RigFactory) -> None:
    async with rig(blocked_window_patterns=["^Edit"]) as tools:
        windows = (await tools.ok("list_windows"))["windows"]
        metadata, image = await shot(tools, "screenshot_screen", {})
        refused = await tools.error("screenshot_window", {"window_title": "Editor"})

    assert [w["title"] for w in windows] == ["Terminal"]
    assert metadata["masked_windows"] == 1
    assert image.getpixel((150, 150)) == (0, 0, 0), "the blocked editor is blacked out"
    assert image.getpixel((650, 500)) == BLUE
    assert refused["code"] == "SECURITY_ERROR"


async def test_saved_screenshot_lands_in_an_allowed_directory_only(rig: RigFactory, tmp_path: Path) -> None:
    async with rig() as tools:
        metadata, _ = await shot(
            tools, "screenshot_region", {"x": 0, "y": 0, "width": 8, "height": 8, "save_dir": str(tmp_path)}
        )
        denied = await tools.error("screenshot_screen", {"save_dir": "/etc"})

    saved = Path(metadata["saved_path"])
    assert saved.parent.parent == tmp_path and saved.suffix == ".png"
    assert Image.open(saved).size == (8, 8)
    assert denied["code"] in ("INVALID_PATH", "PERMISSION_DENIED")


async def test_capture_rate_limit_counts_captures_only(rig: RigFactory) -> None:
    async with rig(max_captures_per_minute=2) as tools:
        for _ in range(2):
            await shot(tools, "screenshot_region", {"x": 0, "y": 0, "width": 8, "height": 8})
        limited = await tools.error("screenshot_screen", {})
        await tools.ok("list_windows")  # not a capture: not limited

    assert limited["code"] == "RATE_LIMIT_EXCEEDED"
    assert limited["details"]["limit"] == 2 and limited["details"]["retry_after_seconds"] >= 1


async def test_bad_arguments_are_invalid_argument(rig: RigFactory) -> None:
    async with rig() as tools:
        wrong_type = await tools.error("screenshot_region", {"x": "left", "y": 0, "width": 8, "height": 8})
        out_of_range = await tools.error("screenshot_screen", {"quality": 0})

    assert wrong_type["code"] == out_of_range["code"] == "INVALID_ARGUMENT"
