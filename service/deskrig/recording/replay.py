"""Re-running a recorded trajectory: each turn's action.json, in order, through the server.

Steps go through the server's normal call path (validation, target resolution, observers), so a
replay made while recording writes turn folders of its own. An element target is re-resolved,
never taken from the recording's stale snapshot index: first by the recorded path from the app
root (role, name and position among same-named siblings at every level) in a fresh snapshot,
then, if the tree changed shape, by the element's role and name. The app is found again by the
recorded pid if it still owns a window, else by the recorded window title.

Turns whose call failed when recorded are skipped unless ``include_failed``: they changed nothing
then (and a click on a dead element fails again).

Only turns this rig can verify it recorded run (their ``action.sig`` checks with its recording key,
see :mod:`deskrig.recording.signing`): the app under test may be able to write the folder. One turn
that does not check refuses the whole replay before any step runs, unless ``accept_unsigned``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel, Field, ValidationError

from deskrig.errors import DeskrigError, ErrorCode, invalid_argument, tool_error
from deskrig.model import ElementSummary
from deskrig.recording.signing import SIGNATURE_FILE, TurnFileError, TurnSigner, read_turn_file, recorded_mac
from deskrig.recording.turns import turn_name, turn_numbers

if TYPE_CHECKING:
    from deskrig.services import CallInfo, CallPath, Services


class RecordedAction(BaseModel):
    """What replay reads from a turn's action.json (it holds more)."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    is_error: bool = False
    pid: int | None = None
    window_title: str | None = None
    element: ElementSummary | None = None


@dataclass(frozen=True)
class RecordedTurn:
    name: str
    action: RecordedAction
    #: Why the turn's signature does not check, or None when this rig recorded it.
    unverified: str | None


class ReplayStep(BaseModel):
    turn: str
    tool: str
    status: Literal["ok", "error", "skipped"]
    verified: bool = Field(description="Its signature shows this rig (or one sharing its key) recorded it")
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
    unverified: int = Field(description="Steps run or skipped without a valid signature (accept_unsigned)")
    completed: bool = Field(description="False when stop_on_error ended the replay early")


def _read_signed(folder: Path, number: int, signer: TurnSigner) -> tuple[str, bytes, str | None]:
    """A turn's name, the bytes of its action.json, and why its signature does not check (or None)."""
    name = turn_name(number)
    details = {"dir": str(folder), "turn": name}
    try:
        raw = read_turn_file(folder / name / "action.json")
        signature = read_turn_file(folder / name / SIGNATURE_FILE)
    except TurnFileError as exc:
        raise DeskrigError(ErrorCode.INVALID_ARGUMENT, f"{name}: {exc}", details=details) from exc
    if raw is None:
        raise DeskrigError(ErrorCode.INVALID_ARGUMENT, f"{name} has no action.json", details=details)
    return name, raw, signer.problem(name, recorded_mac(folder / turn_name(number - 1)), raw, signature)


def read_recording(folder: Path, signer: TurnSigner, accept_unsigned: bool) -> list[RecordedTurn]:
    """Blocking: every turn of a recording, checked; SECURITY_ERROR if one does not verify.

    The bytes checked are the bytes parsed: nothing can swap a file in between.
    """
    signed = [_read_signed(folder, number, signer) for number in turn_numbers(folder)]
    if not signed:
        raise DeskrigError(
            ErrorCode.INVALID_PATH,
            f"{folder} holds no turn folders",
            details={"dir": str(folder)},
            remediation="Pass the output_dir of a recording (it holds turn-00001/ ...).",
        )
    unverified = [{"turn": name, "problem": problem} for name, _, problem in signed if problem]
    if unverified and not accept_unsigned:
        raise DeskrigError(
            ErrorCode.SECURITY_ERROR,
            f"{len(unverified)} of {len(signed)} turns in {folder} cannot be verified as recorded by this "
            f"rig ({unverified[0]['turn']}: {unverified[0]['problem']}); nothing was replayed",
            details={"dir": str(folder), "unverified": unverified},
            remediation="Replay recordings this rig made, or give rigs the same recording_key_file "
            "(DESKRIG_RECORDING_KEY_FILE). Pass accept_unsigned=true only for a folder you trust: "
            "every step does what its action.json says.",
        )
    turns = []
    for name, raw, problem in signed:
        try:
            turns.append(RecordedTurn(name, RecordedAction.model_validate_json(raw), problem))
        except ValidationError as exc:
            raise invalid_argument(
                exc, f"{name}/action.json is not a recorded action", "(action.json)"
            ) from exc
    return turns


def _current_pid(services: Services, action: RecordedAction) -> int | None:
    """Blocking: the recorded app's pid now, by the recorded pid or window title."""
    windows = services.desktop.windows()
    if action.pid is not None and any(w.pid == action.pid for w in windows):
        return action.pid
    title = action.window_title
    return next((w.pid for w in windows if title and w.title == title and w.pid is not None), None)


async def retarget(
    services: Services, action: RecordedAction
) -> tuple[dict[str, Any], Literal["path", "query"] | None]:
    """The recorded arguments, with an element target re-resolved against the app as it is now."""
    arguments = dict(action.arguments)
    recorded = action.element
    if not isinstance(arguments.get("element"), dict) or recorded is None:
        return arguments, None
    pid = await anyio.to_thread.run_sync(_current_pid, services, action)
    path = [(step.role, step.name, step.nth) for step in recorded.path]
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
    query: dict[str, Any] = {"role": recorded.role, "name": recorded.name}
    if pid is not None:
        query["pid"] = pid
    arguments["element"] = query
    return arguments, "query"


async def replay(
    services: Services,
    runner: CallPath,
    call: CallInfo,
    folder: Path,
    *,
    signer: TurnSigner,
    delay_ms: int,
    stop_on_error: bool,
    include_failed: bool,
    accept_unsigned: bool,
) -> ReplayReport:
    recording = await anyio.to_thread.run_sync(read_recording, folder, signer, accept_unsigned)
    steps: list[ReplayStep] = []
    completed = True
    for index, recorded in enumerate(recording):
        turn, action, tool = recorded.name, recorded.action, recorded.action.tool
        verified = recorded.unverified is None
        spec = runner.tools.get(tool)
        if spec is None or not spec.recorded:
            reason = "not an action tool of this server"
            steps.append(ReplayStep(turn=turn, tool=tool, status="skipped", verified=verified, reason=reason))
            continue
        if action.is_error and not include_failed:
            reason = "it failed when recorded"
            steps.append(ReplayStep(turn=turn, tool=tool, status="skipped", verified=verified, reason=reason))
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
                    verified=verified,
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
                    verified=verified,
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
        unverified=sum(not s.verified for s in steps),
        completed=completed,
    )
