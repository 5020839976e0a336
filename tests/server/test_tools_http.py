"""The discovery and capture tools, over MCP/HTTP against a real rig running a real GTK app, on
every desktop backend."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from PIL import Image
from tests.polling import poll
from tests.recording.conftest import decoded_frames
from tests.server.conftest import GREEN, RED, GreenRig, start_green_rig
from tests.server.helpers import close_to, error_of, image_of, rgb
from tests.server.rigproc import APPS, RigProcess, color_app, read_events
from tests.toolkits import not_on

from deskrig.model import Bounds


@pytest.fixture(scope="module")
def green_rig(backend: str) -> Iterator[GreenRig]:
    """This module runs on every desktop backend."""
    yield from start_green_rig(backend)


def test_list_windows_reports_the_app_as_it_sees_itself(green_rig: GreenRig) -> None:
    app = green_rig.app_geometry()
    result = green_rig.rig.call("list_windows", {"title": "fixture green"})
    assert not result.is_error
    (window,) = result.structured_content["windows"]
    assert window["title"] == "Fixture Green"
    assert window["pid"] == app["pid"]
    assert window["bounds"] == {k: app[k] for k in ("x", "y", "width", "height")}
    by_pid = green_rig.rig.call("list_windows", {"pid": app["pid"]}).structured_content["windows"]
    assert [w["id"] for w in by_pid] == [window["id"]]


def test_displays_screen_size_cursor_and_apps(green_rig: GreenRig) -> None:
    rig = green_rig.rig
    displays = rig.call("list_displays").structured_content["displays"]
    assert len(displays) == 1 and displays[0]["primary"]
    assert displays[0]["bounds"] == {"x": 0, "y": 0, "width": 1280, "height": 800}
    assert rig.call("get_screen_size").structured_content == {"width": 1280, "height": 800}
    cursor = rig.call("get_cursor_position").structured_content
    assert 0 <= cursor["x"] < 1280 and 0 <= cursor["y"] < 800
    apps = rig.call("list_apps").structured_content["apps"]
    pid = green_rig.app_geometry()["pid"]
    assert any(app["pid"] == pid and app["windows"] for app in apps)


def test_displays_are_numbered_from_one_as_screenshot_agents_expect(green_rig: GreenRig) -> None:
    rig = green_rig.rig
    (display,) = rig.call("list_displays").structured_content["displays"]
    assert display["id"] == 1 and display["primary"]
    assert rig.call("get_cursor_position").structured_content["display_id"] == 1
    one = rig.call("screenshot_screen", {"display_id": 1, "max_width": 64}).structured_content
    assert one["display"]["id"] == 1 and one["region"] == display["bounds"]
    # 0 is every display together, as in mss's monitor list.
    every = rig.call("screenshot_screen", {"display_id": 0, "max_width": 64}).structured_content
    assert "display" not in every or every["display"] is None
    assert every["region"] == {"x": 0, "y": 0, "width": 1280, "height": 800}
    missing = error_of(rig.call("screenshot_screen", {"display_id": 2}))
    assert missing["code"] == "DISPLAY_NOT_FOUND" and missing["details"]["available"] == [1]
    assert error_of(rig.call("screenshot_screen", {"display_id": -1}))["code"] == "INVALID_ARGUMENT"


def test_screen_capture_has_the_app_pixels_where_the_app_says(green_rig: GreenRig) -> None:
    app = green_rig.app_geometry()
    result = green_rig.rig.call("screenshot_screen", {})
    meta = result.structured_content
    image = image_of(result)
    assert (meta["width"], meta["height"], meta["scale"]) == (1280, 800, 1.0)
    assert image.size == (1280, 800)
    assert meta["mime_type"] == "image/png" and meta["byte_size"] > 0
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", meta["timestamp"])
    for dx, dy in [(2, 2), (app["width"] // 2, app["height"] // 2), (app["width"] - 3, app["height"] - 3)]:
        assert close_to(image.getpixel((app["x"] + dx, app["y"] + dy)), rgb(GREEN))
    # Outside the window (above and left of it: under sway its tile reaches the screen's far edges)
    # it is not the app's colour.
    assert not close_to(image.getpixel((app["x"] - 20, app["y"] - 20)), rgb(GREEN))


def test_region_capture_and_jpeg(green_rig: GreenRig) -> None:
    app = green_rig.app_geometry()
    region = {"x": app["x"] + 10, "y": app["y"] + 10, "width": 50, "height": 40}
    result = green_rig.rig.call("screenshot_region", {**region, "format": "jpeg", "quality": 90})
    meta = result.structured_content
    assert meta["region"] == region and meta["origin"] == {"x": region["x"], "y": region["y"]}
    assert meta["mime_type"] == "image/jpeg"
    image = image_of(result)
    assert image.size == (50, 40)
    assert close_to(image.getpixel((25, 20)), rgb(GREEN), tolerance=12)


@pytest.mark.parametrize("fmt", ["webp", "bmp"])
def test_other_formats_decode(green_rig: GreenRig, fmt: str) -> None:
    result = green_rig.rig.call(
        "screenshot_region", {"x": 0, "y": 0, "width": 64, "height": 32, "format": fmt}
    )
    assert result.structured_content["format"] == fmt
    assert image_of(result).size == (64, 32)


def test_scaled_capture_states_scale_and_origin(green_rig: GreenRig) -> None:
    app = green_rig.app_geometry()
    result = green_rig.rig.call("screenshot_screen", {"max_width": 640})
    meta = result.structured_content
    assert meta["scale"] == 0.5 and (meta["width"], meta["height"]) == (640, 400)
    image = image_of(result)
    # Map the app's centre through scale/origin: the pixel there is the app's colour.
    cx, cy = app["x"] + app["width"] // 2, app["y"] + app["height"] // 2
    ix = round((cx - meta["origin"]["x"]) * meta["scale"])
    iy = round((cy - meta["origin"]["y"]) * meta["scale"])
    assert close_to(image.getpixel((ix, iy)), rgb(GREEN), tolerance=10)


@not_on("sway", why="sway tiles windows side by side, none covers another (tests/sway covers it)")
def test_window_capture_is_right_while_covered(green_rig: GreenRig) -> None:
    green = green_rig.app_geometry()
    red_log = green_rig.tmp / "cover.log"
    cover = color_app(
        "Cover Red", RED, red_log, toolkit="tk", size="200x150", pos=f"{green['x'] + 150},{green['y'] + 100}"
    )
    red = green_rig.launch(cover, red_log)
    try:
        # The red window really covers part of the green one on screen...
        screen = image_of(green_rig.rig.call("screenshot_screen", {}))
        overlap = (red["x"] + 5, red["y"] + 5)
        assert green["x"] < overlap[0] < green["x"] + green["width"]
        assert close_to(screen.getpixel(overlap), rgb(RED))
        # ...yet the window capture of the green one is green everywhere.
        result = green_rig.rig.call("screenshot_window", {"window_title": "Fixture Green"})
        image = image_of(result)
        assert image.size == (green["width"], green["height"])
        w, h = image.size
        for point in [
            (1, 1),
            (w - 2, 1),
            (1, h - 2),
            (w - 2, h - 2),
            (w // 2, h // 2),
            (overlap[0] - green["x"], overlap[1] - green["y"]),
        ]:
            assert close_to(image.getpixel(point), rgb(GREEN)), point
        assert result.structured_content["window"]["title"] == "Fixture Green"
    finally:
        green_rig.close_extra_apps()


def test_save_dir_writes_dated_files_and_never_overwrites(green_rig: GreenRig) -> None:
    saves = green_rig.tmp / "home" / "deskrig"
    args = {"x": 0, "y": 0, "width": 32, "height": 32, "save_dir": str(saves)}
    first = green_rig.rig.call("screenshot_region", args).structured_content
    second = green_rig.rig.call("screenshot_region", args).structured_content
    paths = [Path(first["saved_path"]), Path(second["saved_path"])]
    assert paths[0] != paths[1]
    for path in paths:
        assert path.is_absolute() and path.exists()
        assert path.parent.parent == saves
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", path.parent.name)
        assert re.fullmatch(r"\d{8}_\d{6}_\d{3}(_\d+)?\.png", path.name)
        assert path.name.startswith(path.parent.name.replace("-", ""))
        assert Image.open(path).size == (32, 32)


def test_save_dir_outside_the_allowed_dirs_is_refused(green_rig: GreenRig) -> None:
    saves = green_rig.tmp / "home" / "deskrig"
    escape = green_rig.tmp / "outside"
    escape.mkdir(exist_ok=True)
    link = saves / "link-out"
    if not link.exists():
        link.symlink_to(escape)
    before = sorted(escape.rglob("*"))
    for bad in [str(saves / ".." / "outside"), str(link), "relative/dir", "/etc"]:
        result = green_rig.rig.call(
            "screenshot_region", {"x": 0, "y": 0, "width": 8, "height": 8, "save_dir": bad}
        )
        error = error_of(result)
        assert error["code"] == "INVALID_PATH", bad
        assert str(saves) in json.dumps(error["details"])
    assert sorted(escape.rglob("*")) == before


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("screenshot_region", {"x": 0, "y": 0, "width": 0, "height": 10}, "INVALID_REGION"),
        ("screenshot_region", {"x": 0, "y": 0, "width": -5, "height": 10}, "INVALID_REGION"),
        ("screenshot_region", {"x": 1270, "y": 0, "width": 20, "height": 10}, "INVALID_REGION"),
        ("screenshot_region", {"x": 5000, "y": 5000, "width": 10, "height": 10}, "INVALID_REGION"),
        ("screenshot_screen", {"format": "gif"}, "UNSUPPORTED_FORMAT"),
        ("screenshot_screen", {"format": "jpeg", "quality": 0}, "INVALID_ARGUMENT"),
        ("screenshot_screen", {"format": "jpeg", "quality": 101}, "INVALID_ARGUMENT"),
        ("screenshot_screen", {"display_id": 7}, "DISPLAY_NOT_FOUND"),
        ("screenshot_window", {"window_id": 12345}, "WINDOW_NOT_FOUND"),
        ("screenshot_window", {"window_title": "no such window anywhere"}, "WINDOW_NOT_FOUND"),
        ("screenshot_window", {}, "INVALID_ARGUMENT"),
        ("list_windows", {"pid": "not-a-pid"}, "INVALID_ARGUMENT"),
    ],
)
def test_bad_arguments_get_their_error_code(
    green_rig: GreenRig, tool: str, arguments: dict[str, Any], code: str
) -> None:
    error = error_of(green_rig.rig.call(tool, arguments))
    assert error["code"] == code
    assert error["message"]


def test_ambiguous_title_lists_the_candidates(green_rig: GreenRig) -> None:
    logs = [green_rig.tmp / "twin-a.log", green_rig.tmp / "twin-b.log"]
    try:
        for log, pos in zip(logs, ["700,100", "700,400"], strict=True):
            green_rig.launch(color_app("Twin Window", RED, log, toolkit="tk", size="120x80", pos=pos), log)
        error = error_of(green_rig.rig.call("screenshot_window", {"window_title": "twin window"}))
        assert error["code"] == "AMBIGUOUS_TARGET"
        pids = {read_events(log)[-1]["pid"] for log in logs}
        assert {c["pid"] for c in error["details"]["candidates"]} == pids
    finally:
        green_rig.close_extra_apps()


def test_blocked_window_is_hidden_refused_and_blacked_out(green_rig: GreenRig) -> None:
    log = green_rig.tmp / "secret.log"
    try:
        secret = green_rig.launch(
            color_app("Secret Vault", RED, log, toolkit="tk", size="160x120", pos="900,500"), log
        )
        windows = green_rig.rig.call("list_windows", {}).structured_content["windows"]
        assert not any("Secret" in w["title"] for w in windows)
        error = error_of(green_rig.rig.call("screenshot_window", {"window_title": "Secret Vault"}))
        assert error["code"] == "SECURITY_ERROR"
        result = green_rig.rig.call("screenshot_screen", {})
        assert result.structured_content["masked_windows"] >= 1
        image = image_of(result)
        for dx, dy in [(2, 2), (80, 60), (157, 117)]:
            assert image.getpixel((secret["x"] + dx, secret["y"] + dy)) == (0, 0, 0)
        region = green_rig.rig.call(
            "screenshot_region", {"x": secret["x"] - 10, "y": secret["y"] - 10, "width": 60, "height": 60}
        )
        assert image_of(region).getpixel((30, 30)) == (0, 0, 0)
    finally:
        green_rig.close_extra_apps()


def test_video_shows_blocked_windows_black(green_rig: GreenRig) -> None:
    """The video's frames come through the screenshots' observation path: a blocked window is
    black in every frame of the mp4, and the rest of the screen is not."""
    log = green_rig.tmp / "secret.log"
    output = green_rig.tmp / "home" / "deskrig" / "blocked-video"
    try:
        secret = green_rig.launch(
            color_app("Secret Vault", RED, log, toolkit="tk", size="160x120", pos="900,500"), log
        )
        secret_area = Bounds(x=secret["x"], y=secret["y"], width=160, height=120)

        def green_beside_it() -> Bounds | None:
            """The green window's bounds, once (sway tiling the two) they are clear of the secret."""
            listed = green_rig.rig.call("list_windows", {"title": "Fixture Green"})
            (green,) = listed.structured_content["windows"]
            bounds = Bounds.model_validate(green["bounds"])
            return None if bounds.intersection(secret_area) else bounds

        app = poll("the green window clear of the secret one", green_beside_it)

        async def record(client: Any) -> tuple[Any, Any]:
            arguments = {"output_dir": str(output), "record_video": True}
            started = await client.call_tool("start_recording", arguments)
            await anyio.sleep(1.5)
            return started, await client.call_tool("stop_recording", {})

        started, stopped = green_rig.rig.session(record)
    finally:
        green_rig.close_extra_apps()
    started_state, stopped_state = started.structured_content, stopped.structured_content
    assert not started.is_error and started_state["video_recording"], started_state
    assert not stopped.is_error and stopped_state["last_error"] is None, stopped_state
    frames = decoded_frames(Path(stopped_state["last_video_path"]))
    assert len(frames) >= 2  # the first frame and the last, at the stop
    shown = (app.x + app.width // 2, app.y + app.height // 2)
    for frame in frames:
        for dx, dy in [(4, 4), (80, 60), (155, 115)]:
            # H.264 keeps black within a few levels of 0.
            assert max(frame.getpixel((secret["x"] + dx, secret["y"] + dy))) <= 24, (dx, dy)
        assert close_to(frame.getpixel(shown), rgb(GREEN), tolerance=16), frame.getpixel(shown)


@not_on("sway", why="starts a rig of its own for the server's inline limit, which no backend takes part in")
def test_inline_limit_steps_down_and_says_so(green_rig: GreenRig, tmp_path: Path) -> None:
    # A window of random pixels makes PNG large; a small inline limit must force a step down.
    rig = RigProcess(
        app=["/usr/bin/python3", str(APPS / "noise.py"), "--size", "800x600"],
        extra=["--max-inline-bytes", "65536"],
    ).start(tmp_path)
    try:
        home_saves = tmp_path / "home" / "deskrig"
        result = rig.call("screenshot_screen", {"save_dir": str(home_saves)})
        meta = result.structured_content
        assert meta["byte_size"] <= 65536
        assert meta["adjustments"], meta
        assert (
            len(base64.b64decode(next(c for c in result.content if c.type == "image").data))
            == meta["byte_size"]
        )
        saved = Image.open(meta["saved_path"])
        assert saved.size == (1280, 800) and saved.format == "PNG"
        assert os.path.getsize(meta["saved_path"]) > 65536
    finally:
        rig.stop()


def test_audit_log_has_one_line_per_call_without_image_data(green_rig: GreenRig) -> None:
    green_rig.rig.call("screenshot_region", {"x": 0, "y": 0, "width": 8, "height": 8})
    green_rig.rig.call("screenshot_screen", {"format": "tiff"})
    lines = [json.loads(line) for line in green_rig.audit.read_text().splitlines()]
    tools = [line["tool"] for line in lines]
    assert "screenshot_region" in tools and "screenshot_screen" in tools
    failed = [line for line in lines if line["tool"] == "screenshot_screen" and line["outcome"] == "error"]
    assert failed and failed[-1]["error_code"] == "UNSUPPORTED_FORMAT"
    assert all({"time", "client", "tool", "arguments", "outcome"} <= set(line) for line in lines)
    assert "iVBOR" not in green_rig.audit.read_text()  # no PNG data
