"""Fetching a whole accessibility tree in a few concurrent round trips.

1. ``Cache.GetItems`` returns every object the app's AT-SPI bridge has registered, with role,
   name, states, interfaces and parent, in one reply.
2. It leaves gaps: children of objects that manage their own descendants (list rows, tree-view
   cells), menus that report a child count of -1, and objects nobody has asked about yet.
   Wherever the children that claim a parent do not add up to its child count, ``GetChildren``
   lists them (for descendant-managing lists, ``Collection.GetMatches`` lists just the showing
   ones) and the unknown ones are described with a few calls each, all in one batch.
3. A depth-first walk from the application root flattens the tree (keyed by bus name and path:
   the root's parent has the root's path, so a walk by path alone would loop).
4. Bounds, actions, values and text are fetched concurrently for the kept elements that show.

:func:`fetch_subtrees` fetches the subtrees under some objects the same way, from one read of the
cache (the live mirror splices them into its tree), with details read for their elements alone.

Qt's bridge answers ``GetItems`` with an empty list and has no ``Properties.GetAll``: its tree
comes from step 2 alone, level by level, with one ``Properties.Get`` per property.

Each step is one batch through :meth:`AppConnection.call_many`, which keeps many requests in
flight; only the gap filling takes one more batch per level of missing descendants. Objects
are described in :mod:`deskrig.a11y.nodes` (steps 1 and 2), elements in
:mod:`deskrig.a11y.describe` (step 4).
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from deskrig.a11y import constants as c
from deskrig.a11y.connection import AppConnection, CallFailed, Request
from deskrig.a11y.describe import Kept, describe_many
from deskrig.a11y.nodes import RawNode, element_ref, fetch_nodes, node_from_cache_item
from deskrig.a11y.tree import Element, ElementRef, PathStep
from deskrig.a11y.walk import SiblingSteps
from deskrig.model import Bounds


@dataclass(slots=True)
class FetchedTree:
    elements: list[Element]
    truncated: bool
    used_cache: bool
    notes: list[str] = field(default_factory=list)
    #: The node each element was described from, in the same order.
    nodes: list[RawNode] = field(default_factory=list)


def _get_children(node: RawNode) -> Request:
    return children_request(node.key.path, showing_only=False)


def children_request(path: str, *, showing_only: bool) -> Request:
    """List an object's children: all of them, or (``showing_only``) just the showing ones."""
    if showing_only:
        return Request(path, c.COLLECTION, "GetMatches", c.MATCH_RULE_SIGNATURE, c.SHOWING_CHILDREN)
    return Request(path, c.ACCESSIBLE, "GetChildren")


def listed_children(reply: list[Any]) -> list[ElementRef]:
    """The children a :func:`children_request` reply lists."""
    return [k for k in map(element_ref, reply[0]) if k.path != c.NULL_PATH]


@dataclass(frozen=True, slots=True)
class CacheContents:
    """What one ``Cache.GetItems`` said: the app's objects, and the children claiming each parent
    (in their order)."""

    nodes: dict[ElementRef, RawNode]
    claimed: dict[ElementRef, list[ElementRef]]


async def read_cache(app: AppConnection, notes: list[str]) -> CacheContents | None:
    """The app's AT-SPI cache; None (and a note why) when the app has none to offer."""
    try:
        (items,) = await app.call(c.CACHE_PATH, c.CACHE, "GetItems")
    except CallFailed as exc:
        if exc.peer_gone:
            raise
        notes.append(f"no AT-SPI Cache ({exc.error_name}); walked the tree instead")
        return None
    if not items:
        # Qt's bridge: an empty cache. Older Qt (5.15, 6.4) also crashes on Properties.GetAll
        # instead of refusing it, so never send GetAll to such an app.
        app.answers_get_all = False
        notes.append("empty AT-SPI Cache (Qt); walked the tree, one property at a time")
        return None
    nodes: dict[ElementRef, RawNode] = {}
    for item in items:
        node = node_from_cache_item(item)
        if node.key.bus_name == app.bus_name:  # skip e.g. plugs embedded from another process
            nodes[node.key] = node
    claimed: defaultdict[ElementRef, list[ElementRef]] = defaultdict(list)
    for node in sorted(nodes.values(), key=lambda n: n.index_in_parent):
        if node.parent is not None and node.parent != node.key:
            claimed[node.parent].append(node.key)
    return CacheContents(nodes, dict(claimed))


class TreeFetch:
    """One fetch of one application's tree; use :func:`fetch_tree`."""

    def __init__(
        self,
        app: AppConnection,
        max_depth: int | None,
        max_elements: int | None,
        include_offscreen_items: bool,
        root: str = c.ROOT_PATH,
        use_cache: bool = True,
        cache: CacheContents | None = None,
    ) -> None:
        self.app = app
        self.use_cache = use_cache
        #: The app's cache as read for several fetches at once (see fetch_subtrees).
        self.cache = cache
        self.include_offscreen_items = include_offscreen_items
        self.root = ElementRef(app.bus_name, root)
        self.max_depth = max_depth
        self.budget = math.inf if max_elements is None else max_elements
        self.nodes: dict[ElementRef, RawNode] = {}
        self.claimed: defaultdict[ElementRef, list[ElementRef]] = defaultdict(list)
        self.walked: set[ElementRef] = set()
        self.notes: list[str] = []

    async def run(self) -> FetchedTree:
        cache = self.cache
        if cache is None and self.use_cache:
            cache = await read_cache(self.app, self.notes)
        if cache is not None:
            # The fetch completes the nodes it walks (their children): copies of the lists it adds to.
            self.nodes = dict(cache.nodes)
            self.claimed = defaultdict(list, {parent: list(kids) for parent, kids in cache.claimed.items()})
        used_cache = cache is not None
        if self.root not in self.nodes:
            (root,) = await fetch_nodes(self.app, [self.root])
            if isinstance(root, CallFailed):
                raise root
            self.nodes[self.root] = root
        frontier = [(self.root, 0)]
        while frontier:
            frontier = await self._expand(self._gaps(frontier))
        kept, truncated = self._flatten()
        elements = await describe_many(self.app, kept)
        return FetchedTree(elements, truncated, used_cache, self.notes, [node for node, *_ in kept])

    def _children(self, node: RawNode) -> list[ElementRef]:
        return node.children if node.children is not None else self.claimed.get(node.key, [])

    def _has_gap(self, node: RawNode) -> bool:
        if node.children is not None:
            return False
        if node.has_state(c.STATE_MANAGES_DESCENDANTS):
            return True
        return node.child_count != len(self.claimed.get(node.key, ()))

    def _gaps(self, starts: list[tuple[ElementRef, int]]) -> list[tuple[RawNode, int]]:
        """Walk the known subtrees under ``starts``; return the nodes whose children are missing."""
        gaps = []
        stack = list(reversed(starts))
        while stack:
            key, depth = stack.pop()
            node = self.nodes.get(key)
            if node is None or key in self.walked:
                continue
            self.walked.add(key)
            if self.max_depth is not None and depth >= self.max_depth:
                continue
            if self._has_gap(node):
                gaps.append((node, depth))
            else:
                stack.extend((child, depth + 1) for child in reversed(self._children(node)))
        return gaps

    async def _expand(self, gaps: list[tuple[RawNode, int]]) -> list[tuple[ElementRef, int]]:
        """List the children of ``gaps`` and describe the unknown ones; returns them to walk next."""
        replies = await self.app.call_many([self._children_request(node) for node, _ in gaps])
        # Where the toolkit lacks Collection.GetMatches, list all the children instead.
        retry = [
            i
            for i, reply in enumerate(replies)
            if isinstance(reply, CallFailed) and gaps[i][0].offscreen_omitted
        ]
        for i, reply in zip(
            retry, await self.app.call_many([_get_children(gaps[i][0]) for i in retry]), strict=True
        ):
            gaps[i][0].offscreen_omitted = False
            replies[i] = reply
        frontier: list[tuple[ElementRef, int]] = []
        unknown: dict[ElementRef, None] = {}
        for (node, depth), reply in zip(gaps, replies, strict=True):
            if isinstance(reply, CallFailed):
                node.children = []  # the object vanished meanwhile: drop its subtree
                continue
            node.children = listed_children(reply)
            for child in node.children:
                if child not in self.nodes and child.bus_name == self.app.bus_name:
                    unknown[child] = None
                frontier.append((child, depth + 1))
        room = max(0, int(min(self.budget - len(self.nodes), len(unknown))))
        for described in await fetch_nodes(self.app, list(unknown)[:room]):
            if isinstance(described, RawNode):
                self.nodes[described.key] = described
        return frontier

    def _showing_only(self, node: RawNode) -> bool:
        return not self.include_offscreen_items and node.has_state(c.STATE_MANAGES_DESCENDANTS)

    def _children_request(self, node: RawNode) -> Request:
        # Objects that manage their descendants (lists, trees, tables) can have thousands of
        # children; their showing ones are what an agent can act on, and one call finds them.
        if self._showing_only(node):
            node.offscreen_omitted = True
            return children_request(node.key.path, showing_only=True)
        return _get_children(node)

    def _flatten(self) -> tuple[list[Kept], bool]:
        """Depth-first order from the root: (node, depth, parent index, path) for each kept node."""
        kept: list[Kept] = []
        truncated = False
        visited: set[ElementRef] = set()
        stack: list[tuple[ElementRef, int, int | None, tuple[PathStep, ...]]] = [(self.root, 0, None, ())]
        while stack:
            key, depth, parent_index, parent_path = stack.pop()
            node = self.nodes.get(key)
            if node is None:
                truncated = True  # left unfetched by the element budget
                continue
            if key in visited or node.has_state(c.STATE_DEFUNCT):
                continue
            if len(kept) >= self.budget:
                truncated = True
                break
            visited.add(key)
            index = len(kept)
            kept.append((node, depth, parent_index, parent_path))
            children = self._children(node)
            if self.max_depth is not None and depth >= self.max_depth:
                truncated = truncated or bool(children) or node.child_count != 0
                continue
            stack.extend(reversed(list(self._child_entries(children, depth, index, parent_path))))
        return kept, truncated

    def _child_entries(
        self, children: list[ElementRef], depth: int, parent_index: int, parent_path: tuple[PathStep, ...]
    ) -> Iterator[tuple[ElementRef, int, int | None, tuple[PathStep, ...]]]:
        steps = SiblingSteps()
        for child in children:
            node = self.nodes.get(child)
            role, name = (c.role_name(node.role), node.name) if node else ("", "")
            yield child, depth + 1, parent_index, (*parent_path, steps.step(role, name))


async def fetch_tree(
    app: AppConnection,
    *,
    max_depth: int | None,
    max_elements: int | None,
    include_offscreen_items: bool = False,
) -> FetchedTree:
    return await TreeFetch(app, max_depth, max_elements, include_offscreen_items).run()


async def toplevel_extents(app: AppConnection, steps: set[PathStep]) -> dict[PathStep, Bounds]:
    """The screen extents the app reports now for its top-levels ``steps`` (the application's
    children, numbered as a walk numbers them); a top-level that is gone or has no extents is left
    out. Three batches: the root's children, their role and name, their extents."""
    reply = await app.call_many([Request(c.ROOT_PATH, c.ACCESSIBLE, "GetChildren")])
    if isinstance(reply[0], CallFailed):
        return {}
    refs = listed_children(reply[0])
    siblings = SiblingSteps()
    wanted: list[tuple[PathStep, ElementRef]] = []
    for ref, node in zip(refs, await fetch_nodes(app, refs), strict=True):
        role, name = ("", "") if isinstance(node, CallFailed) else (c.role_name(node.role), node.name)
        step = siblings.step(role, name)
        if step in steps:
            wanted.append((step, ref))
    extents = await app.call_many(
        [Request(ref.path, c.COMPONENT, "GetExtents", "u", (c.COORD_TYPE_SCREEN,)) for _, ref in wanted]
    )
    return {
        step: Bounds(x=x, y=y, width=width, height=height)
        for (step, _), reply in zip(wanted, extents, strict=True)
        if not isinstance(reply, CallFailed)
        for x, y, width, height in reply[:1]
        if width > 0 and height > 0
    }


async def fetch_subtrees(
    app: AppConnection, roots: list[str], *, max_elements: int | None, use_cache: bool
) -> list[FetchedTree | BaseException]:
    """The subtree under each object at ``roots`` (included, at depth 0 with path ``[]``), fetched
    concurrently as :func:`fetch_tree` fetches the whole tree: their objects described as the app's
    cache, read once for all of them, describes them where ``use_cache`` (the whole fetch used it:
    a toolkit's cache and its objects' own properties can differ, GTK's cache says -1 children for
    a list), but details read for the subtrees' elements alone. Each subtree's failure is in its
    place; a failure to read the cache is raised."""
    cache = await read_cache(app, []) if use_cache else None
    return await asyncio.gather(
        *(
            TreeFetch(
                app,
                None,
                max_elements,
                include_offscreen_items=False,
                root=root,
                use_cache=False,
                cache=cache,
            ).run()
            for root in roots
        ),
        return_exceptions=True,
    )
