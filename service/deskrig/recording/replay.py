"""Re-running a recorded trajectory: each turn's action.json, in order, through the server.

Steps go through the server's normal call path (validation, target resolution, observers), so a
replay made while recording writes turn folders of its own. An element target is re-resolved,
never taken from the recording's stale snapshot index: first by the recorded path from the app
root (role, name and position among same-named siblings at every level) in a fresh snapshot,
then, if the tree changed shape, by the element's role and name. The app is found again by the
recorded pid if it still owns a window, else by the recorded window title.

Turns whose call failed when recorded are skipped unless ``include_failed``: they changed nothing
then (and a click on a dead element fails again).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import mcp_types as types
from pydantic import BaseModel, Field

from deskrig.errors import DeskrigError, ErrorCode, tool_error
from deskrig.recording.turns import RECORDED_TOOLS, turn_name, turn_numbers

if TYPE_CHECKING:
    from deskrig.tools.base import CallInfo, Services, ToolSpec


class ToolRunner(Protocol):
    """The server, as replay sees it: its tools and its one call path."""

    tools: dict[str, ToolSpec]  # type: ignore[type-arg]

    async def call(
        self,
        spec: ToolSpec,  # type: ignore[type-arg]
        arguments: dict[str, Any],
        call: CallInfo,
    ) -> types.CallToolResult: ...


class ReplayStep(BaseModel):
    turn: str
    tool: str
    status: Literal["ok", "error", "skipped"]
    reason: str | None = Field(default=None, description="Why the step was skipped")
    element_resolved_by: Literal["path", "query"] | None = Field(
        default=None, description="How the recorded element was found again"
    )
    effect: str | None = None
    error: dict[str, Any] | None = None


class ReplayReport(BaseModel):
    dir: str
    steps: list[ReplayStep]
    succeeded: int
    failed: int
    skipped: int
    completed: bool = Field(description="False when stop_on_error ended the replay early")


def _read_actions(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    actions = []
    for number in turn_numbers(folder):
        name = turn_name(number)
        try:
            actions.append((name, json.loads((folder / name / "action.json").read_text("utf-8"))))
        except (OSError, ValueError) as exc:
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                f"{name}/action.json cannot be read: {exc}",
                details={"dir": str(folder), "turn": name},
            ) from exc
    if not actions:
        raise DeskrigError(
            ErrorCode.INVALID_PATH,
            f"{folder} holds no turn folders",
            details={"dir": str(folder)},
            remediation="Pass the output_dir of a recording (it holds turn-00001/ ...).",
        )
    return actions


def _current_pid(services: Services, action: dict[str, Any]) -> int | None:
    """Blocking: the recorded app's pid now, by the recorded pid or window title."""
    windows = services.desktop.windows()
    recorded = action.get("pid")
    if recorded is not None and any(w.pid == recorded for w in windows):
        return int(recorded)
    title = action.get("window_title")
    return next((w.pid for w in windows if title and w.title == title and w.pid is not None), None)


async def retarget(
    services: Services, action: dict[str, Any]
) -> tuple[dict[str, Any], Literal["path", "query"] | None]:
    """The recorded arguments, with an element target re-resolved against the app as it is now."""
    arguments = dict(action.get("arguments") or {})
    recorded = action.get("element")
    if not isinstance(arguments.get("element"), dict) or not isinstance(recorded, dict):
        return arguments, None
    pid = await anyio.to_thread.run_sync(_current_pid, services, action)
    path = [(step["role"], step["name"], step.get("nth", 0)) for step in recorded.get("path") or []]
    if pid is not None and path and services.a11y is not None:
        try:
            snapshot = await (await services.a11y.client()).snapshot(pid, max_elements=None)
        except DeskrigError:
            snapshot = None
        if snapshot is not None:
            match = next((e for e in snapshot.elements if [tuple(s) for s in e.path] == path), None)
            if match is not None:
                arguments["element"] = {"snapshot_id": snapshot.snapshot_id, "index": match.index}
                return arguments, "path"
    query: dict[str, Any] = {"role": recorded["role"], "name": recorded["name"]}
    if pid is not None:
        query["pid"] = pid
    arguments["element"] = query
    return arguments, "query"


async def replay(
    services: Services,
    runner: ToolRunner,
    call: CallInfo,
    folder: Path,
    *,
    delay_ms: int,
    stop_on_error: bool,
    include_failed: bool,
) -> ReplayReport:
    actions = await anyio.to_thread.run_sync(_read_actions, folder)
    steps: list[ReplayStep] = []
    completed = True
    for index, (turn, action) in enumerate(actions):
        tool = str(action.get("tool"))
        spec = runner.tools.get(tool)
        if spec is None or tool not in RECORDED_TOOLS:
            steps.append(
                ReplayStep(turn=turn, tool=tool, status="skipped", reason="not an action tool of this server")
            )
            continue
        if action.get("is_error") and not include_failed:
            steps.append(ReplayStep(turn=turn, tool=tool, status="skipped", reason="it failed when recorded"))
            continue
        if index and delay_ms:
            await anyio.sleep(delay_ms / 1000)
        arguments, resolved_by = await retarget(services, action)
        result = await runner.call(spec, arguments, call)
        error = tool_error(result)
        if error is not None:
            steps.append(
                ReplayStep(
                    turn=turn,
                    tool=tool,
                    status="error",
                    element_resolved_by=resolved_by,
                    error=error,
                )
            )
            if stop_on_error:
                completed = False
                break
        else:
            steps.append(
                ReplayStep(
                    turn=turn,
                    tool=tool,
                    status="ok",
                    element_resolved_by=resolved_by,
                    effect=(result.structured_content or {}).get("effect"),
                )
            )
    return ReplayReport(
        dir=str(folder),
        steps=steps,
        succeeded=sum(s.status == "ok" for s in steps),
        failed=sum(s.status == "error" for s in steps),
        skipped=sum(s.status == "skipped" for s in steps),
        completed=completed,
    )
