"""A server that stops right after an action still writes the action's turn: its "after"
observation waits a little (or for the next action), and the server's stop takes it at once
rather than letting the end of its event loop cancel it.

The server runs under a harness that makes that wait longer than any stop takes: at the real
50 ms, the stop is mostly slower than the wait, and a lost turn would show only now and then."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.desktop.conftest import start_xvfb, stop_process
from tests.recording.conftest import load_json
from tests.server.rigproc import RigProcess, connect_stateless

from deskrig.bench.stdio import StdioPeer, initialize

MOVE = {"name": "move_cursor", "arguments": {"x": 10, "y": 20}}
#: The CLI, with the "after" observation's wait longer than a stop takes.
HARNESS = """
import sys
from deskrig.recording import registry
registry.AFTER_CAPTURE_DELAY = 30.0
from deskrig.cli import main
sys.exit(main(sys.argv[1:]))
"""
DESKRIG = [sys.executable, "-c", HARNESS]


def over_stdio(env: dict[str, str], record: Path, tmp_path: Path) -> None:
    """An action, then SIGTERM (what an MCP client sends a stdio server that does not exit when
    its stdin ends): the stdio session's end settles the recorder."""
    peer = StdioPeer([*DESKRIG, "serve", "--stdio", "--record", str(record)], env)
    try:
        initialize(peer)
        answer = peer.request(2, "tools/call", MOVE)
        assert not answer["result"].get("isError"), answer
        peer.proc.send_signal(signal.SIGTERM)
        assert peer.proc.wait(timeout=30) == 0
    finally:
        stop_process(peer.proc)


def over_http(env: dict[str, str], record: Path, tmp_path: Path) -> None:
    """An action from a stateless client (no session whose end settles it), then SIGTERM."""
    rig = RigProcess(app=[], serve=True, extra=["--record", str(record)], env=env, command=DESKRIG)
    rig.start(tmp_path)

    async def act() -> None:
        assert rig.token is not None
        async with connect_stateless(rig.url, rig.token) as client:
            result = await client.call_tool(MOVE["name"], MOVE["arguments"])
            assert not result.is_error, result

    try:
        anyio.run(act)
    finally:
        assert rig.stop() == 0


@pytest.mark.parametrize("act_then_stop", [over_stdio, over_http], ids=["stdio", "http"])
def test_the_last_actions_turn_is_written_when_the_server_stops_at_once(
    act_then_stop: Callable[[dict[str, str], Path, Path], Any], tmp_path: Path
) -> None:
    xvfb, display = start_xvfb(tmp_path)
    record = tmp_path / "turns"
    try:
        act_then_stop({**os.environ, "DISPLAY": display, "HOME": str(tmp_path)}, record, tmp_path)
    finally:
        stop_process(xvfb)
    (turn,) = sorted(p for p in record.glob("turn-*") if p.is_dir())
    assert load_json(turn / "action.json")["tool"] == "move_cursor"
    assert (turn / "after.png").is_file()
