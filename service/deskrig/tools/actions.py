"""What the tools that act share: the screenshot option, the :class:`ActionResult` they return
with its evidence, and polling until an effect shows."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
from pydantic import BaseModel, Field

from deskrig.capture import CaptureOptions, CaptureTarget, ScreenshotMetadata
from deskrig.model import ActionResult, ActionTarget, Effect
from deskrig.services import CallInfo, ImagePart, Services, ToolResult


class ActionOptions(BaseModel):
    include_screenshot: bool = Field(
        False, description="Attach a screenshot of the target window after the action"
    )


async def after_screenshot(
    services: Services, target: ActionTarget, wanted: bool
) -> tuple[dict[str, object] | None, list[ImagePart]]:
    if not wanted:
        return None, []
    metadata, data = await anyio.to_thread.run_sync(_capture_target, services, target)
    return metadata.model_dump(mode="json", exclude_none=True), [ImagePart(data, metadata.mime_type)]


def _capture_target(services: Services, target: ActionTarget) -> tuple[ScreenshotMetadata, bytes]:
    """Blocking, in one worker thread: the target window's pixels as it is now (the screen when
    it has gone or is minimised)."""
    window = next((w for w in services.desktop.windows() if w.id == target.window_id), None)
    if window is not None and not window.minimized:
        capture = CaptureTarget(source="window", region=window.bounds, window=window)
    else:
        capture = CaptureTarget(source="screen", region=services.desktop.screen_bounds())
    return services.capture.run(capture, CaptureOptions())


async def action_result(
    services: Services,
    call: CallInfo,
    options: ActionOptions,
    effect: Effect,
    evidence: list[str],
    **detail: object,
) -> ToolResult:
    target = call.target or ActionTarget()
    shot, images = await after_screenshot(services, target, options.include_screenshot)
    return ToolResult(
        ActionResult(effect=effect, target=target, evidence=evidence, detail=dict(detail), screenshot=shot),
        images=images,
    )


async def poll_until(
    check: Callable[[], Awaitable[bool]], timeout_s: float, interval_s: float = 0.05
) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if await check():
            return True
        if time.monotonic() >= deadline:
            return False
        await anyio.sleep(interval_s)
