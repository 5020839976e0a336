"""upload_file/download_file (and the streamed /files endpoint), run_command and zoom, over MCP/HTTP
against a real rig: the bytes on disk, what a real app saved, what a command printed, the pixels."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from PIL import Image
from tests.polling import poll
from tests.server.conftest import GREEN, RED, GreenRig
from tests.server.helpers import allowed, close_to, error_of, image_of, ok, rgb
from tests.server.rigproc import RigProcess, color_app

from deskrig.config import Settings
from deskrig.http import max_request_body_bytes

MAX_FILE = 300_000
MAX_INLINE = 64 * 1024


@pytest.fixture(scope="module")
def tool_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GreenRig]:
    """A rig with commands on, a 300 kB file limit, a 64 KiB inline limit and windows titled
    "Secret ..." blocked."""
    tmp = tmp_path_factory.mktemp("tool-rig")
    log = tmp / "green.log"
    (tmp / "home" / "deskrig").mkdir(parents=True)
    rig = RigProcess(
        app=color_app("Fixture Tools", GREEN, log, size="300x200", pos="100,120"),
        extra=[
            "--allow-commands",
            "--max-file-bytes",
            str(MAX_FILE),
            "--max-inline-bytes",
            str(MAX_INLINE),
            "--blocked-window",
            "^Secret .*",
        ],
    ).start(tmp)
    green = GreenRig(rig, log, tmp, tmp / "audit.jsonl")
    green.app_geometry()
    yield green
    green.close_extra_apps()
    rig.stop()


def listing(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


# -- files ---------------------------------------------------------------------------------------


def test_binary_files_inline_and_through_the_streamed_endpoint(tool_rig: GreenRig) -> None:
    small = os.urandom(1000)
    path = allowed(tool_rig) / "small.bin"
    ok(tool_rig, "upload_file", {"path": str(path), "content_base64": base64.b64encode(small).decode()})
    assert path.read_bytes() == small
    path.chmod(0o750)  # replacing a file keeps its mode (a script stays executable)
    ok(tool_rig, "upload_file", {"path": str(path), "text": "#!/bin/sh\n"})
    assert path.read_text() == "#!/bin/sh\n" and path.stat().st_mode & 0o777 == 0o750

    large = os.urandom(200_000)  # over the inline limit, under the file limit
    url = f"{tool_rig.rig.base}/files"
    big = allowed(tool_rig) / "big.bin"
    put = httpx.put(url, params={"path": str(big)}, content=large, headers=tool_rig.rig.auth, timeout=30)
    assert put.status_code == 200, put.text
    assert put.json() == {"path": str(big), "size": len(large), "sha256": hashlib.sha256(large).hexdigest()}
    assert big.read_bytes() == large
    big.chmod(0o600)
    put = httpx.put(url, params={"path": str(big)}, content=large, headers=tool_rig.rig.auth, timeout=30)
    assert put.status_code == 200 and big.stat().st_mode & 0o777 == 0o600

    described = ok(tool_rig, "download_file", {"path": str(big)})
    data = described.structured_content
    assert data["content_base64"] is None and data["size"] == len(large)
    assert not [c for c in described.content if c.type == "resource"]
    got = httpx.get(f"{tool_rig.rig.base}{data['download_url']}", headers=tool_rig.rig.auth, timeout=30)
    assert got.status_code == 200 and got.content == large
    assert got.headers["x-sha256"] == data["sha256"]
    assert httpx.get(f"{tool_rig.rig.base}{data['download_url']}", timeout=10).status_code == 401


def test_paths_outside_the_allowed_directories_are_refused_and_nothing_is_written(tool_rig: GreenRig) -> None:
    outside = tool_rig.tmp / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("private")
    (allowed(tool_rig) / "escape").symlink_to(outside)
    (allowed(tool_rig) / "secret-link.txt").symlink_to(outside / "secret.txt")
    before = listing(outside)
    attempts = [
        str(allowed(tool_rig) / ".." / "outside" / "new.txt"),  # traversal
        str(allowed(tool_rig) / "escape" / "new.txt"),  # a directory symlink leading out
        str(allowed(tool_rig) / "secret-link.txt"),  # a file symlink leading out
        "relative.txt",
    ]
    for path in attempts:
        error = error_of(tool_rig.rig.call("upload_file", {"path": path, "text": "x"}))
        assert error["code"] == "INVALID_PATH", (path, error)
        assert error_of(tool_rig.rig.call("download_file", {"path": path}))["code"] == "INVALID_PATH"
        put = httpx.put(
            f"{tool_rig.rig.base}/files", params={"path": path}, content=b"x", headers=tool_rig.rig.auth
        )
        assert put.status_code == 400 and put.json()["error"]["code"] == "INVALID_PATH", put.text
    assert listing(outside) == before and (outside / "secret.txt").read_text() == "private"
    got = httpx.get(
        f"{tool_rig.rig.base}/files",
        params={"path": str(allowed(tool_rig) / "secret-link.txt")},
        headers=tool_rig.rig.auth,
    )
    assert got.status_code == 400 and b"private" not in got.content


def test_oversized_and_malformed_uploads_change_nothing(tool_rig: GreenRig) -> None:
    path = allowed(tool_rig) / "kept.txt"
    path.write_text("the old contents")
    before = listing(allowed(tool_rig))
    too_big = base64.b64encode(b"x" * (MAX_FILE + 1)).decode()
    refused = [
        ({"path": str(path), "content_base64": too_big}, "INVALID_ARGUMENT"),
        ({"path": str(path), "text": "x" * (MAX_FILE + 1)}, "INVALID_ARGUMENT"),
        ({"path": str(path), "content_base64": "not base64!"}, "INVALID_ARGUMENT"),
        ({"path": str(path), "text": "a", "content_base64": "YQ=="}, "INVALID_ARGUMENT"),
        ({"path": str(path)}, "INVALID_ARGUMENT"),
        ({"path": str(allowed(tool_rig)), "text": "a directory"}, "INVALID_PATH"),
        ({"path": str(allowed(tool_rig) / "no" / "such" / "dir.txt"), "text": "x"}, "INVALID_PATH"),
    ]
    for arguments, code in refused:
        error = error_of(tool_rig.rig.call("upload_file", arguments))
        assert error["code"] == code, (arguments.keys(), error)
    assert "max_file_bytes" in error_of(tool_rig.rig.call("upload_file", refused[0][0]))["details"]
    put = httpx.put(
        f"{tool_rig.rig.base}/files",
        params={"path": str(path)},
        content=iter([b"y" * 100_000] * 4),  # streamed, no Content-Length: refused part-way
        headers=tool_rig.rig.auth,
        timeout=30,
    )
    assert put.status_code == 400 and put.json()["error"]["code"] == "INVALID_ARGUMENT", put.text
    assert path.read_text() == "the old contents"
    assert listing(allowed(tool_rig)) == before  # no temp file left behind


def test_a_request_over_the_rigs_size_limit_gets_a_structured_error(tool_rig: GreenRig) -> None:
    """Larger than any payload a tool takes: refused before it is read, as a JSON-RPC error that
    carries the structured error, and the client's session goes on."""
    limit = max_request_body_bytes(Settings(max_file_bytes=MAX_FILE))
    path = allowed(tool_rig) / "huge.bin"

    async def upload_then_ask(client: Client) -> tuple[MCPError, Any]:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("upload_file", {"path": str(path), "content_base64": "A" * limit})
        return refused.value, await client.call_tool("get_cursor_position", {})

    refused, after = tool_rig.rig.session(upload_then_ask)
    data = refused.error.data
    assert data["code"] == "INVALID_ARGUMENT" and data["remediation"]
    assert data["details"]["max_bytes"] == limit
    assert not after.is_error and not path.exists()


# -- commands ------------------------------------------------------------------------------------


def command(rig: GreenRig, **arguments: Any) -> dict[str, Any]:
    return ok(rig, "run_command", arguments).structured_content  # type: ignore[no-any-return]


def test_run_command_runs_with_the_apps_environment(tool_rig: GreenRig, tmp_path: Path) -> None:
    done = command(
        tool_rig,
        argv=["sh", "-c", 'read line; echo "$line $DISPLAY $EXTRA"; echo oops >&2; exit 3'],
        stdin="got\n",
        env={"EXTRA": "extra"},
        cwd=str(tmp_path),
    )
    assert done["stdout"] == f"got {tool_rig.rig.display} extra\n"
    assert done["stderr"] == "oops\n" and done["exit_code"] == 3 and not done["timed_out"]
    assert not done["stdout_truncated"] and done["stdout_bytes"] == len(done["stdout"])
    assert command(tool_rig, argv=["pwd"], cwd=str(tmp_path))["stdout"] == f"{tmp_path}\n"


def test_run_command_bounds_output_and_kills_the_group_at_timeout(tool_rig: GreenRig, tmp_path: Path) -> None:
    noisy = command(tool_rig, argv=[sys.executable, "-c", "print('z' * 100000)"], max_output_bytes=1000)
    assert noisy["stdout"] == "z" * 1000 and noisy["stdout_truncated"] and noisy["stdout_bytes"] == 100_001

    pidfile = tmp_path / "child.pid"
    slow = command(tool_rig, argv=["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], timeout_ms=1500)
    assert slow["timed_out"] and slow["exit_code"] is None and slow["signal"] == 9
    child = int(pidfile.read_text())
    poll("the background child killed", lambda: not Path(f"/proc/{child}").exists() or None)


def test_run_command_refuses_bad_input(tool_rig: GreenRig) -> None:
    missing = error_of(tool_rig.rig.call("run_command", {"argv": ["no-such-program-xyz"]}))
    assert missing["code"] == "APP_NOT_RUNNING"
    for arguments in (
        {"argv": []},
        {"argv": ["true"], "timeout_ms": 0},
        {"argv": ["true"], "env": {"A=B": "c"}},
    ):
        assert error_of(tool_rig.rig.call("run_command", arguments))["code"] == "INVALID_ARGUMENT"


# -- zoom ----------------------------------------------------------------------------------------


def test_zoom_blacks_out_blocked_windows(tool_rig: GreenRig) -> None:
    log = tool_rig.tmp / "secret.log"
    secret = tool_rig.launch(color_app("Secret Zoom", RED, log, size="200x150", pos="700,300"), log)
    region = {"x": secret["x"] + 20, "y": secret["y"] + 20, "width": 50, "height": 40}
    result = ok(tool_rig, "zoom", {**region, "scale": 2})
    assert result.structured_content["masked_windows"] == 1
    assert close_to(image_of(result).getpixel((50, 40)), (0, 0, 0))


def test_the_screen_resource_blacks_out_blocked_windows(tool_rig: GreenRig) -> None:
    """screen://current read by a real MCP client: the blocked window is black, its neighbour shows."""
    log = tool_rig.tmp / "secret-screen.log"
    secret = tool_rig.launch(color_app("Secret Screen", RED, log, size="200x150", pos="950,500"), log)
    app = tool_rig.app_geometry()

    async def read_screen(client: Client) -> Any:
        return (await client.read_resource("screen://current")).contents[0]

    content = tool_rig.rig.session(read_screen)
    screen = Image.open(io.BytesIO(base64.b64decode(content.blob))).convert("RGB")
    assert content.mime_type == "image/png" and screen.size == (1280, 800)
    assert close_to(screen.getpixel((secret["x"] + 100, secret["y"] + 75)), (0, 0, 0))
    assert close_to(screen.getpixel((app["x"] + 50, app["y"] + 50)), rgb(GREEN))


def test_zoom_refuses_bad_regions(tool_rig: GreenRig) -> None:
    for arguments, code in [
        ({"x": 0, "y": 0, "width": 10, "height": 10, "scale": 1}, "INVALID_ARGUMENT"),
        ({"x": 0, "y": 0, "width": 10, "height": 10, "scale": 9}, "INVALID_ARGUMENT"),
        ({"x": 1270, "y": 0, "width": 20, "height": 10, "scale": 2}, "INVALID_REGION"),
        ({"x": 0, "y": 0, "width": 1280, "height": 800, "scale": 4}, "INVALID_REGION"),
    ]:
        assert error_of(tool_rig.rig.call("zoom", arguments))["code"] == code, arguments
