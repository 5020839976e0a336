"""The ``acs`` tool profile: its tool set, its result shapes, its savePath and display numbering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client
from PIL import Image
from tests.server.conftest import GREEN
from tests.server.rigproc import RigProcess, color_app


def test_acs_profile_shapes(tmp_path: Path) -> None:
    log = tmp_path / "acs.log"
    rig = RigProcess(app=color_app("ACS App", GREEN, log), extra=["--tool-profile", "acs"]).start(tmp_path)
    saves = tmp_path / "home" / "deskrig"
    saves.mkdir(parents=True)
    try:

        async def run(client: Client) -> dict[str, object]:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {
                "screenshot_capture_full",
                "screenshot_capture_window",
                "screenshot_capture_region",
                "screenshot_list_displays",
                "screenshot_list_windows",
            }
            windows = (await client.call_tool("screenshot_list_windows", {})).structured_content
            win = next(w for w in windows["windows"] if w["title"] == "ACS App")
            inline = (
                await client.call_tool(
                    "screenshot_capture_window", {"windowId": str(win["id"]), "enablePIIMasking": True}
                )
            ).structured_content
            saved = (
                await client.call_tool("screenshot_capture_full", {"savePath": str(saves), "format": "jpeg"})
            ).structured_content
            bad = await client.call_tool(
                "screenshot_capture_region", {"x": 0, "y": 0, "width": 0, "height": 5}
            )
            return {"windows": windows, "inline": inline, "saved": saved, "bad": bad.structured_content}

        out = rig.session(run)
        inline, saved, bad = out["inline"], out["saved"], out["bad"]
        assert inline["status"] == "success" and inline["mimeType"] == "image/png" and inline["data"]  # type: ignore[index]
        # Masking asked for and done: a window of one colour has nothing to mask.
        masking = inline["metadata"]["piiMasking"]  # type: ignore[index]
        assert masking["enabled"] is True and masking["counts"] == {} and masking["emailsRedacted"] == 0
        assert saved["status"] == "success" and Path(saved["filePath"]).exists()  # type: ignore[index]
        assert "piiMasking" not in saved["metadata"]  # type: ignore[index]
        assert "data" not in saved  # type: ignore[operator]
        assert bad == {"status": "error", "error": bad["error"]} and bad["error"]["code"] == "INVALID_REGION"  # type: ignore[index]
    finally:
        rig.stop()


def test_acs_save_path_is_the_file_to_write_and_displays_count_from_one(tmp_path: Path) -> None:
    log = tmp_path / "acs.log"
    rig = RigProcess(app=color_app("ACS App", GREEN, log), extra=["--tool-profile", "acs"]).start(tmp_path)
    saves = tmp_path / "home" / "deskrig"
    outside = tmp_path / "outside"
    outside.mkdir()
    saves.mkdir(parents=True)
    (saves / "escape.png").symlink_to(outside / "escape.png")

    def capture(**arguments: Any) -> dict[str, Any]:
        result = rig.call("screenshot_capture_full", arguments)
        return result.structured_content  # type: ignore[no-any-return]

    try:
        # The documented example: a file path, its parent created, the extension picking the format.
        png = saves / "screenshots" / "desktop.png"
        saved = capture(savePath=str(png))
        assert saved["status"] == "success" and saved["filePath"] == str(png), saved
        assert png.is_file() and Image.open(png).format == "PNG" and Image.open(png).size == (1280, 800)
        assert saved["mimeType"] == "image/png" and saved["metadata"]["fileSize"] == png.stat().st_size
        jpeg = capture(savePath=str(saves / "full.jpg"))
        assert Image.open(jpeg["filePath"]).format == "JPEG" and jpeg["mimeType"] == "image/jpeg"
        assert Image.open(capture(savePath=str(saves / "x.webp"), format="bmp")["filePath"]).format == "BMP"
        # Saving again replaces the file (atomically: no temp file is left beside it).
        capture(savePath=str(png), display="1")
        assert sorted(p.name for p in png.parent.iterdir()) == ["desktop.png"]
        # An existing directory, or a path ending in '/', keeps the dated layout.
        for folder in [str(saves / "screenshots"), str(saves / "dated") + "/"]:
            path = Path(capture(savePath=folder)["filePath"])
            assert path.parent.parent == Path(folder.rstrip("/")) and path.suffix == ".png", path
        # The same path policy: nothing outside the allowed directories, through a symlink or not.
        for bad in [
            str(outside / "x.png"),
            str(saves / "escape.png"),
            str(saves / ".." / "outside" / "y.png"),
        ]:
            refused = capture(savePath=bad)
            assert refused["status"] == "error" and refused["error"]["code"] == "INVALID_PATH", bad
        assert list(outside.iterdir()) == []
        assert capture(savePath=str(saves / "a.gif"))["error"]["code"] == "UNSUPPORTED_FORMAT"
        # Displays are numbered from 1 here too; 0 is all of them.
        (display,) = rig.call("screenshot_list_displays", {}).structured_content["displays"]
        assert display["id"] == 1
        assert capture(display="1")["metadata"]["display"]["id"] == 1
        assert capture(display="0")["metadata"]["region"] == {"x": 0, "y": 0, "width": 1280, "height": 800}
        assert capture(display="2")["error"]["code"] == "DISPLAY_NOT_FOUND"
    finally:
        rig.stop()
