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
from deskrig.model import ActionTarget, Bounds
from deskrig.observation import Observer
from deskrig.recording.moments import capture_moment
from deskrig.recording.turns import Moment
from deskrig.security import WindowBlocklist

NOTES_PID = 4242


class CountingSource:
    """An app's tree whose reads and events are counted: ``changed`` is an event arriving."""

    def __init__(self) -> None:
        self.snapshots = SnapshotStore()
        self.whole_reads = 0
        self.events = 0
        self.name = "Notes"

    async def snapshot(self, pid: int, *, max_elements: int | None = 2000, **_: Any) -> Snapshot:
        if max_elements is None or max_elements > 1:
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


def _paint(world: ScriptedDesktop, source: CountingSource) -> None:
    world.paint(_notes(world), (30, 60, 200))


def _event(world: ScriptedDesktop, source: CountingSource) -> None:
    source.changed()


def _renamed(world: ScriptedDesktop, source: CountingSource) -> None:
    source.name = "Renamed"
    source.changed()


def _move(world: ScriptedDesktop, source: CountingSource) -> None:
    world.move(_notes(world), Bounds(x=160, y=20, width=100, height=100))


def _nothing(world: ScriptedDesktop, source: CountingSource) -> None:
    pass


def _notes(world: ScriptedDesktop) -> int:
    return next(w.id for w in world.windows() if w.title == "Notes")


Change = Callable[[ScriptedDesktop, CountingSource], None]


@pytest.mark.parametrize(
    ("change", "same_image", "same_tree", "same_state_file"),
    [
        (_nothing, True, True, True),
        (_paint, False, True, True),  # the screen changed: the damage serial moved
        (_event, True, False, True),  # an event arrived, but the tree read anew holds the same
        (_renamed, True, False, False),  # an event arrived: the tree changed
        (_move, False, False, False),  # the window list is another: nothing is offered
    ],
    ids=["nothing", "screen", "event", "tree", "window moved"],
)
def test_the_after_moment_is_the_next_before_only_while_current(
    change: Change, same_image: bool, same_tree: bool, same_state_file: bool
) -> None:
    world = scripted_world()
    world.add_window("Notes", Bounds(x=150, y=10, width=100, height=100), (30, 190, 60), pid=NOTES_PID)
    observer = Observer(world.open(), WindowBlocklist([]))
    source = CountingSource()

    async def opened() -> Any:
        return source

    a11y = A11yAccess(opened)

    def target() -> ActionTarget:
        """As the target resolver hands it over: with the window list it read just now."""
        windows = observer.desktop.windows()
        notes = next(w for w in windows if w.title == "Notes")
        return ActionTarget(pid=NOTES_PID, window_id=notes.id, window_title=notes.title, windows=windows)

    async def two_turns() -> tuple[Moment, Moment]:
        after = await capture_moment(observer.observe(), a11y, target(), note_seen=True)
        change(world, source)
        aimed = target()
        before = await capture_moment(observer.observe(aimed.windows), a11y, aimed, previous=after)
        return after, before

    after, before = anyio.run(two_turns)
    assert (before.screenshot is after.screenshot) is same_image
    assert (before.tree is after.tree) is same_tree
    assert source.whole_reads == (1 if same_tree else 2)
    before_file, after_file = before.tree.json_bytes(), after.tree.json_bytes()
    assert (before_file == after_file) is same_state_file
    assert before_file is not None and (b"Renamed" in before_file) is (change is _renamed)
    image = before.screenshot.image
    assert image is not None
    colour = (30, 60, 200) if change is _paint else (30, 190, 60)
    assert image.image().getpixel((50, 50)) == colour
