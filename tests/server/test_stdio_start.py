"""`deskrig serve --stdio` answers `initialize` before it loads the desktop, tools and codecs
(MCP clients spawn stdio servers on every start), then serves them as before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from tests.desktop.conftest import held_display_number, start_xvfb, stop_process
from tests.polling import poll

from deskrig.bench.reliability_rig import INITIALIZE
from deskrig.bench.stdio import StdioPeer, initialize
from deskrig.errors import tool_error
from deskrig.serving import tool_list_cache

#: Runs the CLI as `deskrig serve --stdio` starts (its start-up switches on) and, on SIGUSR1, writes
#: to the file named by argv[1] its sys.modules and collector state now and as they were when the
#: warm-up began (once `initialize` was answered).
HARNESS = """
import gc, json, os, signal, sys
from pathlib import Path
report = Path(sys.argv[1])
sys.argv = ["deskrig", "serve", "--stdio"]
from deskrig.cli import main
from deskrig.serving import DeferredServer
at_warm_up = {}
def dump(*_):
    now = {"modules": sorted(sys.modules), "collecting": gc.isenabled(), "frozen": gc.get_freeze_count()}
    Path(f"{report}.part").write_text(json.dumps({"now": now, "at_warm_up": at_warm_up}))
    os.replace(f"{report}.part", report)
signal.signal(signal.SIGUSR1, dump)
warm_up = DeferredServer.warm_up
def noted_warm_up(self):
    if not at_warm_up:
        at_warm_up.update(modules=sorted(sys.modules), collecting=gc.isenabled())
    warm_up(self)
DeferredServer.warm_up = noted_warm_up
sys.exit(main(sys.argv[1:]))
"""
#: What may not be imported before `initialize` is answered: backends, accessibility, codecs,
#: recording, FastAPI, the tool modules and the server proper. (The MCP SDK itself imports starlette
#: and uvicorn: they are part of the floor.)
HEAVY = (
    "Xlib",
    "mss",
    "i3ipc",
    "pywayland",
    "dbus_fast",
    "PIL",
    "numpy",
    "fastapi",
    "deskrig.desktop.",
    "deskrig.a11y",
    "deskrig.imaging",
    "deskrig.capture",
    "deskrig.recording",
    "deskrig.tools",
    "deskrig.server",
    "deskrig.http",
)


#: Runs the CLI with the tool list's cache written a second late, as on a loaded machine.
SLOW_CACHE_WRITE = """
import sys, time
from deskrig import serving
write = serving._cache_tools
def late_write(*args):
    time.sleep(1)
    write(*args)
serving._cache_tools = late_write
from deskrig.cli import main
sys.exit(main(["serve", "--stdio"]))
"""


def process_report(peer: StdioPeer, report: Path) -> dict[str, dict[str, Any]]:
    """What the harness has loaded, and whether it collects garbage: now, and when the warm-up
    began (empty before)."""
    report.unlink(missing_ok=True)
    peer.proc.send_signal(signal.SIGUSR1)
    text = poll("the process report", lambda: report.read_text() if report.exists() else None)
    states: dict[str, dict[str, Any]] = json.loads(text)
    return states


def heavy(modules: list[str]) -> list[str]:
    return [name for name in modules if any(_within(name, heavy) for heavy in HEAVY)]


def _within(name: str, heavy: str) -> bool:
    """``name`` is ``heavy`` or a module in it (``deskrig.server_flags`` is not ``deskrig.server``);
    a ``heavy`` ending in a dot is a package's modules."""
    return name.startswith(heavy) if heavy.endswith(".") else name == heavy or name.startswith(heavy + ".")


def call(peer: StdioPeer, request_id: int, tool: str) -> types.CallToolResult:
    answer = peer.request(request_id, "tools/call", {"name": tool, "arguments": {}})
    return types.CallToolResult.model_validate(answer["result"])


def test_initialize_is_answered_before_anything_heavy_is_imported(tmp_path: Path) -> None:
    xvfb, display = start_xvfb(tmp_path)
    report = tmp_path / "modules.json"
    env = {**os.environ, "DISPLAY": display, "HOME": str(tmp_path)}
    peer = StdioPeer([sys.executable, "-c", HARNESS, str(report)], env)
    try:
        answer = initialize(peer)
        assert answer["result"]["serverInfo"]["name"] == "deskrig"
        assert answer["result"]["capabilities"]["tools"] is not None
        at_warm_up = poll("the warm-up", lambda: process_report(peer, report)["at_warm_up"])
        assert heavy(at_warm_up["modules"]) == []
        # The start-up's cheaper imports (deskrig.quick_imports) were on: no garbage collection,
        # and the SDK's client, which its package's __init__ imports, left out.
        assert not at_warm_up["collecting"] and "mcp.client" not in at_warm_up["modules"]

        tools = peer.request(2, "tools/list")["result"]["tools"]
        assert {"screenshot_screen", "list_windows", "click"} <= {tool["name"] for tool in tools}
        shot = call(peer, 3, "screenshot_screen")
        assert not shot.is_error and shot.content[0].type == "image", shot
        # The check sees what the server loads: after a screenshot, the backend and the codecs;
        # not what only input needs (loaded when a call needs it).
        now = process_report(peer, report)["now"]
        loaded = now["modules"]
        # They are off once the server is built, with the start-up's objects frozen.
        assert now["collecting"] and now["frozen"] > 0
        assert {"Xlib", "PIL", "deskrig.tools", "deskrig.desktop.x11"} <= set(heavy(loaded))
        assert "deskrig.desktop.x11_input" not in loaded
        # Resources and logging are advertised by the front and answered by the server behind it.
        assert {"resources", "logging"} <= set(answer["result"]["capabilities"])
        resources = peer.request(4, "resources/list")["result"]["resources"]
        assert "screen://current" in {resource["uri"] for resource in resources}
        assert peer.request(5, "logging/setLevel", {"level": "warning"})["result"] == {}
        assert peer.close() == 0
        assert peer.proc.stdout is not None and peer.proc.stdout.read() == b""
    finally:
        stop_process(peer.proc)
        stop_process(xvfb)


def test_the_warm_up_begins_once_initialize_is_answered(tmp_path: Path) -> None:
    """Not on the client's next message: the client here sends nothing after ``initialize``, and
    the desktop is opened (its backend loaded) all the same."""
    xvfb, display = start_xvfb(tmp_path)
    report = tmp_path / "modules.json"
    env = {**os.environ, "DISPLAY": display, "HOME": str(tmp_path)}
    peer = StdioPeer([sys.executable, "-c", HARNESS, str(report)], env)
    try:
        assert (
            peer.request(1, "initialize", INITIALIZE["params"])["result"]["serverInfo"]["name"] == "deskrig"
        )
        poll(
            "the desktop opened",
            lambda: "deskrig.desktop.x11" in process_report(peer, report)["now"]["modules"],
        )
        assert peer.close() == 0
    finally:
        stop_process(peer.proc)
        stop_process(xvfb)


def test_a_display_that_cannot_be_opened_answers_each_call_until_it_can(tmp_path: Path) -> None:
    """The server answers initialize and tools/list; a tool call gets the structured error (and the
    log says why once); started later, the display is opened by the next call."""
    with held_display_number() as number:  # no server answers it until the test starts one
        display = f":{number}"
        env = {**os.environ, "DISPLAY": display, "HOME": str(tmp_path)}
        peer = StdioPeer([sys.executable, "-m", "deskrig.cli", "serve", "--stdio"], env)
        xvfb: subprocess.Popen[bytes] | None = None
        try:
            initialize(peer)
            assert peer.request(2, "tools/list")["result"]["tools"]
            for request_id in (3, 4):
                refused = call(peer, request_id, "list_windows")
                assert refused.is_error and refused.structured_content is None
                error = tool_error(refused)
                assert error is not None and error["code"] == "DISPLAY_NOT_FOUND" and error["remediation"]
            xvfb = subprocess.Popen(
                ["Xvfb", display, "-nolisten", "tcp", "-nolisten", "local", "-screen", "0", "640x480x24"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            windows = poll("the display opened", lambda: call(peer, 5, "list_windows").structured_content)
            assert windows["windows"] == []
            assert peer.close() == 0
            log = peer.stderr()
            assert log.count("cannot open the desktop: DISPLAY_NOT_FOUND") >= 2 and "Traceback" not in log
        finally:
            stop_process(peer.proc)
            if xvfb is not None:
                stop_process(xvfb)


def test_tools_list_is_kept_for_the_next_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first start builds the tools' schemas and keeps them; the next answers tools/list from
    the file named for its code (as built, by the server proper too); an unreadable one is rebuilt."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = {**os.environ, "DISPLAY": ":0"}

    def tools_listed() -> list[dict[str, object]]:
        peer = StdioPeer([sys.executable, "-m", "deskrig.cli", "serve", "--stdio"], env)
        try:
            initialize(peer)
            listed: list[dict[str, object]] = peer.request(2, "tools/list")["result"]["tools"]
            assert peer.close() == 0
            return listed
        finally:
            stop_process(peer.proc)

    built = tools_listed()
    (cache,) = (tmp_path / "cache" / "deskrig").iterdir()
    assert cache == tool_list_cache("default")
    expected = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in described()]
    assert built == expected
    assert tools_listed() == built  # from the cache
    kept = json.loads(cache.read_text())
    kept[0]["description"] = "as kept"
    cache.write_text(json.dumps(kept))
    assert tools_listed()[0]["description"] == "as kept"  # it is what tools/list answers
    cache.write_text("{not json")
    assert tools_listed() == built
    assert json.loads(cache.read_text())[0]["description"] == built[0]["description"]


def test_the_tool_list_is_kept_by_a_start_that_ends_after_listing(tmp_path: Path) -> None:
    """A client that lists the tools and closes at once still leaves the list for the next start:
    tools/list is answered once the list is kept, not before it is written (the process could end
    first: under load the test of the cache found no file)."""
    env = {**os.environ, "DISPLAY": ":0", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    peer = StdioPeer([sys.executable, "-c", SLOW_CACHE_WRITE], env)
    try:
        initialize(peer)
        assert peer.request(2, "tools/list")["result"]["tools"]
        assert peer.close() == 0
    finally:
        stop_process(peer.proc)
    assert [path.name for path in (tmp_path / "cache" / "deskrig").iterdir()] == [
        tool_list_cache("default").name
    ]


def described() -> list[types.Tool]:
    from deskrig.server import describe_tools
    from deskrig.tools import tools_for_profile

    return describe_tools(tools_for_profile("default"))
