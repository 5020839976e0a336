"""The mirror's targeted re-fetches against the real form fixtures, on every desktop backend
(under sway GTK is a native Wayland client): after random changes (rows added, a label renamed,
list rows scrolled out of and into view, the window moved) the mirrored tree equals a fresh whole
fetch element by element, and no change made it fetch the whole tree. Clicks, keys and the wheel
come from the desktop backend's own input, as a server's do."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tests.polling import poll
from tests.rigprocs import SYSTEM_PYTHON
from tests.toolkits import Capability, needs, not_on

from deskrig.a11y import AccessibilityClient, Snapshot
from deskrig.a11y import constants as c
from deskrig.a11y import mirror as mirror_module
from deskrig.a11y.connection import AppConnection, CallFailed, Reply, Request
from deskrig.a11y.events import ObjectEvent
from deskrig.a11y.fetch import FetchedTree
from deskrig.a11y.mirror import MIRROR_MAX_ELEMENTS, AppMirror
from deskrig.a11y.tree import Element
from deskrig.desktop import Desktop
from deskrig.model import Bounds

from .conftest import (
    APPS_DIR,
    MOVE_UNSEEN,
    STARTUP_TIMEOUT_S,
    A11yDesktop,
    FormApp,
    FormWindow,
    click,
    on_every_backend,
    scroll,
    wait_until_registered,
)

T = TypeVar("T")
Run = Callable[[Coroutine[Any, Any, T]], T]

pytestmark = needs(Capability.A11Y_TREE)
a11y_desktop = on_every_backend()

#: Changes per run; the seed is printed so that a failing sequence can be replayed.
STEPS = 12
#: A depth no form reaches: a snapshot with a depth limit is fetched whole, never mirrored.
WHOLE_DEPTH = 1000
SEED = int(os.environ.get("DESKRIG_MIRROR_SEED", "0")) or random.randrange(1, 2**31)


def described(element: Element) -> tuple[Any, ...]:
    """Everything an element says: its fields, its path and which object it is."""
    return (element.model_dump(), element.path, element.ref)


def first_difference(mirrored: list[Element], fetched: list[Element]) -> str | None:
    """Where the mirror's tree and a fetched one first differ; None when they are equal."""
    for mine, theirs in zip(mirrored, fetched, strict=False):
        if described(mine) != described(theirs):
            return f"element {mine.index}: mirror {described(mine)} != fetch {described(theirs)}"
    if len(mirrored) != len(fetched):
        return f"the mirror holds {len(mirrored)} elements, a fetch {len(fetched)}"
    return None


class Changes:
    """Changes made to the form, each returning once the app has acted, and the mirror's reads
    (snapshots without a depth limit, which come from the mirror; their ``source`` says whether it
    had to fetch the whole tree)."""

    def __init__(self, run: Run[Any], client: AccessibilityClient, window: FormWindow) -> None:
        self.run, self.client, self.window = run, client, window
        self.form, self.desktop = window.form, window.desktop
        self.reads = 0
        #: Reads that fetched the whole tree; only where ``whole_fetches_allowed``.
        self.whole_fetches = 0
        self.whole_fetches_allowed = False
        #: Where the mirror differed from a fetch made just after it, read by read.
        self.differences: list[str] = []

    def read(self, refresh: bool = False) -> Snapshot:
        """The mirror's tree, which it may fetch whole only where ``whole_fetches_allowed``
        (``refresh``: renewed from a whole fetch, the mirror's first read)."""
        tree = self.run(
            self.client.snapshot(
                self.form.pid, max_elements=MIRROR_MAX_ELEMENTS, refresh=refresh, store=False
            )
        )
        if refresh:
            return tree
        self.reads += 1
        refetched = tree.source == "fetch"
        self.whole_fetches += refetched
        assert self.whole_fetches_allowed or not refetched, (
            f"seed {SEED}: read {self.reads} fetched the whole tree; {self.differences}"
        )
        return tree

    def fetch(self) -> Snapshot:
        """The app's tree fetched whole now, past the mirror."""
        return self.run(
            self.client.snapshot(
                self.form.pid, max_depth=WHOLE_DEPTH, max_elements=MIRROR_MAX_ELEMENTS, store=False
            )
        )

    def fetched_names(self) -> set[str]:
        return {e.name for e in self.fetch().elements}

    def matches_a_fresh_fetch(self) -> None:
        """Poll until the mirror equals a whole fetch made just after it: the app may still be laying
        out what it changed, but a mirror that missed a change stays different."""

        def equal() -> bool:
            mirrored = self.read().elements
            difference = first_difference(mirrored, self.fetch().elements)
            if difference is not None:
                self.differences.append(difference)
            return difference is None

        try:
            poll("the mirror to equal a fresh fetch", equal, 10)
        except AssertionError as exc:
            raise AssertionError(f"seed {SEED}: {self.differences[-1]}") from exc

    def add_row(self) -> None:
        number = len(self.form.events("row_added")) + 1
        os.kill(self.form.pid, signal.SIGUSR1)
        self.form.wait_for_event("row_added", lambda e: e["name"] == f"Added row {number}")

    def rename_label(self) -> None:
        """Click the button, which renames the status label."""
        count = len(self.form.events("button")) + 1
        button = next(e for e in self.read().elements if (e.role, e.name) == ("push button", "Click me"))
        self.run(self.client.element_action(button, "click"))
        self.form.wait_for_event("button", lambda e: e["count"] == count)

    def scroll_list(self, rng: random.Random) -> None:
        """Scroll the list up or down: rows leave the view and others come into it."""
        elements = self.read().elements
        # Where the list shows: its bounds clipped by every ancestor's (GTK's list is as tall as
        # all its rows, in a scrolled window).
        element = next(e for e in elements if e.name == "Rows" and e.bounds is not None)
        left, top, right, bottom = -(2**31), -(2**31), 2**31, 2**31
        while element.parent is not None:
            if element.bounds is not None:
                b = element.bounds
                left, top = max(left, b.x), max(top, b.y)
                right, bottom = min(right, b.x + b.width), min(bottom, b.y + b.height)
            element = elements[element.parent]
        views = len(self.form.events("list_view"))
        direction = rng.choice(("up", "down"))
        scroll(
            self.desktop, self.form, Bounds(x=left, y=top, width=right - left, height=bottom - top), direction
        )
        if direction == "down":  # up at the top changes nothing
            poll("the list to scroll", lambda: len(self.form.events("list_view")) > views, 5)

    def move_window(self, rng: random.Random) -> None:
        """Move the window some way off, not past the screen's top or left edge; return once the
        desktop lists it there and, where the app's extents are screen pixels, its frame says so."""
        frame = next(e.bounds for e in self.read().elements if e.depth == 1 and e.bounds is not None)
        window = self.window.listed().bounds

        def offset(at: int) -> int:
            step = rng.randint(10, 40)
            return step if at < step else rng.choice((-1, 1)) * step

        dx, dy = offset(window.x), offset(window.y)
        to = self.window.move_by(dx, dy)

        def moved() -> bool:
            listed = self.window.listed().bounds
            return (listed.x, listed.y) == (to.x, to.y) and (
                not self.desktop.a11y_in_screen_pixels
                or any(e.depth == 1 and e.bounds not in (None, frame) for e in self.fetch().elements)
            )

        poll("the window to move", moved, 5)

    async def move_window_by(
        self,
        app: AppConnection,
        watched: Element,
        call_many: Callable[
            [AppConnection, Sequence[Request]], Awaitable[list[Reply]]
        ] = AppConnection.call_many,
    ) -> None:
        """Move the form's window 40 px right and 30 px down, returning once the app reports
        ``watched`` elsewhere (GTK places a widget anew a little after its window moved).
        ``call_many``: the app connection's own, where a test has patched it."""
        extents = Request(watched.ref.path, c.COMPONENT, "GetExtents", "u", (c.COORD_TYPE_SCREEN,))
        before = await call_many(app, [extents])
        await asyncio.to_thread(self.window.move_by, 40, 30)
        deadline = time.monotonic() + 5
        while await call_many(app, [extents]) == before:
            assert time.monotonic() < deadline, f"{watched.role} {watched.name!r} did not move"
            await asyncio.sleep(0.02)


@pytest.fixture
def changes(run: Run[Any], client: AccessibilityClient, form_window: FormWindow) -> Changes:
    """Changes to the form, on the test's desktop."""
    return Changes(run, client, form_window)


def test_after_random_changes_the_mirror_equals_a_fresh_fetch(changes: Changes) -> None:
    changes.read(refresh=True)  # the one whole fetch
    rng = random.Random(SEED)
    made = []
    for _ in range(STEPS):
        change = rng.choice(("add_row", "rename_label", "scroll_list", "move_window"))
        made.append(change)
        match change:
            case "add_row":
                changes.add_row()
            case "rename_label":
                changes.rename_label()
            case "scroll_list":
                changes.scroll_list(rng)
            case "move_window":
                changes.move_window(rng)
        changes.matches_a_fresh_fetch()
    print(f"seed {SEED}: {made}: {changes.reads} reads, none fetched the whole tree")


@needs(Capability.CONTEXT_MENU_IN_TREE)
def test_a_window_opened_or_closed_fetches_the_whole_tree(changes: Changes) -> None:
    """A popup menu is a window of its own: the application's children change, which no subtree
    holds, and the tree is fetched whole, on opening and on closing."""
    changes.whole_fetches_allowed = True
    entry = next(e.bounds for e in changes.read().elements if e.name == "Name" and e.role == "text")
    assert entry is not None
    changes.whole_fetches = 0  # the read may have been the mirror's first
    click(changes.desktop, changes.form, entry, "right")
    poll("the context menu in the tree", lambda: "Select All" in changes.fetched_names(), 5)
    changes.matches_a_fresh_fetch()
    changes.desktop.with_input(lambda device: device.press_key("Escape"))
    poll("the context menu gone", lambda: "Select All" not in changes.fetched_names(), 5)
    changes.matches_a_fresh_fetch()
    assert changes.whole_fetches == 2, f"{changes.whole_fetches} whole fetches in {changes.reads} reads"


def test_subtrees_fetched_again_together_read_the_cache_once(
    changes: Changes, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = changes.read(refresh=True)  # the one whole fetch
    elements = tree.elements
    mirror = changes.client.mirror(tree.bus_name)
    assert mirror is not None
    # Two subtrees apart (neither inside the other) said to have changed shape at once.
    parents = [e for e in elements if e.depth == 3 and e.child_count > 0]
    first, last = parents[0], parents[-1]
    assert last.index > first.index + first.child_count, "two subtrees apart"
    for element in (first, last):
        mirror.note(
            ObjectEvent(element.ref.bus_name, element.ref.path, "ChildrenChanged", "add", time.monotonic())
        )
    asked: list[str] = []
    call_many = AppConnection.call_many

    async def recorded(self: AppConnection, requests: Sequence[Request]) -> list[Reply]:
        asked.extend(request.member for request in requests)
        return await call_many(self, requests)

    monkeypatch.setattr(AppConnection, "call_many", recorded)
    changes.read()
    assert asked.count("GetItems") == (1 if mirror.reads_cache else 0)
    monkeypatch.undo()
    changes.matches_a_fresh_fetch()


@contextlib.contextmanager
def viewport(
    runner: asyncio.Runner, client: AccessibilityClient, a11y_desktop: A11yDesktop, log_dir: Path
) -> Iterator[FormApp]:
    """The GTK viewport fixture app (tests/apps/gtk_viewport.py), running and registered."""
    log_path = log_dir / "events.jsonl"
    log_path.touch()
    proc = a11y_desktop.launch(
        [SYSTEM_PYTHON, str(APPS_DIR / "gtk_viewport.py"), "--log", str(log_path)], stderr=subprocess.DEVNULL
    )
    try:
        app = FormApp(proc=proc, log_path=log_path)
        app.wait_for_event("ready", lambda e: True, timeout=STARTUP_TIMEOUT_S)
        wait_until_registered(runner, client, proc.pid)
        yield app
    finally:
        a11y_desktop.stop(proc)


def scroll_down(changes: Changes, elements: list[Element]) -> None:
    """Wheel the viewport's pane down, once the app says it scrolled."""
    pane = next(e.bounds for e in elements if e.role == "scroll pane")
    assert pane is not None
    # The app is "ready" at GTK's first idle, which can come before sway maps its window: a wheel
    # turned before that lands on nothing (seen twice in CI), and the pane has no screen origin yet.
    changes.window.listed()
    scrolled = len(changes.form.events("scrolled"))
    scroll(changes.desktop, changes.form, pane, "down")
    poll("the pane to scroll", lambda: len(changes.form.events("scrolled")) > scrolled, 5)


def pane_view(snapshot: Snapshot) -> tuple[list[float | None], list[str]]:
    """Where the pane's scroll bars stand, and the buttons it shows."""
    return (
        [e.value.current if e.value else None for e in snapshot.elements if e.role == "scroll bar"],
        [e.name for e in snapshot.elements if e.role == "push button" and e.has_state("showing")],
    )


def test_a_scrolled_viewport_shows_in_the_next_snapshot(
    runner: asyncio.Runner,
    client: AccessibilityClient,
    a11y_desktop: A11yDesktop,
    desktop: Desktop,
    tmp_path: Path,
) -> None:
    """GTK reports neither the new bounds nor the showing state of what a scrolled viewport moves;
    the scroll bar's value change has the pane's subtree fetched again."""
    with viewport(runner, client, a11y_desktop, tmp_path) as app:
        changes = Changes(runner.run, client, FormWindow(a11y_desktop, desktop, app))
        scroll_down(changes, changes.read(refresh=True).elements)  # after the one whole fetch
        changes.matches_a_fresh_fetch()


@pytest.fixture
def scrolled_while_fetched(
    runner: asyncio.Runner,
    client: AccessibilityClient,
    a11y_desktop: A11yDesktop,
    desktop: Desktop,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Changes]:
    """The viewport app, read once; the next whole fetch scrolls its pane down once it has read
    the tree, so the scroll's events arrive while the fetch runs (undone by ``monkeypatch.undo``)."""
    with viewport(runner, client, a11y_desktop, tmp_path) as app:
        changes = Changes(runner.run, client, FormWindow(a11y_desktop, desktop, app))
        elements = changes.read(refresh=True).elements
        whole_fetch = mirror_module.fetch_tree

        async def scrolled_meanwhile(fetched_from: AppConnection, **limits: Any) -> FetchedTree:
            fetched = await whole_fetch(fetched_from, **limits)
            scroll_down(changes, elements)
            await client.events.sync(fetched_from.bus_name)  # its events arrive while the fetch runs
            return fetched

        monkeypatch.setattr(mirror_module, "fetch_tree", scrolled_meanwhile)
        yield changes


def test_a_scroll_while_the_tree_is_fetched_afresh_shows_in_that_snapshot(
    scrolled_while_fetched: Changes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh drops the mirrored tree and fetches it whole; the fetch may read the pane before
    the scroll that a value change arriving meanwhile reports, so the same read fetches the pane's
    subtree again: it does not serve what it already knows changed (it once left that to the next
    read)."""
    changes = scrolled_while_fetched
    refreshed = changes.read(refresh=True)
    monkeypatch.undo()
    assert refreshed.source == "fetch"
    # The pane as a fetch after the scroll finds it (the rest of the window, its focused entry
    # among them, may still change: only the next read must equal such a fetch whole).
    assert pane_view(refreshed) == pane_view(changes.fetch())
    changes.matches_a_fresh_fetch()


def test_a_fetched_tree_whose_correction_fails_is_served_and_fetched_whole_next(
    scrolled_while_fetched: Changes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pane scrolls while the tree is fetched whole, and fetching the pane's subtree again then
    fails: the read serves the tree it fetched (as it would without the correction), and the next
    read fetches the whole tree again rather than serve the unscrolled pane."""
    changes = scrolled_while_fetched

    async def failing(app: AppConnection, roots: list[str], **options: Any) -> Any:
        raise CallFailed("org.freedesktop.DBus.Error.NoReply", "the app did not answer")

    monkeypatch.setattr(mirror_module, "fetch_subtrees", failing)
    assert changes.read(refresh=True).source == "fetch"
    monkeypatch.undo()
    changes.whole_fetches_allowed = True
    assert changes.read().source == "fetch"
    changes.matches_a_fresh_fetch()


@not_on("sway", why=MOVE_UNSEEN)
def test_a_window_moved_while_a_subtree_is_fetched_again_is_not_moved_twice(
    changes: Changes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read takes the windows' extents with its sync; the subtree it then fetches again may be
    read after the window moved, at the new place. The next read must not move that subtree with
    the window once more: it fetches the window's subtree again instead."""
    elements = changes.read(refresh=True).elements  # the one whole fetch
    mirror = changes.client.mirror(elements[0].ref.bus_name)
    assert mirror is not None
    frame = next(e for e in elements if e.depth == 1 and e.bounds is not None)
    parent = next(e for e in elements if e.depth >= 2 and e.child_count > 0 and e.bounds is not None)
    mirror.note(ObjectEvent(parent.ref.bus_name, parent.ref.path, "ChildrenChanged", "add", time.monotonic()))
    subtree_fetch = mirror_module.fetch_subtrees

    async def moved_meanwhile(app: AppConnection, roots: list[str], **options: Any) -> Any:
        await changes.move_window_by(app, frame)
        return await subtree_fetch(app, roots, **options)

    monkeypatch.setattr(mirror_module, "fetch_subtrees", moved_meanwhile)
    changes.read()
    monkeypatch.undo()
    changes.matches_a_fresh_fetch()


@not_on("sway", why=MOVE_UNSEEN)
def test_a_window_moved_while_elements_are_read_with_the_sync_is_not_moved_twice(
    changes: Changes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read asks for the windows' extents and, in the same round trip, the details of the
    elements events noted changed (their screen bounds among them). A window that moves between
    the two has those elements read at its new place while its extents say the old one: the next
    read must not move them with the window once more. Here the window moves just before the app
    is asked for a noted label's details; requests the read sends after those wait for them, as
    an app answers its requests in order. The events that arrive meanwhile are dropped, as from a
    toolkit that reports nothing of a move (Qt; GTK reports new bounds for some of the widgets,
    which has the read check afterwards that the window held still)."""
    elements = changes.read(refresh=True).elements  # the one whole fetch
    mirror = changes.client.mirror(elements[0].ref.bus_name)
    assert mirror is not None
    label = next(e for e in elements if e.role == "label" and e.bounds is not None and e.depth >= 2)
    mirror.note(ObjectEvent(label.ref.bus_name, label.ref.path, "BoundsChanged", "", 0.0))
    call_many = AppConnection.call_many
    moved: list[asyncio.Future[None]] = []

    async def moved_before_the_details(app: AppConnection, requests: Sequence[Request]) -> list[Reply]:
        if not moved and any(r.path == label.ref.path and r.member == "GetExtents" for r in requests):
            moved.append(asyncio.get_running_loop().create_future())
            try:
                await changes.move_window_by(app, label, call_many)
            finally:
                moved[0].set_result(None)
        elif moved:
            await moved[0]  # sent after the details: answered after them
        return await call_many(app, requests)

    monkeypatch.setattr(AppMirror, "note", lambda *_: None)
    monkeypatch.setattr(AppConnection, "call_many", moved_before_the_details)
    changes.read()
    monkeypatch.undo()
    assert moved, "the label's details were read with the sync"
    changes.matches_a_fresh_fetch()


@not_on("sway", why=MOVE_UNSEEN)
def test_a_window_moved_while_the_tree_is_fetched_whole_is_not_left_at_the_old_place(
    changes: Changes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole fetch reads each window's extents before its elements'; a window that moves after
    that, before the mirror reads the windows' extents to watch, has elements of the fetch at the
    old place while the watched extents already say the new one. The next read must fetch that
    window's subtree again, not trust it. The move's events are dropped, as from a toolkit that
    reports nothing of a move (Qt; GTK reports new bounds for some of the widgets only)."""
    elements = changes.read(refresh=True).elements
    label = next(e for e in elements if e.role == "label" and e.bounds is not None and e.depth >= 2)
    whole_fetch = mirror_module.fetch_tree

    async def moved_after_the_fetch(app: AppConnection, **limits: Any) -> FetchedTree:
        fetched = await whole_fetch(app, **limits)
        await changes.move_window_by(app, label)
        await changes.client.events.sync(app.bus_name)  # the move's events arrive, and are dropped
        return fetched

    monkeypatch.setattr(AppMirror, "note", lambda *_: None)
    monkeypatch.setattr(mirror_module, "fetch_tree", moved_after_the_fetch)
    moved = changes.read(refresh=True).elements
    monkeypatch.undo()
    assert next(e for e in moved if e.ref == label.ref).bounds == label.bounds, "fetched before the move"
    changes.matches_a_fresh_fetch()
