"""Rigs and MCP sessions for the recording tests.

Recordings belong to an MCP *session*, so these tests talk the handshake-era protocol
(``mode="legacy"``), whose Streamable HTTP sessions carry an ``Mcp-Session-Id``; the stateless
2026-07-28 protocol has no session to scope a recording to.

``recording_rig`` is the GTK form behind a server over HTTP on each ``backend``: X11 a rig, sway
a headless sway (tests/sway/swayproc.py) with the form under native Wayland, its own session bus
and AT-SPI, and ``deskrig serve --backend sway`` attached to it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client
from PIL import Image
from tests.a11y.conftest import AT_SPI_BUS_LAUNCHER, start_session_bus
from tests.desktop.conftest import SCREEN, stop_process
from tests.polling import poll
from tests.rigprocs import SYSTEM_PYTHON
from tests.server.rigproc import APPS, FormRig, RigProcess, start_form
from tests.sway.swayproc import start_sway

from deskrig.a11y.launcher_probe import LauncherWatch
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


@pytest.fixture
def recording_rig(backend: str, request: pytest.FixtureRequest) -> FormRig:
    """The GTK form behind an MCP server over HTTP, on ``backend``."""
    return request.getfixturevalue("form_rig" if backend == "x11" else "sway_form_rig")  # type: ignore[no-any-return]


@pytest.fixture(scope="package")
def sway_form_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FormRig]:
    tmp = tmp_path_factory.mktemp("rec-sway-form")
    with contextlib.ExitStack() as stack:
        sway = start_sway(tmp, SCREEN)
        stack.callback(sway.stop)
        # HOME: the server's is the one RigProcess gives it (its allowed folder is tmp/home/deskrig).
        env = {
            k: v for k, v in os.environ.items() if k not in ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "HOME")
        }
        dbus, address = start_session_bus(env)  # not in sway's runtime dir: that is sway's user's
        env |= sway.env
        stack.callback(stop_process, dbus)
        env |= {"DBUS_SESSION_BUS_ADDRESS": address, "GDK_BACKEND": "wayland", "GSETTINGS_BACKEND": "memory"}
        at_spi = subprocess.Popen(
            [AT_SPI_BUS_LAUNCHER, "--launch-immediately"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        stack.callback(stop_process, at_spi)
        with LauncherWatch(address) as watch:
            poll("at-spi-bus-launcher to take org.a11y.Bus", watch.address)
            watch.enable()
        log = tmp / "form.log"
        with (tmp / "form.stderr").open("wb") as stderr:
            app = subprocess.Popen(
                [SYSTEM_PYTHON, str(APPS / "gtk_form.py"), "--title", "Sway Form", "--log", str(log)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        stack.callback(stop_process, app)
        rig = RigProcess(app=[], serve=True, extra=["--backend", "sway"], env=env).start(tmp)
        stack.callback(rig.stop)
        form = FormRig(rig, log, tmp, window_relative=True)
        assert form.pid == app.pid
        yield form


def load_json(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def ffprobe_duration(path: Path) -> float:
    """Decode the whole file (any error or warning fails) and return its duration in seconds.

    The video has a variable frame rate, so every frame is decoded at its own time (passthrough, in
    the file's time base): rounded to the frame rate ffmpeg guesses from the first few frames, two
    frames 10 ms apart later on can share a timestamp, a warning about the decoding's own output,
    not about the file (seen once under load on sway)."""
    decoded = subprocess.run(
        [
            *("ffmpeg", "-v", "error", "-xerror", "-i", str(path)),
            *("-fps_mode", "passthrough", "-enc_time_base", "-1", "-f", "null", "-"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert decoded.returncode == 0 and not decoded.stderr.strip(), decoded.stderr
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return float(probe.stdout.strip())


def video_frames(path: Path) -> int:
    """How many frames the video's first stream decodes to."""
    count = ["-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames"]
    probe = subprocess.run(
        ["ffprobe", "-v", "error", *count, "-of", "csv=p=0", str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return int(probe.stdout.strip())


def decoded_frames(path: Path) -> list[Image.Image]:
    """Every frame of the video, decoded by the ffmpeg CLI to RGB."""
    size_of = ["-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "csv=p=0"]
    probe = subprocess.run(
        ["ffprobe", "-v", "error", *size_of, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    width, height = (int(n) for n in probe.stdout.strip().split(","))
    every_frame_as_rgb = ["-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(path), *every_frame_as_rgb],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    size = width * height * 3
    assert raw and len(raw) % size == 0, (len(raw), width, height)
    return [Image.frombytes("RGB", (width, height), raw[at : at + size]) for at in range(0, len(raw), size)]


def _processes() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, argv) of every live process."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            yield int(proc.name), (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue


def ffmpeg_writing(path: Path) -> list[int]:
    """Pids of ffmpeg processes writing ``path``."""
    return [pid for pid, argv in _processes() if argv[0].endswith(b"ffmpeg") and str(path).encode() in argv]


def feeding(pid: int) -> list[int]:
    """Pids of the processes whose stdout is the stdin of process ``pid`` (ffmpeg's screen recorder)."""

    def pipe(pid: int, fd: int) -> str | None:
        try:
            return os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            return None

    stdin = pipe(pid, 0)
    return [other for other, _ in _processes() if other != pid and stdin and pipe(other, 1) == stdin]


def video_to_keep(path: Path) -> bool:
    """Whether the mp4 ffmpeg is writing at ``path`` already holds some video that a kill must not
    lose: three fragments (a frame each at least) spanning over a second. Either alone can come
    without the other: frames come as the screen changes, so a booting app's first drawing fills
    three fragments in well under a second, and one frame held until the next heartbeat spans one."""
    return fragments_written(path) >= 3 and written_duration(path) > 1.0


def fragments_written(path: Path) -> int:
    """The fragments (moof boxes) of the mp4 ffmpeg is writing at ``path``; 0 before it has made
    the file, which it does only once it has opened its input (later than its start on a loaded
    machine)."""
    return mp4_boxes(path).count("moof") if path.exists() else 0


def written_duration(path: Path) -> float:
    """Seconds of video in the fragments of the mp4 ffmpeg is writing at ``path`` so far."""
    probe = subprocess.run(
        ["ffprobe", "-v", "quiet", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    try:  # a fragment still being written is ffprobe's to skip; an unreadable file is none yet
        return float(probe.stdout.strip())
    except ValueError:
        return 0.0


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
