"""Capturing the target of an action at one instant: its screenshot and its accessibility state.

The screenshot is the target window's own pixels (the full screen, blocked windows blacked out,
when there is no target window or it closed), grabbed in a worker thread while the accessibility
snapshot is read on the event loop. Failures never raise: they become evidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from PIL import Image

from deskrig import imaging
from deskrig.a11y.access import A11yAccess
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import ActionTarget, Bounds, WindowInfo
from deskrig.recording.turns import AppState, Frame, Moment, captured, unavailable

if TYPE_CHECKING:
    from deskrig.services import Services

_STATE_CLASSIFICATION = {
    ErrorCode.A11Y_UNAVAILABLE: "a11y_unavailable",
    ErrorCode.APP_NOT_RUNNING: "app_not_running",
}


def _blocked(services: Services, title: str | None) -> bool:
    return title is not None and services.security.blocklist.is_blocked(title)


def _screen_frame(services: Services, note: str | None) -> Frame:
    desktop = services.desktop
    region = desktop.screen_bounds()
    image = desktop.capture(region)
    masked = 0
    blocklist = services.security.blocklist
    if blocklist.active:
        rects = [w.frame_bounds or w.bounds for w in blocklist.blocked(desktop.windows())]
        rects = [r for r in rects if r.intersection(region) is not None]
        image = imaging.black_out(image, rects, origin=(region.x, region.y))
        masked = len(rects)
    return Frame(image, captured(source="screen", region=region, masked_windows=masked or None, message=note))


def _window_pixels(
    services: Services, window: WindowInfo, windows: list[WindowInfo]
) -> tuple[Image.Image, Bounds]:
    """The window's pixels and where they lie on the screen. An unobscured window is cut from the
    screen (a shared-memory grab of a few ms; only its on-screen part, which is what was seen);
    a covered one is read from the compositor's copy of it, whole (tens of ms)."""
    desktop = services.desktop
    above = [w for w in windows if w.z_order < window.z_order and not w.minimized]
    covered = any((w.frame_bounds or w.bounds).intersection(window.bounds) for w in above)
    visible = desktop.screen_bounds().intersection(window.bounds)
    if not covered and visible is not None:
        return desktop.capture(visible), visible
    image = desktop.capture_window(window.id)
    return image, Bounds(x=window.bounds.x, y=window.bounds.y, width=image.width, height=image.height)


def grab_frame(services: Services, target: ActionTarget | None) -> Frame:
    """Blocking: the target window's pixels, else the whole screen."""
    desktop = services.desktop
    try:
        note = None
        if target is not None and target.window_id is not None:
            windows = desktop.windows()
            window = next((w for w in windows if w.id == target.window_id), None)
            if _blocked(services, window.title if window else target.window_title):
                return Frame(None, unavailable("privacy_suppressed", "the target window is blocked"))
            if window is not None:
                try:
                    image, region = _window_pixels(services, window, windows)
                except DeskrigError as exc:
                    if exc.code != ErrorCode.WINDOW_NOT_FOUND:
                        raise
                else:
                    return Frame(image, captured(source="window", region=region))
            # The action closed the window: the screen shows what became of it.
            note = f"window {target.window_id} is gone; the full screen was captured"
        return _screen_frame(services, note)
    except DeskrigError as exc:
        return Frame(None, unavailable("capture_failed", exc.message))


async def read_state(services: Services, a11y: A11yAccess | None, target: ActionTarget | None) -> AppState:
    """The accessibility snapshot of the target's app, as JSON data plus its text rendering.

    ``a11y`` is the recorder's own client: its snapshots go to its own store, so recording never
    evicts the snapshots an agent names elements by.
    """
    if target is not None and _blocked(services, target.window_title):
        return AppState(None, unavailable("privacy_suppressed", "the target window is blocked"))
    if target is None or target.pid is None:
        return AppState(None, unavailable("no_target_pid"))
    if a11y is None:
        return AppState(None, unavailable("a11y_unavailable", "this desktop has no accessibility bus"))
    try:
        snapshot = await (await a11y.client()).snapshot(target.pid)
    except DeskrigError as exc:
        return AppState(None, unavailable(_STATE_CLASSIFICATION.get(exc.code, "capture_failed"), exc.message))
    data: dict[str, Any] = snapshot.model_dump(mode="json")
    data["text"] = snapshot.render_text()
    return AppState(data, captured())


async def capture_moment(services: Services, a11y: A11yAccess | None, target: ActionTarget | None) -> Moment:
    """Screenshot (worker thread) and accessibility state (event loop), taken together."""
    frames: list[Frame] = []

    async def grab() -> None:
        frames.append(await anyio.to_thread.run_sync(grab_frame, services, target))

    async with anyio.create_task_group() as group:
        group.start_soon(grab)
        state = await read_state(services, a11y, target)
    return Moment(frames[0], state)
