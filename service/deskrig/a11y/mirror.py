"""A live mirror of one application's accessibility tree, kept current from AT-SPI events.

The tree comes from one bulk fetch (:func:`~deskrig.a11y.fetch.fetch_tree`, with its Qt
fallbacks) on first use. Events then mark what changed (:meth:`AppMirror.note`):

- a property, text, value, bounds or ordinary state change of a mirrored object: that object is
  described again (one small batch for all of them) when the tree is next read;
- what toolkits do not report is checked on each read, in one batch: every list, tree or table
  that manages its descendants is listed again (Qt's bridge sends no event for an inserted row),
  and every window's extents are read (a moved window reports nothing for the elements in it,
  whose screen bounds all changed); when either differs from the mirror, the tree is fetched again.
  The focused element, which takes typed text, is described again on every read (in a rig, Qt's
  text view did not report text typed through XTEST);
- an event from an object the tree does not hold (a cell renderer, an off-screen row) is
  ignored: it does not show in the tree, and a new object comes with its parent's ChildrenChanged;
- a change of the tree's shape (children added or removed, an object shown, hidden or made
  defunct), a burst of more changes than a targeted re-fetch is worth, or an event gap (the
  subscription was lost or renewed): the whole tree is fetched again.

A read first syncs with the app (:meth:`~deskrig.a11y.events.EventFeed.sync`), so every event
the app sent before the read is applied: the mirror never serves a tree older than a fetch would.
What a read asks the app whatever the events say (the unreported-change checks, the focused
elements' nodes) is asked while the sync is on its way: a read of an unchanged app costs one round
trip for all of it, and one more to describe the focused elements again.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from deskrig.a11y import constants as c
from deskrig.a11y.connection import AppConnection, CallFailed, Reply, Request
from deskrig.a11y.describe import describe_many
from deskrig.a11y.events import ObjectEvent
from deskrig.a11y.fetch import children_request, fetch_tree, listed_children
from deskrig.a11y.nodes import RawNode, fetch_nodes
from deskrig.a11y.tree import Element, ElementRef
from deskrig.a11y.walk import SiblingSteps

#: The most elements a mirror holds; a request for more is fetched directly.
MIRROR_MAX_ELEMENTS = 5000
#: More changed objects than this re-fetch the whole tree: one bulk fetch beats that many lookups.
BURST_LIMIT = 128
_MANAGES_DESCENDANTS = c.STATE_NAMES[c.STATE_MANAGES_DESCENDANTS]
#: State changes that show, hide or remove objects, and with them whole subtrees' details.
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


class AppMirror:
    """One application's mirrored tree and the changes the events say it needs."""

    def __init__(self, bus_name: str) -> None:
        self.bus_name = bus_name
        self._tree: MirroredTree | None = None
        self._generation = -1
        self._index: dict[ElementRef, int] = {}
        #: Each mirrored list's index -> its mirrored children, and the requests that list them now.
        self._lists: dict[int, list[ElementRef]] = {}
        #: The focused objects' paths: described again on every read, since they take typed text.
        self._focused: list[str] = []
        self._list_requests: list[Request] = []
        #: Each window's GetExtents request, and its replies just after the fetch.
        self._window_requests: list[Request] = []
        self._window_extents: list[Reply] = []
        self._changed: dict[str, bool] = {}  # object path -> only its bounds changed
        self._reshaped_at: float | None = None
        self._newest_event_at: float | None = None
        #: While a bulk fetch runs every event counts: it may be about an object the fetch adds.
        self._fetching = False
        self._lock = asyncio.Lock()

    def note(self, event: ObjectEvent) -> None:
        """Record what ``event`` says changed; the tree is corrected when next read."""
        if not self._fetching and ElementRef(self.bus_name, event.path) not in self._index:
            # Not in the tree (a cell renderer, an off-screen row): its change does not show in
            # it. A new object comes with its parent's ChildrenChanged.
            return
        self._newest_event_at = event.at
        reshapes = event.member == "ChildrenChanged" or (
            event.member == "StateChanged" and event.detail in _SHAPE_STATES
        )
        if reshapes or len(self._changed) >= BURST_LIMIT:
            self._reshaped_at = event.at
        else:
            self._changed[event.path] = (
                self._changed.get(event.path, True) and event.member == "BoundsChanged"
            )

    def forget(self) -> None:
        """Drop the tree: the next read fetches it again."""
        self._tree = None

    async def read(
        self, app: AppConnection, sync: Callable[[], Awaitable[None]], generation: Callable[[], int]
    ) -> MirroredTree:
        """The tree as it is now. ``sync``: returns once every event the app sent before it was
        called is noted; ``generation``: the event feed's, read after the sync (a change means a gap)."""
        async with self._lock:
            tree = self._tree
            focused = [ElementRef(self.bus_name, path) for path in self._focused] if tree is not None else []
            # Asked with the sync, whatever its events turn out to say; every one is awaited
            # before a failure of any is raised.
            synced, unreported, focused_nodes = await asyncio.gather(
                sync(),
                self._unreported_change(app) if tree is not None else _nothing_unreported(),
                fetch_nodes(app, focused),
                return_exceptions=True,
            )
            if isinstance(synced, BaseException):
                raise synced
            if isinstance(unreported, BaseException):
                raise unreported
            if isinstance(focused_nodes, BaseException):
                raise focused_nodes
            current = generation()
            if tree is None or current != self._generation or self._reshaped_at is not None or unreported:
                return await self._fetch(app, current)
            changed, self._changed = self._changed, {}
            # A node fetched before an event about it may predate the event: only the others are used.
            fetched = {
                key: node for key, node in zip(focused, focused_nodes, strict=True) if key.path not in changed
            }
            for key in fetched:  # typed text: a toolkit may not report every change
                changed[key.path] = False
            if not changed:
                return replace(tree, refetched=False)
            patched = await self._patch(app, tree, changed, fetched)
            return patched if patched is not None else await self._fetch(app, current)

    async def _fetch(self, app: AppConnection, generation: int) -> MirroredTree:
        self._changed.clear()
        self._reshaped_at = None
        self._generation = generation
        started = time.monotonic()
        self._newest_event_at = None  # the fetch reads what every earlier event changed
        self._fetching = True
        try:
            fetched = await fetch_tree(app, max_depth=None, max_elements=MIRROR_MAX_ELEMENTS)
        finally:
            self._fetching = False
        tree = MirroredTree(
            fetched.elements,
            fetched.nodes,
            fetched.truncated,
            started,
            None,
            tuple(fetched.notes),
            refetched=True,
        )
        self._store(tree)
        self._window_extents = await app.call_many(self._window_requests)
        return tree

    def _store(self, tree: MirroredTree) -> None:
        self._tree = tree
        self._index = {e.ref: e.index for e in tree.elements}
        self._focused = [e.ref.path for e in tree.elements if e.has_state("focused")]
        lists = {e.index: e for e in tree.elements if e.has_state(_MANAGES_DESCENDANTS)}
        self._lists = {index: [] for index in lists}
        for element in tree.elements:
            if element.parent in self._lists:
                self._lists[element.parent].append(element.ref)
        self._list_requests = [
            children_request(e.ref.path, showing_only=e.offscreen_children_omitted) for e in lists.values()
        ]
        self._window_requests = [
            Request(e.ref.path, c.COMPONENT, "GetExtents", "u", (c.COORD_TYPE_SCREEN,))
            for e in tree.elements
            if e.depth == 1 and e.has_interface("Component")
        ]

    async def _unreported_change(self, app: AppConnection) -> bool:
        """True when a list that manages its descendants shows other children than mirrored, or a
        window has moved or changed size since the tree was fetched."""
        replies = await app.call_many(self._list_requests + self._window_requests)
        listed, extents = replies[: len(self._list_requests)], replies[len(self._list_requests) :]
        for children, reply in zip(self._lists.values(), listed, strict=True):
            if isinstance(reply, CallFailed) or listed_children(reply) != children:
                return True
        if any(isinstance(reply, CallFailed) for reply in extents):
            return True
        return extents != self._window_extents

    async def _patch(
        self,
        app: AppConnection,
        tree: MirroredTree,
        changed: dict[str, bool],
        fetched: dict[ElementRef, RawNode | CallFailed],
    ) -> MirroredTree | None:
        """``tree`` with the ``changed`` objects described again; None when only a fetch will do.

        An object whose only change is its bounds keeps its node (role, name, states) and has just
        its details read again; the others are described from scratch (from their node in
        ``fetched`` where it was fetched during the sync)."""
        # Objects reported while the last fetch ran that it did not add are not in the tree.
        keys = [key for key in (ElementRef(self.bus_name, path) for path in changed) if key in self._index]
        redescribe = [key for key in keys if not changed[key.path] and key not in fetched]
        fresh_nodes = {**fetched, **dict(zip(redescribe, await fetch_nodes(app, redescribe), strict=True))}
        old = [tree.elements[self._index[key]] for key in keys]
        nodes = list(tree.nodes)
        kept = []
        for key, element in zip(keys, old, strict=True):
            node = fresh_nodes.get(key, nodes[element.index])
            if isinstance(node, CallFailed) or node.has_state(c.STATE_DEFUNCT):
                return None
            if node.child_count != element.child_count or node.showing != element.has_state("showing"):
                return None  # its children or their details changed too
            node.offscreen_omitted = element.offscreen_children_omitted
            nodes[element.index] = node
            kept.append((node, element.depth, element.parent, element.path))
        elements = list(tree.elements)
        renamed = False
        for fresh, element in zip(await describe_many(app, kept), old, strict=True):
            fresh.index = element.index
            elements[element.index] = fresh
            renamed = renamed or (fresh.role, fresh.name) != (element.role, element.name)
        patched = MirroredTree(
            _with_paths(elements) if renamed else elements,
            nodes,
            tree.truncated,
            tree.fetched_at,
            self._newest_event_at,
            tree.notes,
        )
        self._store(patched)
        return patched


async def _nothing_unreported() -> bool:
    return False


def _with_paths(elements: list[Element]) -> list[Element]:
    """``elements`` with every path recomputed from roles and names (after a rename)."""
    siblings: defaultdict[int, SiblingSteps] = defaultdict(SiblingSteps)
    result: list[Element] = []
    for element in elements:
        if element.parent is None:
            result.append(element)
            continue
        step = siblings[element.parent].step(element.role, element.name)
        path = [*result[element.parent].path, step]
        result.append(element if path == element.path else element.model_copy(update={"path": path}))
    return result
