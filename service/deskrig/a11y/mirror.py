"""A live mirror of one application's accessibility tree, kept current from AT-SPI events.

The tree comes from one bulk fetch (:func:`~deskrig.a11y.fetch.fetch_tree`, with its Qt
fallbacks) on first use. Events then mark what changed (:meth:`AppMirror.note`):

- a property, text, value, bounds or ordinary state change of a mirrored object: that object is
  described again (one small batch for all of them) when the tree is next read;
- a change of a subtree's shape: children added or removed (``ChildrenChanged`` names the
  parent), an object shown, hidden or made defunct (which changes its parent's subtree: the
  details of everything under it, a list's showing children): that subtree is fetched again
  (:func:`~deskrig.a11y.fetch.fetch_subtrees`: all of them at once, from one read of the app's
  cache) and spliced into the tree, and every index, parent, depth and path after it renumbered as
  a whole fetch would number them;
- what toolkits do not report is checked on each read, in one batch: every list, tree or table
  that manages its descendants is listed again (Qt's bridge sends no event for an inserted row),
  and every window's extents are read (a moved window reports nothing for the elements in it,
  whose screen bounds all changed); a list that differs from the mirror has its parent's subtree
  fetched again (GTK reports no change of the viewport around a scrolled list), a window that
  changed size its own, and the elements of a window that only moved are moved with it (or, if it
  moved while elements in it were read, fetched again on the next read: the windows' extents are
  read again after what the read asks with its sync, and after what it reads later, and a whole
  fetch's windows after it, against the extents the fetch read for them).
  The focused element, which takes typed text, is described again on every read (in a rig, Qt's
  text view did not report text typed through XTEST);
- a scroll bar's value change: the subtree of the pane it scrolls (a GTK viewport moves what it
  shows without a word about its bounds or which parts show);
- an event from an object the tree does not hold (a cell renderer, an off-screen row) is
  ignored: it does not show in the tree, and a new object comes with its parent's ChildrenChanged
  (one that arrives while a fetch runs is noted once the fetched tree holds its object);
- a change under the application itself (a window opened or closed), more subtrees than
  targeted re-fetches are worth (:data:`SUBTREE_LIMIT`), a burst of changes to more objects than a
  targeted re-read is worth (:data:`BURST_LIMIT`, each object counted once), a top-level element
  that gained or lost its extents (the windows watched are the whole fetch's), a tree the last
  fetch truncated, a splice that would make the tree hold an object twice
  or more than :data:`MIRROR_MAX_ELEMENTS`, or an event gap (the subscription was lost or
  renewed), or a read that failed after taking what the events said changed: the whole tree is
  fetched again (a read whose first round trip fails leaves what changed to the next read).

Events that arrive while a whole fetch runs are noted against the tree it stores. When they say a
subtree of it changed shape, the same read corrects the tree as a read corrects one (sync, then
the subtrees fetched again) before serving it: the fetch may have read that subtree either side of
the change (:meth:`AppMirror._fetch_settled`).

A read first syncs with the app (:meth:`~deskrig.a11y.events.EventFeed.sync`), so every event
the app sent before the read is applied: the mirror never serves a tree older than a fetch would.
What a read asks the app whatever the events say (the unreported-change checks, the focused
elements' nodes, and their details as their mirrored nodes call for them) is asked while the sync
is on its way, and so is what the events noted before the read began named: a read costs one round
trip for all of it. Only what an event noted during the sync names, and an element whose node
changed meanwhile (other interfaces, shown or hidden), is described again after it. What an event
noted after the sync was answered names is left to the next read: the app sent it after the
moment the read is current as of (gtk3-widget-factory's spinners and progress bar report bounds
180 times a second, unchanged, and a third of its reads described them again for it, one or two
more round trips). A read that finds the tree changed where no event said so, or fetches it whole
and finds it other than the tree it held (which events may not have announced either), tells
(:attr:`MirroredTree.changed_unannounced`), so that the client's events version, which readers
trust to tell them a tree may have changed (the recorder, the PII masker), moves with it.

Elements are immutable, and a tree keeps the element objects of what did not change: a changed
element is replaced by a copy, and an element fetched again (in a subtree or the whole tree) that
equals the one served before is that one. Readers keep what they made of an element by its identity
(the recorder's state files).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from deskrig.a11y import constants as c
from deskrig.a11y.connection import AppConnection, CallFailed, Disconnected, Reply, Request
from deskrig.a11y.describe import Details, answered_by, describe_many, read_details
from deskrig.a11y.events import ObjectEvent
from deskrig.a11y.fetch import FetchedTree, children_request, fetch_subtrees, fetch_tree, listed_children
from deskrig.a11y.nodes import RawNode, fetch_nodes
from deskrig.a11y.tree import Element, ElementRef
from deskrig.a11y.walk import SiblingSteps
from deskrig.model import Bounds

T = TypeVar("T")

#: The most elements a mirror holds; a request for more is fetched directly.
MIRROR_MAX_ELEMENTS = 5000
#: More changed objects than this re-fetch the whole tree: one bulk fetch beats that many lookups.
BURST_LIMIT = 128
#: More subtrees to fetch again than this (after dropping the nested ones) fetch the whole tree.
SUBTREE_LIMIT = 16
_MANAGES_DESCENDANTS = c.STATE_NAMES[c.STATE_MANAGES_DESCENDANTS]
#: State changes that show, hide or remove an object, and with it its parent's subtree: the
#: object's own subtree's details, and which children a list that shows only its showing ones lists.
_SHAPE_STATES = frozenset({"showing", "visible", "defunct", "manages-descendants"})


@dataclass(frozen=True, slots=True)
class MirroredTree:
    """The mirror's tree at one moment."""

    elements: list[Element]
    #: The node each element was described from (for a re-read of its bounds alone).
    nodes: list[RawNode]
    truncated: bool
    #: time.monotonic() of the bulk fetch it descends from, and of the newest event it reflects.
    fetched_at: float
    newest_event_at: float | None
    notes: tuple[str, ...] = ()
    #: True when this read fetched the whole tree.
    refetched: bool = False
    #: True when this read found the tree changed where no event said it had (a moved window, a
    #: list's rows or a focused element's text that the toolkit did not report), or fetched it
    #: whole and found it other than the tree stored before (or none was).
    changed_unannounced: bool = False


class AppMirror:
    """One application's mirrored tree and the changes the events say it needs."""

    def __init__(self, bus_name: str) -> None:
        self.bus_name = bus_name
        self._tree: MirroredTree | None = None
        self._generation = -1
        self._index: dict[ElementRef, int] = {}
        #: Each mirrored list's index -> its mirrored children, and the requests that list them now.
        self._lists: dict[int, list[ElementRef]] = {}
        self._list_parents: list[int] = []
        #: The focused objects' paths: described again on every read, since they take typed text.
        self._focused: list[str] = []
        self._list_requests: list[Request] = []
        #: Each window's GetExtents request, and its replies just after the fetch.
        self._window_requests: list[Request] = []
        self._windows: list[int] = []  # the index of each window in _window_requests
        #: None for a window that moved while elements in it were read (see _check_windows_held_still).
        self._window_extents: list[Reply | None] = []
        self._changed: dict[str, bool] = {}  # object path -> only its bounds changed
        #: Objects whose subtree changed shape: path -> True when it is its parent's subtree.
        self._reshaped: dict[str, bool] = {}
        self._whole_fetch_due = False
        #: The elements of the tree stored last, kept when it is dropped: a whole fetch that finds
        #: them changed tells, as no event may have said so.
        self._served: list[Element] | None = None
        #: Whether the whole fetch described the objects from the app's cache (subtrees are described alike).
        self._cached = False
        #: time.monotonic() of the newest event a read has taken, and of the newest one noted since.
        self._newest_event_at: float | None = None
        self._newest_noted_at: float | None = None
        #: While a fetch runs, the events about objects not in the tree: each may be about an
        #: object the fetch adds, and is noted once the fetched tree is stored if it holds it.
        self._held: list[ObjectEvent] | None = None
        self._lock = asyncio.Lock()

    @property
    def reads_cache(self) -> bool:
        """Whether the whole fetch, and so every subtree fetched again, read the app's cache
        (Cache.GetItems; Qt's bridge has none)."""
        return self._cached

    @property
    def changes_noted(self) -> bool:
        """Whether events have noted changes that the next read corrects."""
        return bool(self._changed)

    def note(self, event: ObjectEvent) -> None:
        """Record what ``event`` says changed; the tree is corrected when next read."""
        index = self._index.get(self._ref(event.path))
        if index is None:
            # Not in the tree (a cell renderer, an off-screen row): its change does not show in
            # it. A new object comes with its parent's ChildrenChanged.
            if self._held is not None:
                self._held.append(event)
            return
        if self._newest_noted_at is None or event.at > self._newest_noted_at:  # held ones come late
            self._newest_noted_at = event.at
        if event.member == "ChildrenChanged":
            self._reshaped.setdefault(event.path, False)
        elif self._reshapes_parent(event, index):
            self._reshaped[event.path] = True
        elif event.path not in self._changed and len(self._changed) >= BURST_LIMIT:
            # Counted in objects, not events: an object noted again costs its re-read nothing more.
            self._whole_fetch_due = True
        else:
            self._changed[event.path] = (
                self._changed.get(event.path, True) and event.member == "BoundsChanged"
            )

    def _reshapes_parent(self, event: ObjectEvent, index: int) -> bool:
        """Whether ``event``, about the element at ``index``, changes its parent's subtree: the
        element shown, hidden or removed, or a scroll bar's value changing. The pane a scroll bar
        scrolls then shows another part of its content, and GTK reports nothing else (a viewport
        moves its content without laying it out again: no new bounds, no showing or hidden)."""
        if event.member == "StateChanged":
            return event.detail in _SHAPE_STATES
        assert self._tree is not None  # an element in the index is in the tree
        return (
            event.member == "PropertyChange"
            and event.detail == "accessible-value"
            and self._tree.elements[index].role == "scroll bar"
        )

    def forget(self) -> None:
        """Drop the tree: the next read fetches it again. The events that arrive while it does
        are held for the tree it stores, as in any fetch: noted against the dropped one, a scroll
        bar's value change could not be told from another element's."""
        self._tree = None
        self._index = {}

    async def read(
        self, app: AppConnection, sync: Callable[[], Awaitable[None]], generation: Callable[[], int]
    ) -> MirroredTree:
        """The tree as it is now. ``sync``: returns once every event the app sent before it was
        called is noted; ``generation``: the event feed's, read after the sync (a change means a gap)."""
        async with self._lock:
            tree = self._tree
            pending, self._changed = self._changed, {}
            try:
                ahead = await self._read_with_sync(app, sync, tree, pending)
            except BaseException:
                # A failed read changes nothing: what the events said changed is still to be read.
                self._changed = _merged(pending, self._changed)
                raise
            try:
                current = generation()
                if tree is None or current != self._generation or self._whole_fetch_due or ahead is None:
                    return await self._fetch_settled(app, sync, generation, current)
                corrected = await self._corrected(app, tree, pending, ahead)
                if corrected is not None:
                    return corrected
                return await self._fetch_settled(app, sync, generation, current)
            except BaseException:
                # What this read took from the events to correct is noted nowhere now.
                self._whole_fetch_due = True
                raise

    async def _fetch_settled(
        self,
        app: AppConnection,
        sync: Callable[[], Awaitable[None]],
        generation: Callable[[], int],
        current: int,
    ) -> MirroredTree:
        """The tree fetched whole, and corrected within the same read when the events the app sent
        while the fetch ran say a subtree in it changed shape: objects gone, children added or
        removed, shown or hidden, a pane scrolled. The fetch may have read such a subtree either side
        of the change, and served as it was the tree could hold objects already gone (the first
        fetch of gtk3-widget-factory read 20 cells of a tree view that the app reported defunct
        while the fetch ran, replacing them). One pass, as a read makes: what it cannot correct
        short of another whole fetch is the next read's, which fetches the tree whole."""
        fetched = await self._fetch(app, current)
        if not self._reshaped:
            return fetched
        pending, self._changed = self._changed, {}
        try:
            ahead = await self._read_with_sync(app, sync, fetched, pending)
            corrected = (
                None
                if ahead is None or generation() != self._generation
                else await self._corrected(app, fetched, pending, ahead)
            )
        except (CallFailed, Disconnected, TimeoutError):
            corrected = None  # the fetched tree stands, as it would without this pass
        if corrected is None:
            self._whole_fetch_due = True
            return fetched
        return replace(
            corrected,
            refetched=True,
            changed_unannounced=fetched.changed_unannounced or corrected.changed_unannounced,
        )

    async def _read_with_sync(
        self,
        app: AppConnection,
        sync: Callable[[], Awaitable[None]],
        tree: MirroredTree | None,
        pending: dict[str, bool],
    ) -> ReadAhead | None:
        """Sync with the app and, on the way, ask it what a read asks whatever the events say, and
        what those noted before the read (``pending``) name: the focused elements' nodes and
        details, the nodes of the elements noted changed more than their bounds, the details of
        every element noted; and take what the events noted until the sync was answered. None when
        there is no tree to correct, or a list or window did not answer (see
        :meth:`_unreported_change`). Every request is answered before a failure of any is raised
        (what the sync took is then noted again)."""
        if tree is None:
            await sync()
            return None

        async def synced() -> dict[str, bool]:
            """What the events noted during the sync (those noted after it are the next read's)."""
            await sync()
            during, self._changed = self._changed, {}
            self._newest_event_at = _newer(self._newest_event_at, self._newest_noted_at)
            self._newest_noted_at = None
            return during

        focused = [self._ref(path) for path in self._focused]
        noted = [key for key in map(self._ref, pending) if key in self._index and key not in focused]
        detailed = [*focused, *noted]
        redescribed = [*focused, *(key for key in noted if not pending[key.path])]
        # Sent in this order, so answered in it: the windows' extents are read before and after
        # the elements read ahead, whose bounds are in screen coordinates.
        during, unreported, nodes, details, extents_after = await asyncio.gather(
            synced(),
            self._unreported_change(app),
            fetch_nodes(app, redescribed),
            read_details(app, [tree.nodes[self._index[key]] for key in detailed]),
            app.call_many(self._window_requests),
            return_exceptions=True,
        )
        if not isinstance(during, BaseException) and any(
            isinstance(result, BaseException) for result in (unreported, nodes, details, extents_after)
        ):
            self._changed = _merged(during, self._changed)
        during = _raise_failure(during)
        unreported = _raise_failure(unreported)
        nodes, details = _raise_failure(nodes), _raise_failure(details)
        extents_after = _raise_failure(extents_after)
        if unreported is None:
            return None
        return ReadAhead(
            during,
            unreported,
            dict(zip(redescribed, nodes, strict=True)),
            dict(zip(detailed, details, strict=True)),
            extents_after,
        )

    async def _corrected(
        self, app: AppConnection, tree: MirroredTree, pending: dict[str, bool], ahead: ReadAhead
    ) -> MirroredTree | None:
        """``tree`` corrected for what the events noted (``pending`` before the read, the rest
        during its sync: ``ahead.during``) and ``ahead`` found; None when only a whole fetch will do."""
        reshaped, self._reshaped = self._reshaped, {}
        during = ahead.during
        changed = _merged(pending, during)
        announced, read_elements = bool(changed or reshaped), tree.elements
        unreported = ahead.unreported
        spans = self._subtree_spans(tree, reshaped, unreported.differing)
        if spans is None:
            return None
        if unreported.moved:
            tree = self._moved(tree, unreported.moved)
        refetched: set[ElementRef] = set()
        if spans:
            spliced = await self._splice(app, tree, spans)
            if spliced is None:
                return None
            tree, refetched = spliced
            # What changed in the subtrees before they were fetched again is in them.
            changed = {path: only for path, only in changed.items() if self._ref(path) not in refetched}
        # The windows' subtrees were moved to their extents; one that moved while the elements
        # read ahead were read may have them at either place (see _check_windows_held_still).
        self._window_extents = _held_still(unreported.extents, ahead.extents_after)

        def still_current(key: ElementRef) -> bool:
            """Whether what was read of ``key`` with the sync still holds: no event noted during
            the sync names it, and it was not fetched again since."""
            return key.path not in during and key not in refetched and key in self._index

        nodes_ahead = {key: node for key, node in ahead.nodes.items() if still_current(key)}
        details_ahead = {key: read for key, read in ahead.details.items() if still_current(key)}
        for key in nodes_ahead:  # typed text: a toolkit may not report every change
            changed[key.path] = False
        read_later = False
        if changed:
            patched = await self._patch(app, tree, changed, nodes_ahead, details_ahead)
            if patched is None:
                return None
            tree, read_later = patched
        if spans or read_later:
            await self._check_windows_held_still(app)
        # A tree left as it was keeps its list of elements (see _patch).
        return replace(
            tree, refetched=False, changed_unannounced=not announced and tree.elements is not read_elements
        )

    def _watches_the_same_windows(self, tree: MirroredTree, elements: list[Element]) -> bool:
        """Whether ``elements`` (``tree`` changed) have the windows of ``tree``: the windows' extents
        are watched from the whole fetch on, each by its place in the list of windows."""
        return [elements[i].ref for i in _windows(elements)] == [tree.elements[i].ref for i in self._windows]

    def _ref(self, path: str) -> ElementRef:
        return ElementRef(self.bus_name, path)

    async def _check_windows_held_still(self, app: AppConnection) -> None:
        """Keep each window's extents (read as this read began, and again after what it read with
        its sync) once the elements read since are read: a window that moved meanwhile may have
        had them read at either place, so its subtree is fetched again on the next read instead
        of moved."""
        self._window_extents = _held_still(self._window_extents, await app.call_many(self._window_requests))

    async def _fetch(self, app: AppConnection, generation: int) -> MirroredTree:
        self._changed.clear()
        self._reshaped.clear()
        self._whole_fetch_due = False
        self._generation = generation
        started = time.monotonic()
        # The fetch reads what every earlier event changed.
        self._newest_event_at = self._newest_noted_at = None
        self._held = []
        try:
            fetched = await fetch_tree(app, max_depth=None, max_elements=MIRROR_MAX_ELEMENTS)
        finally:
            held, self._held = self._held, None
        self._cached = fetched.used_cache
        elements = _reusing(fetched.elements, self._served)
        tree = MirroredTree(
            elements,
            fetched.nodes,
            fetched.truncated,
            started,
            None,
            tuple(fetched.notes),
            refetched=True,
            # A fetch may be what finds a change no event announced (a list that did not answer,
            # a refresh): whatever it serves that differs tells, so readers see the tree changed.
            changed_unannounced=elements != self._served,
        )
        self._store(tree)
        self._note_held(held)
        self._window_extents = _held_still_since_fetched(
            [tree.elements[index].bounds for index in self._windows],
            await app.call_many(self._window_requests),
        )
        return tree

    def _note_held(self, held: list[ObjectEvent]) -> None:
        """Note the events held while a fetch ran that are about objects in the tree it stored."""
        for event in held:
            if self._ref(event.path) in self._index:
                self.note(event)

    def _store(self, tree: MirroredTree) -> None:
        self._tree = tree
        self._served = tree.elements
        self._index = {e.ref: e.index for e in tree.elements}
        self._focused = [e.ref.path for e in tree.elements if e.has_state("focused")]
        lists = {e.index: e for e in tree.elements if e.has_state(_MANAGES_DESCENDANTS)}
        self._lists = {index: [] for index in lists}
        self._list_parents = [e.parent or 0 for e in lists.values()]  # a list is never the root
        for element in tree.elements:
            if element.parent in self._lists:
                self._lists[element.parent].append(element.ref)
        self._list_requests = [
            children_request(e.ref.path, showing_only=e.offscreen_children_omitted) for e in lists.values()
        ]
        self._windows = _windows(tree.elements)
        self._window_requests = [
            Request(tree.elements[index].ref.path, c.COMPONENT, "GetExtents", "u", (c.COORD_TYPE_SCREEN,))
            for index in self._windows
        ]

    async def _unreported_change(self, app: AppConnection) -> Unreported | None:
        """What changed unreported (see :class:`Unreported`); None when a list or window did not answer."""
        replies = await app.call_many(self._list_requests + self._window_requests)
        answers = [reply for reply in replies if not isinstance(reply, CallFailed)]
        if len(answers) != len(replies):
            return None
        listed, extents = answers[: len(self._list_requests)], answers[len(self._list_requests) :]
        # A list that shows other children may have scrolled, and GTK works out whether the
        # viewport around it shows from how far it is scrolled when asked, reporting no change:
        # the subtree of the list's parent is fetched again.
        differing = [
            parent
            for parent, children, reply in zip(self._list_parents, self._lists.values(), listed, strict=True)
            if listed_children(reply) != children
        ]
        moved: dict[int, tuple[int, int]] = {}
        for index, now, before in zip(self._windows, extents, self._window_extents, strict=True):
            if now == before:
                continue
            if before is None or isinstance(before, CallFailed) or now[0][2:] != before[0][2:]:
                differing.append(index)  # resized: laid out anew
            else:
                (x, y, *_), (old_x, old_y, *_) = now[0], before[0]
                moved[index] = (x - old_x, y - old_y)
        return Unreported(differing, moved, list(extents))

    def _subtree_spans(
        self, tree: MirroredTree, reshaped: dict[str, bool], differing: list[int]
    ) -> list[tuple[int, int]] | None:
        """The ``[start, end)`` index ranges of the subtrees to fetch again, outermost only, in
        order; None when the whole tree is to be fetched instead."""
        roots = set(differing)
        for path, its_parent in reshaped.items():
            index = self._index.get(self._ref(path))
            if index is None:
                continue  # not in the tree (reported while the last fetch ran, which left it out)
            parent = tree.elements[index].parent if its_parent else index
            if parent is None:
                return None
            roots.add(parent)
        if tree.truncated or 0 in roots:
            return None  # what the fetch left out may now fit; or the application itself changed
        spans: list[tuple[int, int]] = []
        for root in sorted(roots):
            if spans and root < spans[-1][1]:
                continue  # inside the previous subtree
            spans.append((root, _subtree_end(tree.elements, root)))
        return spans if len(spans) <= SUBTREE_LIMIT else None

    def _moved(self, tree: MirroredTree, moved: dict[int, tuple[int, int]]) -> MirroredTree:
        """``tree`` with the elements of each ``moved`` window moved as far as it."""
        elements = list(tree.elements)
        for window, (dx, dy) in moved.items():
            for index in range(window, _subtree_end(elements, window)):
                bounds = elements[index].bounds
                if bounds is not None:
                    shifted = bounds.model_copy(update={"x": bounds.x + dx, "y": bounds.y + dy})
                    elements[index] = elements[index].model_copy(update={"bounds": shifted})
        shifted_tree = replace(tree, elements=elements, newest_event_at=self._newest_event_at)
        self._store(shifted_tree)
        return shifted_tree

    async def _splice(
        self, app: AppConnection, tree: MirroredTree, spans: list[tuple[int, int]]
    ) -> tuple[MirroredTree, set[ElementRef]] | None:
        """``tree`` with the subtrees at ``spans`` fetched again, and the objects fetched; None when
        only a whole fetch will do."""
        room = MIRROR_MAX_ELEMENTS - len(tree.elements) + sum(end - start for start, end in spans)
        self._held = []
        try:
            fetched = await fetch_subtrees(
                app,
                [tree.elements[start].ref.path for start, _ in spans],
                max_elements=room,
                use_cache=self._cached,
            )
        finally:
            held, self._held = self._held, None
        subtrees: list[FetchedTree] = []
        for subtree in fetched:
            if isinstance(subtree, CallFailed) and not subtree.peer_gone:
                return None  # the subtree's root vanished meanwhile
            if isinstance(subtree, BaseException):
                raise subtree
            if subtree.truncated or not subtree.elements:  # too big, or its root is defunct
                return None
            subtrees.append(subtree)
        elements: list[Element] = []
        nodes: list[RawNode] = []
        moved_to: dict[int, int] = {}  # old index -> new index

        def keep(old: int) -> None:
            element = tree.elements[old]
            moved_to[old] = len(elements)
            parent = None if element.parent is None else moved_to[element.parent]
            if (element.index, element.parent) != (len(elements), parent):
                element = element.model_copy(update={"index": len(elements), "parent": parent})
            elements.append(element)
            nodes.append(tree.nodes[old])

        kept_up_to = 0
        for (start, end), subtree in zip(spans, subtrees, strict=True):
            for old in range(kept_up_to, start):
                keep(old)
            kept_up_to = end
            root, base = tree.elements[start], len(elements)
            moved_to[start] = base
            above = None if root.parent is None else moved_to[root.parent]
            elements.extend(
                element.model_copy(
                    update={
                        "index": base + element.index,
                        "parent": above if element.parent is None else base + element.parent,
                        "depth": root.depth + element.depth,
                        "path": (*root.path, *element.path),  # renumbered below if its root was renamed
                    }
                )
                for element in subtree.elements
            )
            nodes.extend(subtree.nodes)
        for old in range(kept_up_to, len(tree.elements)):
            keep(old)
        if len(elements) > MIRROR_MAX_ELEMENTS or len({e.ref for e in elements}) != len(elements):
            return None  # too big, or an object moved into a subtree from elsewhere
        if not self._watches_the_same_windows(tree, elements):
            return None
        spliced = MirroredTree(
            _reusing(_with_paths(elements), tree.elements),
            nodes,
            False,
            tree.fetched_at,
            self._newest_event_at,
            tree.notes,
        )
        self._store(spliced)
        self._note_held(held)
        return spliced, {e.ref for subtree in subtrees for e in subtree.elements}

    async def _patch(
        self,
        app: AppConnection,
        tree: MirroredTree,
        changed: dict[str, bool],
        nodes_ahead: dict[ElementRef, RawNode | CallFailed],
        details_ahead: dict[ElementRef, Details],
    ) -> tuple[MirroredTree, bool] | None:
        """``tree`` with the ``changed`` objects described again, and whether anything was read
        from the app for it (besides ``nodes_ahead`` and ``details_ahead``); None when only a fetch will do.

        An object whose only change is its bounds keeps its node (role, name, states) and has just
        its details read again; the others are described from scratch (from their node in
        ``nodes_ahead`` and their details in ``details_ahead`` where those were read with the sync)."""
        # Objects reported while the last fetch ran that it did not add are not in the tree.
        keys = [key for key in map(self._ref, changed) if key in self._index]
        redescribe = [key for key in keys if not changed[key.path] and key not in nodes_ahead]
        fresh_nodes = {
            **nodes_ahead,
            **dict(zip(redescribe, await fetch_nodes(app, redescribe), strict=True)),
        }
        old = [tree.elements[self._index[key]] for key in keys]
        nodes = list(tree.nodes)
        kept = []
        for key, element in zip(keys, old, strict=True):
            node = fresh_nodes.get(key, nodes[element.index])
            if isinstance(node, CallFailed) or node.has_state(c.STATE_DEFUNCT):
                return None
            if element.index in self._lists:
                # Its children are watched by listing them (see _unreported_change), and its count
                # depends on how it was read: -1 from the app's cache, the number from ChildCount.
                node.child_count = element.child_count
            if node.child_count != element.child_count or node.showing != element.has_state("showing"):
                return None  # its children or their details changed too
            node.offscreen_omitted = element.offscreen_children_omitted
            nodes[element.index] = node
            kept.append((node, element.depth, element.parent, element.path))
        elements = list(tree.elements)
        renamed = False
        read_later = bool(redescribe) or not all(
            answered_by(app, node, details_ahead.get(node.key)) for node, *_ in kept
        )
        differs = False
        described = await describe_many(app, kept, [e.index for e in old], read_ahead=details_ahead)
        for fresh, element in zip(described, old, strict=True):
            if fresh != element:
                elements[element.index] = fresh
                differs = True
                renamed = renamed or (fresh.role, fresh.name) != (element.role, element.name)
        if not differs:
            # Most reads: the focused element, described again, is as it was: the tree and its
            # indices stand. Its node is kept, as the next read's details are asked by it.
            self._tree = replace(tree, nodes=nodes, newest_event_at=self._newest_event_at)
            return self._tree, read_later
        if not self._watches_the_same_windows(tree, elements):
            return None  # a top-level element gained or lost its extents (the Component interface)
        patched = MirroredTree(
            _with_paths(elements) if renamed else elements,
            nodes,
            tree.truncated,
            tree.fetched_at,
            self._newest_event_at,
            tree.notes,
        )
        self._store(patched)
        return patched, read_later


@dataclass(frozen=True, slots=True)
class Unreported:
    """What changed unreported: the subtrees to fetch again (the indices of the parents of the
    lists that manage their descendants and show other children than mirrored, and of the windows
    that changed size), the windows that only moved (index -> how far), and every window's extents
    now."""

    differing: list[int]
    moved: dict[int, tuple[int, int]]
    extents: list[Reply]


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """What a read asked the app with its sync: what the events noted during the sync (path ->
    only its bounds changed), what changed unreported, and the nodes and details of the elements it
    read again (by the nodes the mirror holds)."""

    during: dict[str, bool]
    unreported: Unreported
    nodes: dict[ElementRef, RawNode | CallFailed]
    details: dict[ElementRef, Details]
    #: Every window's extents read again after those nodes and details.
    extents_after: list[Reply]


def _raise_failure(result: T | BaseException) -> T:
    """``result``, or its failure raised (of an ``asyncio.gather(..., return_exceptions=True)``)."""
    if isinstance(result, BaseException):
        raise result
    return result


def _newer(at: float | None, other: float | None) -> float | None:
    """The later of two times, either of which may be unknown."""
    if at is None:
        return other
    return at if other is None or at >= other else other


def _merged(earlier: dict[str, bool], later: dict[str, bool]) -> dict[str, bool]:
    """The changed objects of both (path -> only its bounds changed): an object keeps its node
    only when every event about it said just its bounds changed."""
    return {path: earlier.get(path, True) and later.get(path, True) for path in {**earlier, **later}}


def _held_still(before: Sequence[Reply | None], after: Sequence[Reply]) -> list[Reply | None]:
    """Each window's extents ``before``, or None (its subtree to be fetched again at the next read)
    where it moved before ``after`` was read."""
    return [extents if extents == now else None for extents, now in zip(before, after, strict=True)]


def _held_still_since_fetched(fetched: Sequence[Bounds | None], after: Sequence[Reply]) -> list[Reply | None]:
    """Each window's extents read ``after`` a whole fetch, or None (its subtree to be fetched again
    at the next read) where they differ from the bounds the fetch read for it: a window that moved
    while the fetch ran has the elements read before the move at the old place and the others at
    the new one. (A fetch reads a window's extents before its elements', in the same batch, so a
    move before that read leaves them all at the new place.) A window the fetch read no bounds of
    (not showing) is kept as read after."""
    return [
        now if bounds is None or now == [(bounds.x, bounds.y, bounds.width, bounds.height)] else None
        for bounds, now in zip(fetched, after, strict=True)
    ]


def _windows(elements: list[Element]) -> list[int]:
    """The indices of the windows whose extents are watched."""
    return [e.index for e in elements if e.depth == 1 and e.has_interface("Component")]


def _subtree_end(elements: list[Element], root: int) -> int:
    """The index just past the subtree of ``root`` (depth-first order keeps a subtree together)."""
    end = root + 1
    while end < len(elements) and elements[end].depth > elements[root].depth:
        end += 1
    return end


def _with_paths(elements: list[Element]) -> list[Element]:
    """``elements`` with every path recomputed from roles and names (after a rename)."""
    siblings: defaultdict[int, SiblingSteps] = defaultdict(SiblingSteps)
    result: list[Element] = []
    for element in elements:
        if element.parent is None:
            result.append(element)
            continue
        step = siblings[element.parent].step(element.role, element.name)
        path = (*result[element.parent].path, step)
        result.append(element if path == element.path else element.model_copy(update={"path": path}))
    return result


def _reusing(elements: list[Element], before: Sequence[Element] | None) -> list[Element]:
    """``elements`` with each one equal to the element of the same object in ``before`` (a tree
    served earlier) replaced by that element: readers keep what they made of an element by its
    identity (the recorder's state files), so a subtree or a tree fetched again hands out the
    objects of the elements that did not change."""
    if not before:
        return elements
    earlier = {e.ref: e for e in before}
    return [e if (old := earlier.get(e.ref)) is None or old is e or old != e else old for e in elements]
