"""`rig run`'s cheaper imports (deskrig.quick_imports): each switch, in a fresh interpreter (they are
process-wide), and that what was deferred still works when it is used."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

#: Imports a rig's server start-up makes, then reports what the switches left undone.
REPORT = """
import gc, json, sys
{before}
import deskrig.http, deskrig.serving
from deskrig.errors import ErrorInfo
from fastapi.openapi.models import Schema
from mcp_types import CallToolRequestParams
report = {{
    "gc_enabled": gc.isenabled(),
    "loaded": sorted(m for m in ("mcp.client", "mcp.server.mcpserver", "httpx2") if m in sys.modules),
    "error_info_built": ErrorInfo.__pydantic_complete__,
    # Models their modules rebuild at their top level (FastAPI's OpenAPI models, four MCP types).
    "rebuilt_at_import": [Schema.__pydantic_complete__, CallToolRequestParams.__pydantic_complete__],
}}
{after}
print(json.dumps(report))
"""


FOUR_THREADS_ASK = """
import threading
got = []
barrier = threading.Barrier(4)
def ask():
    barrier.wait()
    from mcp import Client
    got.append(Client.__module__)
threads = [threading.Thread(target=ask) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
report["used"] = got
"""


def _run(before: str = "", after: str = "") -> dict[str, object]:
    code = textwrap.dedent(REPORT).format(before=before, after=after)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return report


def test_without_the_switches_every_model_is_built_and_the_sdk_fronts_load() -> None:
    report = _run()
    assert report["gc_enabled"] is True
    assert report["error_info_built"] is True
    assert report["loaded"] == ["httpx2", "mcp.client", "mcp.server.mcpserver"]
    assert report["rebuilt_at_import"] == [True, True]


def test_begin_defers_models_the_sdk_fronts_and_collection() -> None:
    report = _run(before="from deskrig import quick_imports; quick_imports.begin()")
    assert report == {
        "gc_enabled": False,
        "loaded": [],
        "error_info_built": False,
        "rebuilt_at_import": [False, False],
    }


@pytest.mark.parametrize(
    ("use", "expected"),
    [
        # A deferred model is built when first used, and works as ever.
        (
            "info = ErrorInfo(code='INVALID_ARGUMENT', message='m'); "
            "report['used'] = [ErrorInfo.__pydantic_complete__, info.model_dump(mode='json')['code']]",
            [True, "INVALID_ARGUMENT"],
        ),
        # So is one whose module rebuilt it at its top level (its forward references resolved).
        (
            "params = CallToolRequestParams.model_validate({'name': 't', 'arguments': {'a': 1}}); "
            "report['used'] = [CallToolRequestParams.__pydantic_complete__, params.name, params.arguments]",
            [True, "t", {"a": 1}],
        ),
        # A deferred package front runs its code when a name of its own is asked for.
        (
            "from mcp import Client; from mcp.server import MCPServer; "
            "report['used'] = [Client.__module__, MCPServer.__module__]",
            ["mcp.client.client", "mcp.server.mcpserver.server"],
        ),
        # Threads asking while its code runs wait for it, rather than find the name missing.
        (FOUR_THREADS_ASK, ["mcp.client.client"] * 4),
    ],
    ids=["model", "model rebuilt by its module", "package front", "package front, four threads at once"],
)
def test_what_was_deferred_works_when_used(use: str, expected: list[object]) -> None:
    report = _run(before="from deskrig import quick_imports; quick_imports.begin()", after=use)
    assert report["used"] == expected


def test_end_builds_later_models_at_once_and_collects_again_with_the_start_up_frozen() -> None:
    after = """
quick_imports.end()
from pydantic import BaseModel
class Later(BaseModel):
    x: int
class Forward(BaseModel):
    later: "Ahead"
class Ahead(BaseModel):
    y: int
Forward.model_rebuild()
report.update(later_built=Later.__pydantic_complete__, frozen=gc.get_freeze_count() > 0,
              gc_enabled=gc.isenabled(), rebuilt=Forward.__pydantic_complete__)
"""
    report = _run(before="from deskrig import quick_imports; quick_imports.begin()", after=after)
    assert report["later_built"] is True
    assert report["rebuilt"] is True
    assert report["frozen"] is True
    assert report["gc_enabled"] is True


def test_a_rigs_own_start_up_loads_neither_the_accessibility_client_nor_urllib() -> None:
    """What `rig run` imports before its first stage starts (the CLI, the rig and its stages) is
    on every cold start's critical path: the AT-SPI client (which the server loads on first use)
    and urllib.request (which nothing in a rig uses) cost it some 80 ms of CPU."""
    code = """
import json, sys
sys.argv = ["deskrig", "rig", "run"]
import deskrig.cli
deskrig.cli.build_parser()
from deskrig.rig import Rig
from deskrig.rig.x11 import x11_stages
from deskrig.rig.sway import sway_stages
print(json.dumps(sorted(m for m in ("deskrig.a11y.atspi", "urllib.request") if m in sys.modules)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


LIBRARY_LOOKUPS = """
import ctypes.util, json, subprocess
cpython_lookup = ctypes.util.find_library
runs = []
class CountingPopen(subprocess.Popen):
    def __init__(self, args, *more, **options):
        runs.append(args[0])
        super().__init__(args, *more, **options)
subprocess.Popen = CountingPopen
names = ["X11", "Xfixes", "Xrandr", "xcb", "xcb-randr", "xcb-render", "xcb-shm", "xcb-xfixes", "c"]
{switch}
found = [ctypes.util.find_library(name) for name in names]
ldconfig_runs = sum(1 for program in runs if program.endswith("ldconfig"))
expected = [cpython_lookup(name) for name in names]
print(json.dumps({{"same": found == expected, "found": len([f for f in found if f]), "ldconfig_runs": ldconfig_runs}}))
"""


@pytest.mark.parametrize(
    ("switch", "ldconfig_runs"),
    [("", 9), ("import deskrig.quick_imports as q; q.begin()", 1)],
    ids=["as ever", "begun"],
)
def test_shared_libraries_are_found_as_ever_from_one_ldconfig_run(switch: str, ldconfig_runs: int) -> None:
    """Opening an X11 desktop looks up eight libraries (mss): CPython runs `ldconfig -p` for each."""
    code = textwrap.dedent(LIBRARY_LOOKUPS).format(switch=switch)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "same": True,
        "found": 9,
        "ldconfig_runs": ldconfig_runs,
    }
