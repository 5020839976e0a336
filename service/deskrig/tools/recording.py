"""Recording tools: turn folders (and video) of this session's actions, and replaying them."""

from __future__ import annotations

import anyio
from pydantic import BaseModel, Field

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.recording.registry import registry_of
from deskrig.recording.replay import ReplayReport, replay
from deskrig.recording.session import RecordingState
from deskrig.services import CallInfo, Services, ToolResult, ToolSpec


class StartRecordingInput(BaseModel):
    output_dir: str = Field(description="Absolute or ~-rooted folder inside an allowed directory")
    record_video: bool = Field(
        default=False, description="Also capture the display to <output_dir>/recording.mp4"
    )


class NoArguments(BaseModel):
    pass


class StopRecordingResult(RecordingState):
    last_video_path: str | None = Field(description="The finalised mp4, if video was recorded")


class RecordingStateResult(RecordingState):
    boot: RecordingState | None = Field(
        default=None,
        description="The rig's recording from boot (--record), which takes every client's actions",
    )


class ReplayInput(BaseModel):
    dir: str = Field(description="A recording's output_dir (holding turn-00001/ ...)")
    delay_ms: int = Field(default=100, ge=0, le=10_000, description="Pause between steps")
    stop_on_error: bool = Field(default=True, description="Stop at the first step that fails")
    include_failed: bool = Field(
        default=False, description="Also re-run turns whose call failed when recorded"
    )
    accept_unsigned: bool = Field(
        default=False,
        description="Also run turns this rig cannot verify it recorded (unsigned, changed, or signed with "
        "another key). Only for a folder you trust: each step does whatever its action.json says",
    )


async def start_recording(services: Services, call: CallInfo, args: StartRecordingInput) -> ToolResult:
    registry = registry_of(services)
    output_dir = services.security.paths.resolve(args.output_dir)
    await registry.settle()  # a restart's previous recording gets its last turn
    state = await anyio.to_thread.run_sync(
        registry.start_session, call.client_id, output_dir, args.record_video
    )
    return ToolResult(state)


async def stop_recording(services: Services, call: CallInfo, args: NoArguments) -> ToolResult:
    registry = registry_of(services)
    await registry.settle()  # the last action's "after"
    state = await anyio.to_thread.run_sync(registry.stop_session, call.client_id)
    return ToolResult(StopRecordingResult(**state.model_dump(), last_video_path=state.video_path))


async def get_recording_state(services: Services, call: CallInfo, args: NoArguments) -> ToolResult:
    registry = registry_of(services)
    boot = registry.boot.state() if registry.boot is not None else None
    state = await registry.settled_session_state(call.client_id)
    return ToolResult(RecordingStateResult(**state.model_dump(), boot=boot))


async def replay_trajectory(services: Services, call: CallInfo, args: ReplayInput) -> ToolResult:
    registry = registry_of(services)
    if call.via is None:
        raise DeskrigError(ErrorCode.RECORDING_ERROR, "replay needs the MCP server's call path")
    folder = services.security.paths.resolve(args.dir)
    report: ReplayReport = await replay(
        services,
        call.via,
        call,
        folder,
        signer=registry.signer,
        delay_ms=args.delay_ms,
        stop_on_error=args.stop_on_error,
        include_failed=args.include_failed,
        accept_unsigned=args.accept_unsigned,
    )
    return ToolResult(report)


TOOLS: list[ToolSpec] = [  # type: ignore[type-arg]
    ToolSpec(
        "start_recording",
        "Record this session's actions (click, double_click, right_click, drag, move_cursor, scroll, "
        "type_text, press_key, hotkey, set_value, key_down, key_up, mouse_down, mouse_up, set_clipboard) "
        "as turn folders turn-00001/, turn-00002/ ... under "
        "output_dir: before/after screenshots and accessibility state, action.json, evidence.json, "
        "app_state.json, screenshot.png and, for clicks, click.png. Numbering starts at 1; in a folder "
        "that already holds turns it continues after the last one (nothing is overwritten, and a taken "
        "recording.mp4 makes the video recording-2.mp4). Calling it again while recording stops the "
        "current recording and starts the new one. Only this MCP session's actions are recorded, and "
        "the recording ends when this session disconnects. On a rig recording from boot (--record), "
        "this recording is an extra one of your own beside it; it may not use the same folder.",
        StartRecordingInput,
        RecordingState,
        start_recording,
        read_only=False,
        recorded=False,
        destructive=False,
        title="Start recording",
    ),
    ToolSpec(
        "stop_recording",
        "Stop this session's recording: write the pending turns, finalise the mp4, and return the "
        "turn count, output_dir and last_video_path. Calling it again returns the same.",
        NoArguments,
        StopRecordingResult,
        stop_recording,
        read_only=False,
        recorded=False,
        destructive=False,
        title="Stop recording",
    ),
    ToolSpec(
        "get_recording_state",
        "This session's recording: {recording, output_dir, turns, video_path, last_error}; boot "
        "describes the rig's recording from boot, if any.",
        NoArguments,
        RecordingStateResult,
        get_recording_state,
        title="Get the recording state",
    ),
    ToolSpec(
        "replay_trajectory",
        "Re-run a recorded trajectory, turn by turn. Element targets are found again by their recorded "
        "path of roles and names (then by role and name), never by stale indices. Turns that failed "
        "when recorded are skipped unless include_failed. Runs only turns this rig signed when it "
        "recorded them (an HMAC in each turn's action.sig): a folder with an unsigned or changed turn is "
        "refused (SECURITY_ERROR) before any step runs, unless accept_unsigned. Writes turn folders of its own while this "
        "session records. Reports each step's outcome.",
        ReplayInput,
        ReplayReport,
        replay_trajectory,
        read_only=False,
        recorded=False,
        title="Replay a recorded trajectory",
    ),
]
