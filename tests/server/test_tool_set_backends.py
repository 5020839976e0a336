"""The tool set on a real rig of each backend, through a real MCP client (test_tool_set.py checks
the rest, with its policy flags, on X11).

Files: the agent hands the editor fixture a file, the app edits and saves it, the agent reads back
exactly what the app wrote. On a sway rig started as root the apps run as an unprivileged user:
what the rig writes for them (the file, the folders it makes on the way) is theirs, or the app
could not save over it."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator

import pytest
from tests.polling import poll
from tests.rigprocs import SYSTEM_PYTHON
from tests.server.conftest import GREEN, GreenRig, start_green_rig
from tests.server.helpers import allowed, close_to, image_of, ok, rgb
from tests.server.rigproc import APPS, read_events


@pytest.fixture(scope="module")
def tools_rig(backend: str) -> Iterator[GreenRig]:
    yield from start_green_rig(backend)


def test_upload_open_in_an_app_save_and_download_the_bytes(tools_rig: GreenRig) -> None:
    target = allowed(tools_rig) / "notes" / "doc.txt"
    uploaded = ok(tools_rig, "upload_file", {"path": str(target), "text": "héllo\n", "make_parents": True})
    original = "héllo\n".encode()
    assert uploaded.structured_content == {
        "path": str(target),
        "size": len(original),
        "sha256": hashlib.sha256(original).hexdigest(),
    }
    assert target.read_bytes() == original

    log = tools_rig.tmp / "editor.log"
    editor = [SYSTEM_PYTHON, str(APPS / "tk_editor.py"), "--title", "Fixture Editor", "--log", str(log)]
    launched = ok(tools_rig, "launch_app", {"command": [*editor, str(target)]}).structured_content
    tools_rig.extra_apps.append(launched["pid"])
    poll("editor ready", lambda: read_events(log, "ready"))
    app_uid = os.stat(f"/proc/{launched['pid']}").st_uid
    assert target.stat().st_uid == target.parent.stat().st_uid == app_uid  # the app's, to save over
    ok(tools_rig, "type_text", {"text": "saved by the app"})
    ok(tools_rig, "press_key", {"key": "s", "modifiers": ["ctrl"]})
    poll("editor saved", lambda: read_events(log, "saved"))

    expected = "héllo\nsaved by the app".encode()
    result = ok(tools_rig, "download_file", {"path": "~/deskrig/notes/doc.txt"})
    data = result.structured_content
    assert base64.b64decode(data["content_base64"]) == expected == target.read_bytes()
    assert data["size"] == len(expected) and data["sha256"] == hashlib.sha256(expected).hexdigest()
    assert data["mime_type"] == "text/plain" and data["download_url"] is None
    (embedded,) = [c for c in result.content if c.type == "resource"]
    assert embedded.resource.uri == target.as_uri()
    assert base64.b64decode(embedded.resource.blob) == expected

    # A second upload replaces the file and leaves it the app's.
    ok(tools_rig, "upload_file", {"path": str(target), "text": "again\n"})
    assert target.read_bytes() == b"again\n" and target.stat().st_uid == app_uid


def test_zoom_enlarges_a_region_and_says_how_to_map_back(tools_rig: GreenRig) -> None:
    app = tools_rig.app_geometry()
    region = {"x": app["x"] + 10, "y": app["y"] + 10, "width": 40, "height": 30}
    result = ok(tools_rig, "zoom", {**region, "scale": 3})
    meta = result.structured_content
    image = image_of(result)
    assert image.size == (120, 90) and (meta["width"], meta["height"]) == (120, 90)
    assert meta["scale"] == 3 and meta["origin"] == {"x": region["x"], "y": region["y"]}
    assert meta["source"] == "zoom" and meta["masked_windows"] == 0
    assert close_to(image.getpixel((60, 45)), rgb(GREEN))
