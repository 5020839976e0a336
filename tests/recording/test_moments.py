"""One observation per turn, across turns: an action's after-moment is the next action's
before-moment only while it is still current. Logic tests on the scripted desktop (its damage serial
moves with every change) and an accessibility source fake that counts its reads and its events; the
same over MCP against a real rig is in test_turns.py."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from tests.recording.helpers import scripted_world

from deskrig.a11y.access import A11yAccess
from deskrig.a11y.snapshots import SnapshotStore
from deskrig.a11y.tree import Element, ElementRef, Snapshot
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import ActionTarget, Bounds
from deskrig.observation import Observer
from deskrig.recording import moments
from deskrig.recording.moments import capture_moment, grab_image
from deskrig.recording.turns import Moment, TurnImage, unavailable
from deskrig.security import WindowBlocklist

NOTES_PID = 4242
NOTES_BOUNDS = Bounds(x=150, y=10, width=100, height=100)
NOTES_COLOUR = (30, 190, 60)
DRAFT_COLOUR = (200, 180, 40)


class CountingSource:
    """An app's tree whose reads and events are counted: ``changed`` is an event arriving. An app
    that ``renames_in_flight`` has renamed its window and sent the event, which arrives only once
    the app is synced with (a one-element read syncs, as the real mirror's read does)."""

    def __init__(self) -> None:
        self.snapshots = SnapshotStore()
        self.whole_reads = 0
        self.events = 0
        self.name = "Notes"
        self.renames_in_flight = False
        #: Whole reads to fail before one succeeds (the app did not answer).
        self.failing_reads = 0

    async def snapshot(self, pid: int, *, max_elements: int | None = 2000, **_: Any) -> Snapshot:
        if self.renames_in_flight:
            self.renames_in_flight = False
            _renamed(self)
        if max_elements is None or max_elements > 1:
            if self.failing_reads:
                self.failing_reads -= 1
                raise DeskrigError(ErrorCode.A11Y_UNAVAILABLE, "the app did not answer")
            self.whole_reads += 1
        element = Element(
            index=0,
            parent=None,
            depth=0,
            role="frame",
            name=self.name,
            states=["showing"],
            ref=ElementRef("a", "/0"),
        )
        return Snapshot(
            snapshot_id=f"{self.whole_reads:012x}",
            pid=pid,
            app_name="notes",
            bus_name="a",
            created_at=datetime.now(UTC),
            fetch_ms=0.1,
            truncated=False,
            elements=[element],
        )

    def events_version(self) -> tuple[int, int]:
        return (1, self.events)

    def changed(self) -> None:
        self.events += 1


def _renamed(source: CountingSource) -> None:
    source.name = "Renamed"
    source.changed()


def _paint(world: ScriptedDesktop, source: CountingSource) -> None:
    world.paint(_notes(world), (30, 60, 200))


def _event(world: ScriptedDesktop, source: CountingSource) -> None:
    source.changed()


def _rename(world: ScriptedDesktop, source: CountingSource) -> None:
    _renamed(source)


def _rename_in_flight(world: ScriptedDesktop, source: CountingSource) -> None:
    source.renames_in_flight = True


def _move(world: ScriptedDesktop, source: CountingSource) -> None:
    world.move(_notes(world), Bounds(x=160, y=20, width=100, height=100))


def _nothing(world: ScriptedDesktop, source: CountingSource) -> None:
    pass


def _notes(world: ScriptedDesktop) -> int:
    return next(w.id for w in world.windows() if w.title == "Notes" and w.pid == NOTES_PID)


Change = Callable[[ScriptedDesktop, CountingSource], None]


class Scene:
    """The scripted desktop with the Notes app's window, its counting tree, and the recorder's
    captures of it."""

    def __init__(self) -> None:
        self.world = scripted_world()
        self.world.add_window("Notes", NOTES_BOUNDS, NOTES_COLOUR, pid=NOTES_PID)
        self.world.add_window(
            "Draft", Bounds(x=150, y=130, width=100, height=100), DRAFT_COLOUR, pid=NOTES_PID
        )
        self.observer = Observer(self.world.open(), WindowBlocklist([]))
        self.source = CountingSource()

        async def opened() -> Any:
            return self.source

        self.a11y = A11yAccess(opened)

    def target(self, title: str = "Notes") -> ActionTarget:
        """As the target resolver hands it over: with the window list it read just now."""
        windows = self.observer.desktop.windows()
        window = next(w for w in windows if w.title == title and w.pid == NOTES_PID)
        return ActionTarget(pid=NOTES_PID, window_id=window.id, window_title=window.title, windows=windows)

    async def after(self) -> Moment:
        """An action's after-moment, noting what it was taken under."""
        return await capture_moment(self.observer.observe(), self.a11y, self.target(), note_seen=True)

    async def before(self, after: Moment, title: str = "Notes") -> Moment:
        """The next action's before-moment, offered ``after``."""
        aimed = self.target(title)
        return await capture_moment(self.observer.observe(aimed.windows), self.a11y, aimed, previous=after)


@pytest.mark.parametrize(
    ("change", "same_image", "same_tree", "same_state_file"),
    [
        (_nothing, True, True, True),
        (_paint, False, True, True),  # the screen changed: the damage serial moved
        (_event, True, False, True),  # an event arrived, but the tree read anew holds the same
        (_rename, True, False, False),  # an event arrived: the tree changed
        (_rename_in_flight, True, False, False),  # its event arrives when the app is synced with
        (_move, False, False, False),  # the window list is another: nothing is offered
    ],
    ids=["nothing", "screen", "event", "tree", "event in flight", "window moved"],
)
def test_the_after_moment_is_the_next_before_only_while_current(
    change: Change, same_image: bool, same_tree: bool, same_state_file: bool
) -> None:
    scene = Scene()

    async def two_turns() -> tuple[Moment, Moment]:
        after = await scene.after()
        change(scene.world, scene.source)
        return after, await scene.before(after)

    after, before = anyio.run(two_turns)
    assert (before.screenshot is after.screenshot) is same_image
    assert (before.tree is after.tree) is same_tree
    assert scene.source.whole_reads == (1 if same_tree else 2)
    before_file, after_file = before.tree.json_bytes(), after.tree.json_bytes()
    assert (before_file == after_file) is same_state_file
    renamed = change in (_rename, _rename_in_flight)
    assert before_file is not None and (b"Renamed" in before_file) is renamed
    image = before.screenshot.image
    assert image is not None
    colour = (30, 60, 200) if change is _paint else NOTES_COLOUR
    assert image.image().getpixel((50, 50)) == colour


def test_an_after_moment_is_offered_to_an_action_on_the_same_window_only() -> None:
    """The next action aims at another window of the same app, nothing having changed: its
    before-moment is that window's, taken anew."""
    scene = Scene()

    async def two_turns() -> tuple[Moment, Moment]:
        after = await scene.after()
        return after, await scene.before(after, "Draft")

    after, before = anyio.run(two_turns)
    assert before.screenshot is not after.screenshot and before.tree is not after.tree
    image = before.screenshot.image
    assert image is not None and image.image().getpixel((50, 50)) == DRAFT_COLOUR


@pytest.mark.parametrize("failed", ["screenshot", "tree"])
def test_a_part_the_after_moment_failed_to_take_is_taken_anew(
    failed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing changed between two actions, but the after-moment's screenshot (or tree) could not
    be had: the next before-moment does not carry the failure over, it takes that part anew."""
    scene = Scene()
    if failed == "tree":
        scene.source.failing_reads = 1
    else:
        grabs = [lambda *_: TurnImage(None, unavailable("capture_failed", "the grab failed")), grab_image]
        monkeypatch.setattr(moments, "grab_image", lambda *args: grabs.pop(0)(*args))

    async def two_turns() -> tuple[Moment, Moment]:
        after = await scene.after()
        return after, await scene.before(after)

    after, before = anyio.run(two_turns)
    assert (after.screenshot.image is None) is (failed == "screenshot")
    assert (after.tree.data is None) is (failed == "tree")
    assert before.screenshot.image is not None and before.tree.data is not None


class LateSerial:
    """The scripted desktop's damage serial as X11's DAMAGE reports it: a change may move the
    serial once more at the read after the first one that saw it. Counts the reads."""

    def __init__(self, world: ScriptedDesktop) -> None:
        self._read = world.damage_serial
        self._last = self._read()
        self._owed = False
        self.serial = 0
        self.reads = 0

    def __call__(self) -> int:
        now = self._read()
        self.reads += 1
        if self._owed or now != self._last:
            self.serial += 1
        self._owed, self._last = now != self._last, now
        return self.serial


def test_a_screen_change_reported_late_still_offers_the_after_screenshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The after-moment of an action that changed the screen reads the damage serial twice before
    its grab, so a serial that moves once more after a change does not make every after-moment
    look changed to the next action: with nothing changed since, the next before-moment grabs
    nothing."""
    scene = Scene()
    serial = LateSerial(scene.world)
    monkeypatch.setattr(scene.world, "damage_serial", serial)
    grabs: list[TurnImage] = []

    def counted(*args: Any) -> TurnImage:
        grabs.append(grab_image(*args))
        return grabs[-1]

    monkeypatch.setattr(moments, "grab_image", counted)

    async def two_turns() -> tuple[Moment, Moment]:
        _paint(scene.world, scene.source)  # the action's change
        after = await scene.after()
        return after, await scene.before(after)

    after, before = anyio.run(two_turns)
    assert serial.reads >= 3, "the serial was read before the grab and by the next action"
    assert len(grabs) == 1 and before.screenshot is after.screenshot
