"""Capture benchmark: ``screenshot_screen`` in process and over MCP/HTTP against peer servers'
per-capture cost: spawning ``import -window root png:-`` and ``xwd -root | convert``. (The
encoders at the limit, over MCP stdio, are in ``scripts/bench stdio``: :mod:`deskrig.bench.stdio`.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from deskrig.bench.over_http import over_http
from deskrig.bench.stats import (
    Row,
    Timing,
    measure,
    measure_async,
    print_table,
)
from deskrig.config import load_settings
from deskrig.desktop import open_desktop
from deskrig.identity import ClientRef
from deskrig.rig import Rig, RigOptions
from deskrig.server import DeskrigServer
from deskrig.serving import build_server
from deskrig.tools import CallInfo

SIZES = ("1280x800", "1920x1080")
#: A busy, realistic desktop to encode; xterm when GTK's demo is not installed.
DEMO_APP = ["gtk3-widget-factory"] if shutil.which("gtk3-widget-factory") else ["xterm"]


def screenshot_call(
    server: DeskrigServer, arguments: dict[str, Any], tool: str = "screenshot_screen"
) -> Callable[[], Awaitable[None]]:
    """A screenshot tool's handler called directly: capture, mask, encode, fit; no protocol."""
    spec = server.tools[tool]
    validated = spec.input_model.model_validate(arguments)

    async def call() -> None:
        result = await spec.handler(server.services, CallInfo(ClientRef("bench")), validated)
        assert result.images

    return call


def in_process(server: DeskrigServer, arguments: dict[str, Any], name: str, runs: int) -> Timing:
    return anyio.run(measure_async, name, screenshot_call(server, arguments), runs)


def peer_capture(command: str, env: dict[str, str]) -> Callable[[], None]:
    """A peer's per-capture cost: ``command`` run through the shell, PNG on its stdout."""

    def run() -> None:
        out = subprocess.run(command, shell=True, env=env, capture_output=True, check=True)
        assert out.stdout[:4] == b"\x89PNG"

    return run


def peer(name: str, command: str, env: dict[str, str], runs: int) -> Timing:
    return measure(name, peer_capture(command, env), runs)


def _over_http(server: DeskrigServer, arguments: dict[str, Any], name: str, runs: int) -> Timing:
    return over_http(server, "screenshot_screen", arguments, name, runs)


def _fresh_captures(size: str, runs: int) -> list[Row]:
    rows: list[Row] = []
    with Rig(RigOptions(size=size, app=DEMO_APP, a11y=False)) as rig:
        env = {**os.environ, **rig.env}
        imagemagick = peer(
            f"peer: import -window root png:- ({size})", "import -window root png:-", env, runs
        )
        xwd = peer(
            f"peer: xwd -root | convert ({size})", "xwd -root -silent | convert xwd:- png:-", env, runs
        )
        rows += [Row(imagemagick), Row(xwd, imagemagick)]
        # The damage cache is off: every capture grabs and encodes anew.
        settings = load_settings(env={}, overrides={"reuse_unchanged_captures": False})
        with open_desktop("x11", rig.display) as desktop:
            server = build_server(desktop, settings)
            for fmt, target in (("png", 5.0), ("jpeg", 20.0)):
                timing = in_process(server, {"format": fmt}, f"in-process {fmt} ({size})", runs)
                rows.append(Row(timing, imagemagick, target if size == "1280x800" else None))
            for fmt in ("png", "jpeg"):
                timing = _over_http(server, {"format": fmt}, f"MCP/HTTP {fmt} ({size})", runs)
                rows.append(Row(timing, imagemagick, 4.0 if (size, fmt) == ("1280x800", "png") else None))
    return rows


def _unchanged_screen(runs: int) -> list[Row]:
    """gtk3-widget-factory animates a spinner, so an idle xterm stands for an unchanged screen."""
    with Rig(RigOptions(size="1280x800", app=["xterm"], a11y=False)) as rig:
        env = {**os.environ, **rig.env}
        imagemagick = peer("peer: import -window root png:- (xterm)", "import -window root png:-", env, runs)
        settings = load_settings(env={}, overrides={"reuse_unchanged_captures": True})
        with open_desktop("x11", rig.display) as desktop:
            server = build_server(desktop, settings)
            cached = in_process(server, {}, "in-process png, unchanged screen (xterm)", runs)
            over_http = _over_http(server, {}, "MCP/HTTP png, unchanged screen (xterm)", runs)
    return [Row(imagemagick), Row(cached, imagemagick, 50.0), Row(over_http, imagemagick)]


def run(runs: int) -> None:
    rows = [row for size in SIZES for row in _fresh_captures(size, runs)] + _unchanged_screen(runs)
    print_table(f"screenshot_screen vs peers ({DEMO_APP[0]} on screen, {runs} runs)", rows)
