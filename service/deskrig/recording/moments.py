"""Capturing the target of an action at one instant: its screenshot and its accessibility state.

Both come from one :class:`~deskrig.observation.Observation`, the path every screenshot tool takes
too: the windows are listed once per instant (before an action: not at all, the target resolver's
list is reused) and blocked windows are blacked out where every image is. The screenshot is the
target window as it shows (the full screen when there is no target window or it closed), grabbed
in a worker thread while the accessibility snapshot is read on the event loop, from the live
mirror the tools read too. Both are kept as taken: converting the grab, encoding the PNGs and
turning the snapshot into JSON happen on the recording's writer thread, after the reply. Failures
never raise: they become evidence.

**One observation per turn, across turns.** An action's "after" is often still what the next
action would see before it runs. The after-moment notes what it was taken under (:class:`Seen`):
the window list, the desktop's damage serial read before its pixels were grabbed, and the
accessibility events version read before its tree was read. The next action of the same target
takes over its screenshot when the window list is the same and the damage serial has not moved
since (nothing on screen changed), and its tree when the window list is the same and no
accessibility event has arrived since, once the app has been synced with (every event it sent
before now has arrived): the same objects, so their PNG and JSON are encoded once and written to
both turns. Anything else is captured anew; a tree read anew that holds what the offered one
held (events that changed nothing, such as an animation's bounds) is written as that one was,
the comparison made on the writer thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from deskrig.a11y.access import A11yAccess
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import ActionTarget, WindowInfo
from deskrig.observation import Observation
from deskrig.recording.turns import Moment, Seen, TurnImage, TurnTree, captured, unavailable

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


def target_key(target: ActionTarget | None) -> tuple[int | None, int | None]:
    """What a moment is a moment of: the target's (pid, window_id)."""
    return (target.pid, target.window_id) if target is not None else (None, None)


@dataclass(frozen=True)
class _Offer:
    """The moment taken last, offered to the one taken now, and what it was taken under."""

    moment: Moment
    seen: Seen


def _offered(previous: Moment | None, target: ActionTarget | None) -> _Offer | None:
    """``previous``, when it may still be current for ``target``: the same target, and the window
    list the target resolver read just now is the one it was taken with."""
    seen = previous.seen if previous is not None else None
    if previous is None or seen is None or target is None:
        return None
    return (
        _Offer(previous, seen)
        if seen.target == target_key(target) and seen.windows == target.windows
        else None
    )


def _current_image(offer: _Offer | None, observation: Observation) -> TurnImage | None:
    """Blocking: the offered moment's screenshot if nothing on screen changed since it was grabbed."""
    if offer is None or offer.moment.screenshot.image is None or offer.seen.damage_serial is None:
        return None
    return offer.moment.screenshot if _damage_serial(observation) == offer.seen.damage_serial else None


async def _current_tree(offer: _Offer | None, a11y: A11yAccess | None, pid: int | None) -> TurnTree | None:
    """The offered moment's tree if no accessibility event arrived since it was read. The app is
    synced with only when none has arrived yet: with a busy app the fresh read does that."""
    if offer is None or offer.moment.tree.data is None or offer.seen.events is None:
        return None
    for sync in (False, True):
        if await _events_version(a11y, pid, sync=sync) != offer.seen.events:
            return None
    return offer.moment.tree


async def _events_version(a11y: A11yAccess | None, pid: int | None, sync: bool) -> tuple[int, int] | None:
    """The accessibility events version; with ``sync``, once every event the app with ``pid`` sent
    before now has arrived (a one-element read of its mirror syncs with it). None when unknown."""
    if a11y is None or pid is None:
        return None
    try:
        client = await a11y.client()
        if sync:
            await client.snapshot(pid, max_elements=1, store=False)
    except DeskrigError:
        return None
    return client.events_version()


async def capture_moment(
    observation: Observation,
    a11y: A11yAccess | None,
    target: ActionTarget | None,
    previous: Moment | None = None,
    note_seen: bool = False,
) -> Moment:
    """Screenshot (worker thread) and accessibility state (event loop), taken together; the parts
    of ``previous`` (the moment taken last) still current are taken over instead (see the module
    docstring). ``note_seen``: note what the moment was taken under, to offer it to the next action."""
    offer = _offered(previous, target)
    pid = target.pid if target is not None else None
    note_seen = note_seen and target is not None
    images: list[TurnImage] = []
    under: list[tuple[list[WindowInfo], int | None] | None] = []

    def grab() -> None:
        current = _current_image(offer, observation)
        if current is not None:
            images.append(current)
            return
        if note_seen:
            under.append(_taken_under(observation))
        images.append(grab_image(observation, target))

    async def read() -> TurnTree:
        current = await _current_tree(offer, a11y, pid)
        if current is not None:
            return current
        tree = await read_tree(observation, a11y, target)
        if offer is not None:
            tree.same_as = offer.moment.tree  # the writer compares them (see TurnTree.same_as)
        return tree

    events = await _events_version(a11y, pid, sync=False) if note_seen else None
    async with anyio.create_task_group() as group:
        group.start_soon(anyio.to_thread.run_sync, grab)
        tree = await read()
    seen = Seen(target_key(target), *under[0], events) if under and under[0] is not None else None
    return Moment(images[0], tree, seen)


def _taken_under(observation: Observation) -> tuple[list[WindowInfo], int | None] | None:
    """Blocking: the window list and the damage serial, read just before a grab; None when the
    window list cannot be read (the grab then says why)."""
    try:
        windows = observation.windows
    except DeskrigError:
        return None
    # The first read after a change may move the serial once more at the next read, which would
    # make every after-moment look changed to the next action: read twice.
    _damage_serial(observation)
    return windows, _damage_serial(observation)


def _damage_serial(observation: Observation) -> int | None:
    """The desktop's damage serial; None when it cannot be read (the capture then says why)."""
    try:
        return observation.desktop.damage_serial()
    except DeskrigError:
        return None
