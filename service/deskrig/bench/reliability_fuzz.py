"""Fuzz: schema-generated calls of every tool of every profile, plus deliberately invalid ones.

Arguments come from each tool's ``inputSchema`` as the server lists it (hypothesis-jsonschema),
so the fuzz follows the schemas as they change. A share of calls is made invalid on purpose (a
required property dropped, a property of the wrong type, an unknown property). Tools that could
harm the machine or the rig itself are kept safe by narrowing their schemas (``SAFETY``), and the
report says how.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import anyio
from mcp import Client
from pydantic import BaseModel, Field

from deskrig.bench.reliability_calls import call_all
from deskrig.bench.reliability_outcomes import TALLY_HEADER, Outcome, Tally, table, tally_row, write
from deskrig.bench.reliability_rig import GTK_APP, BenchRig
from deskrig.client import connect

#: Upper bounds on durations, by property name wherever it appears (``$defs`` included), so that
#: a valid call ends well inside the hang timeout.
DURATION_CAPS = {"timeout_ms": 2000, "stable_ms": 500, "delay_ms": 5, "duration_ms": 200, "steps": 20}


def _pid_max() -> int:
    return int(Path("/proc/sys/kernel/pid_max").read_text())


def safety_overrides() -> dict[str, dict[str, Any]]:
    """tool -> property -> the narrowed schema it is fuzzed with (and why, in SAFETY_NOTES)."""
    unused_pids = _pid_max() + 1
    return {
        "launch_app": {"command": {"enum": [["true"], ["sleep", "3"]]}},
        "kill_app": {"pid": {"type": "integer", "minimum": unused_pids, "maximum": unused_pids + 10_000}},
        "start_recording": {"record_video": {"const": False}},
        "type_text": {"text": {"type": "string", "maxLength": 64}},
    }


SAFETY_NOTES = [
    "launch_app runs only `true` or `sleep 3` (env, cwd and the rest are fuzzed)",
    "kill_app only targets pids above pid_max: no live process is ever signalled",
    "start_recording never records video (no ffmpeg per call)",
    "type_text is at most 64 characters; durations are capped: "
    + ", ".join(f"{k} <= {v}" for k, v in DURATION_CAPS.items()),
    "ids (pid, window_id, snapshot_id, index ...), coordinates and key names are biased towards "
    "real ones (never a key that quits the app)",
    "everything runs in a throwaway rig on loopback with its own HOME as the allowed directory",
]

#: Values of each JSON type, for wrong-type mutations.
WRONG_VALUES: list[Any] = [None, "fuzz", 2**70, -1, 1.5, True, [], {"x": 1}]


class Planned(NamedTuple):
    tool: str
    arguments: dict[str, Any]
    invalid: bool


class FuzzFinding(BaseModel):
    """A call that hit a defect (internal error, hang, protocol error), to reproduce."""

    tool: str
    arguments: str
    outcome: str


class FuzzReport(BaseModel):
    per_tool: dict[str, Tally] = Field(default_factory=dict)
    valid: Tally = Field(default_factory=Tally)
    invalid: Tally = Field(default_factory=Tally)
    ungenerated: dict[str, str] = Field(default_factory=dict)
    findings: list[FuzzFinding] = Field(default_factory=list)
    #: Calls not made because the time budget ran out.
    unmade: int = 0
    app_alive_after: bool = True
    rig_ready_after: bool = True

    @property
    def total(self) -> Tally:
        total = Tally()
        total.merge(self.valid)
        total.merge(self.invalid)
        return total


def narrowed(
    tool: str, schema: dict[str, Any], real: dict[str, list[Any]] | None = None, filled: bool = False
) -> dict[str, Any]:
    """``schema`` biased towards ``real`` values, with the tool's safety overrides and the
    duration caps applied, and no properties it does not declare (invalid calls add those).
    ``filled`` requires every declared property: most tools need a few together (x and y, an
    element's snapshot_id and index), which optional properties drawn one by one seldom give."""
    schema = copy.deepcopy(schema)
    _bias(schema, real or {})
    _close(schema, filled)
    for name, override in safety_overrides().get(tool, {}).items():
        schema.setdefault("properties", {})[name] = override
    _cap_durations(schema)
    return schema


def _object_schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every object schema with declared properties inside ``node`` (``$defs`` included)."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            yield node
        for value in list(node.values()):
            yield from _object_schemas(value)
    elif isinstance(node, list):
        for item in node:
            yield from _object_schemas(item)


def _close(schema: dict[str, Any], filled: bool) -> None:
    for node in _object_schemas(schema):
        node.setdefault("additionalProperties", False)
        if filled:
            node["required"] = list(node["properties"])


def _bias(schema: dict[str, Any], real: dict[str, list[Any]]) -> None:
    """Let each property named in ``real`` also take one of its real values: random ids rarely
    name a live window, app or snapshot, and the calls would stop at the lookup."""
    for node in list(_object_schemas(schema)):
        properties = node["properties"]
        for name, prop in properties.items():
            if real.get(name):
                properties[name] = {"anyOf": [prop, {"enum": real[name]}]}


async def real_values(client: Client, app_pid: int) -> dict[str, list[Any]]:
    """Ids of the rig's live app, its windows and one accessibility snapshot, points and sizes on
    its screen, and key names, by property name."""
    windows = await client.call_tool("list_windows", {})
    state = await client.call_tool("get_app_state", {"pid": app_pid, "max_elements": 50})
    window_ids = [w["id"] for w in (windows.structured_content or {}).get("windows", [])]
    snapshot = state.structured_content or {}
    return {
        "pid": [app_pid],
        "window_id": window_ids,
        "windowId": [str(i) for i in window_ids],
        "snapshot_id": [snapshot["snapshot_id"]] if "snapshot_id" in snapshot else [],
        "index": list(range(min(20, snapshot.get("element_count", 0)))),
        "display_id": [0, 1],
        **{axis: [5, 300, 640] for axis in ("x", "y", "from_x", "from_y", "to_x", "to_y")},
        **{side: [10, 200] for side in ("width", "height")},
        # Key names a random string never spells (none that quits the app, like ctrl+q).
        "key": ["Return", "a", "F5", "shift+Tab"],
        "keys": [["ctrl", "a"], ["shift", "Tab"]],
        "modifiers": [[], ["shift"], ["ctrl"]],
    }


def _cap_durations(schema: dict[str, Any]) -> None:
    for node in _object_schemas(schema):
        for name, prop in node["properties"].items():
            if name in DURATION_CAPS and isinstance(prop, dict) and prop.get("type") == "integer":
                prop["maximum"] = min(prop.get("maximum", DURATION_CAPS[name]), DURATION_CAPS[name])


def generate(schema: dict[str, Any], count: int, seed: int) -> list[dict[str, Any]]:
    """Up to ``count`` argument objects valid against ``schema``, reproducibly from ``seed``."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed
    from hypothesis_jsonschema import from_schema

    examples: list[dict[str, Any]] = []

    @with_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(from_schema(schema))
    def collect(value: dict[str, Any]) -> None:
        examples.append(value)

    collect()
    return examples[:count]


def invalidate(arguments: dict[str, Any], schema: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A copy of ``arguments`` made invalid: a required property dropped, a wrong type, or an unknown key."""
    broken = dict(arguments)
    required = [name for name in schema.get("required", []) if name in broken]
    properties = list(schema.get("properties", {}))
    choice = rng.choice(["drop", "wrong_type", "unknown"])
    if choice == "drop" and required:
        del broken[rng.choice(required)]
    elif choice in ("drop", "wrong_type") and properties:
        name = rng.choice(properties)
        current = broken.get(name)
        broken[name] = rng.choice([v for v in WRONG_VALUES if type(v) is not type(current)])
    else:
        broken["unexpected_property"] = rng.choice(WRONG_VALUES)
    return broken


async def _plan(
    rig: BenchRig, calls: int, invalid_share: float, seed: int, report: FuzzReport
) -> list[Planned]:
    """The fuzz's calls, shuffled: generated per tool from its listed schema, some made invalid."""
    rng = random.Random(seed)
    async with connect(rig.url, rig.token) as client:
        listed = (await client.list_tools()).tools
        real = await real_values(client, rig.app_pid())
    per_tool = max(1, calls // len(listed))
    plan: list[Planned] = []
    for index, tool in enumerate(listed):
        schema = narrowed(tool.name, tool.input_schema, real)
        filled = narrowed(tool.name, tool.input_schema, real, filled=True)
        try:
            valid = await anyio.to_thread.run_sync(generate, schema, (per_tool + 1) // 2, seed + index)
            if per_tool > 1:
                valid += await anyio.to_thread.run_sync(generate, filled, per_tool // 2, seed + index)
        except Exception as exc:  # hypothesis-jsonschema cannot handle every schema construct
            report.ungenerated[tool.name] = f"{type(exc).__name__}: {exc}"[:200]
            valid = [{}]
        # A small schema has fewer distinct examples than the share; repeat them to fill it.
        for arguments in itertools.islice(itertools.cycle(valid), per_tool):
            bad = rng.random() < invalid_share
            plan.append(Planned(tool.name, invalidate(arguments, schema, rng) if bad else arguments, bad))
    rng.shuffle(plan)
    return plan


async def _fuzz(
    rig: BenchRig, calls: int, invalid_share: float, timeout: float, seed: int, budget: float
) -> FuzzReport:
    report = FuzzReport()
    plan = await _plan(rig, calls, invalid_share, seed, report)
    deadline = time.monotonic() + budget

    def record(index: int, outcome: Outcome) -> None:
        planned = plan[index]
        report.per_tool.setdefault(planned.tool, Tally()).add(outcome)
        (report.invalid if planned.invalid else report.valid).add(outcome)
        if outcome.kind in ("hang", "protocol") or outcome.code == "INTERNAL_ERROR":
            finding = f"{outcome.kind} {outcome.code or ''}".strip()
            arguments = json.dumps(planned.arguments)[:300]
            report.findings.append(FuzzFinding(tool=planned.tool, arguments=arguments, outcome=finding))

    report.unmade = await call_all(rig, [(p.tool, p.arguments) for p in plan], timeout, record, deadline)
    app = rig.pids().get("app")
    report.app_alive_after = app is not None and Path(f"/proc/{app}").exists()
    answer = rig.readyz()
    report.rig_ready_after = answer is not None and answer[0] == 200
    return report


def run_fuzz(
    calls: int, invalid_share: float, timeout: float, seed: int, budget: float = 600.0
) -> FuzzReport:
    """Fuzz every tool of the ``all`` profile (default and acs together) in a fresh GTK rig."""
    rig = BenchRig(app=GTK_APP, extra=["--tool-profile", "all", "--max-captures-per-minute", "100000"])
    try:
        rig.start()
        return anyio.run(_fuzz, rig, calls, invalid_share, timeout, seed, budget)
    finally:
        rig.cleanup()


def print_fuzz(report: FuzzReport) -> None:
    total = report.total
    title = f"reliability: fuzz ({total.calls} schema-generated calls, {report.invalid.calls} made invalid)"
    rows = [tally_row(tool, tally) for tool, tally in sorted(report.per_tool.items())]
    rows += [
        tally_row("**valid arguments**", report.valid),
        tally_row("**invalid arguments**", report.invalid),
        tally_row("**all**", total),
    ]
    table(title, TALLY_HEADER, rows)
    answered = report.invalid.errors_by_code.get("INVALID_ARGUMENT", 0)
    lines = [
        f"\n- invalid arguments answered INVALID_ARGUMENT: {answered} of {report.invalid.calls}",
        f"- error results a strict client rejects (not matching the tool's outputSchema): "
        f"{total.errors_off_schema} of {total.calls - total.ok - total.hangs - sum(total.protocol_errors.values())}",
        f"- the rig's app alive after the fuzz: {'yes' if report.app_alive_after else 'NO'}; "
        f"/readyz 200 after: {'yes' if report.rig_ready_after else 'NO'}",
        "- kept safe: " + "; ".join(SAFETY_NOTES),
    ]
    lines += [f"- no arguments generated for {tool}: {why}" for tool, why in report.ungenerated.items()]
    if report.unmade:
        lines.append(f"- stopped at the time budget: {report.unmade} calls not made")
    if report.findings:
        lines.append(f"- defects to reproduce ({len(report.findings)}, first 20):")
        lines += [f"  - `{f.tool}` {f.arguments} -> {f.outcome}" for f in report.findings[:20]]
    write("\n".join(lines) + "\n")
