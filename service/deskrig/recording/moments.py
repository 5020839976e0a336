"""Capturing the target of an action at one instant: its screenshot and its accessibility state.

Both come from one :class:`~deskrig.observation.Observation`, the path every screenshot tool takes
too: the windows are listed once per instant (before an action: not at all, the target resolver's
list is reused) and blocked windows are blacked out where every image is. The screenshot is the
target window as it shows (the full screen when there is no target window or it closed), grabbed
in a worker thread while the accessibility snapshot is read on the event loop, from the live
mirror the tools read too. Both are kept as taken: converting the grab, encoding the PNGs and
turning the snapshot into JSON happen on the recording's writer thread, after the reply. Failures
never raise: they become evidence.
"""

from __future__ import annotations

import anyio

from deskrig.a11y.access import A11yAccess
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import ActionTarget
from deskrig.observation import Observation
from deskrig.recording.turns import Moment, TurnImage, TurnTree, captured, unavailable

_STATE_CLASSIFICATION = {
    ErrorCode.SECURITY_ERROR: "privacy_suppressed",
    ErrorCode.A11Y_UNAVAILABLE: "a11y_unavailable",
    ErrorCode.APP_NOT_RUNNING: "app_not_running",
}
_BLOCKED = "the target window is blocked"


def grab_image(observation: Observation, target: ActionTarget | None) -> TurnImage:
    """Blocking: the target window's pixels, else the whole screen (blocked windows blacked out)."""
    try:
        note = None
        if target is not None and target.window_id is not None:
            window = observation.window(target.window_id)
            if observation.is_blocked(window.title if window else target.window_title):
                return TurnImage(None, unavailable("privacy_suppressed", _BLOCKED))
            if window is not None:
                try:
                    pixels = observation.window_as_seen(window)
                except DeskrigError as exc:
                    if exc.code != ErrorCode.WINDOW_NOT_FOUND:
                        raise
                else:
                    return TurnImage(
                        pixels.frame, captured(source="window", region=pixels.region, pii_masking=pixels.pii)
                    )
            # The action closed the window: the screen shows what became of it.
            note = f"window {target.window_id} is gone; the full screen was captured"
        screen = observation.screen()
        masked = screen.masked_windows or None
        return TurnImage(
            screen.frame,
            captured(
                source="screen",
                region=screen.region,
                masked_windows=masked,
                message=note,
                pii_masking=screen.pii,
            ),
        )
    except DeskrigError as exc:
        return TurnImage(None, unavailable("capture_failed", exc.message))


async def read_tree(
    observation: Observation, a11y: A11yAccess | None, target: ActionTarget | None
) -> TurnTree:
    """The accessibility snapshot of the target's app, read from the live mirror that ``a11y`` (the
    tools' own) keeps. It is not stored, so recording never evicts the snapshots an agent names
    elements by."""
    if target is not None and observation.is_blocked(target.window_title):
        return TurnTree(None, unavailable("privacy_suppressed", _BLOCKED))
    if target is None or target.pid is None:
        return TurnTree(None, unavailable("no_target_pid"))
    if a11y is None:
        return TurnTree(None, unavailable("a11y_unavailable", "this desktop has no accessibility bus"))
    try:
        snapshot, masked = await observation.app_tree(await a11y.client(), target.pid, store=False)
    except DeskrigError as exc:
        return TurnTree(None, unavailable(_STATE_CLASSIFICATION.get(exc.code, "capture_failed"), exc.message))
    return TurnTree(snapshot, captured(pii_masking=masked))


async def capture_moment(
    observation: Observation, a11y: A11yAccess | None, target: ActionTarget | None
) -> Moment:
    """Screenshot (worker thread) and accessibility state (event loop), taken together."""
    images: list[TurnImage] = []

    async def grab() -> None:
        images.append(await anyio.to_thread.run_sync(grab_image, observation, target))

    async with anyio.create_task_group() as group:
        group.start_soon(grab)
        tree = await read_tree(observation, a11y, target)
    return Moment(images[0], tree)
