"""Rigs and MCP sessions for the recording tests.

Recordings belong to an MCP *session*, so these tests talk the handshake-era protocol
(``mode="legacy"``), whose Streamable HTTP sessions carry an ``Mcp-Session-Id``; the stateless
2026-07-28 protocol has no session to scope a recording to.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client
from tests.server.rigproc import FormRig, RigProcess, start_form

from deskrig.client import connect
from deskrig.errors import tool_error

T = TypeVar("T")


class Session:
    """One MCP session (legacy protocol) with a rig."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> Any:
        return await self.client.call_tool(tool, arguments or {})

    async def ok(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.call(tool, arguments)
        assert not result.is_error, (tool, result.structured_content)
        return result.structured_content  # type: ignore[no-any-return]

    async def error(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        error = tool_error(await self.call(tool, arguments))
        assert error is not None, tool
        return error


@contextlib.asynccontextmanager
async def session(rig: RigProcess) -> AsyncIterator[Session]:
    """A session that ends (HTTP DELETE) when the block exits."""
    async with connect(rig.url, rig.token) as client:
        yield Session(client)


def in_session(rig: RigProcess, body: Callable[[Session], Awaitable[T]]) -> T:
    """Run ``await body(session)`` in one MCP session (sync, for tests)."""

    async def run() -> T:
        async with session(rig) as opened:
            return await body(opened)

    return anyio.run(run)


@pytest.fixture(scope="package")
def form_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FormRig]:
    form = start_form(tmp_path_factory.mktemp("rec-form"), "gtk_form", "GTK Form")
    yield form
    form.rig.stop()


def load_json(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def ffprobe_duration(path: Path) -> float:
    """Decode the whole file (errors fail) and return its duration in seconds."""
    decoded = subprocess.run(
        ["ffmpeg", "-v", "error", "-xerror", "-i", str(path), "-f", "null", "-"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert decoded.returncode == 0, decoded.stderr
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return float(probe.stdout.strip())


def ffmpeg_writing(path: Path) -> list[int]:
    """Pids of ffmpeg processes writing ``path``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"ffmpeg") and str(path).encode() in argv:
            pids.append(int(proc.name))
    return pids


def mp4_boxes(path: Path) -> list[str]:
    """Top-level box types of an mp4, in order (a cleanly closed fragmented mp4 ends with mfra)."""
    data = path.read_bytes()
    boxes, offset = [], 0
    while offset + 8 <= len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        boxes.append(data[offset + 4 : offset + 8].decode("latin-1"))
        if size < 8:
            break
        offset += size
    return boxes
