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

Qt's bridge answers ``GetItems`` with an empty list and has no ``Properties.GetAll``: its tree
comes from step 2 alone, level by level, with one ``Properties.Get`` per property.

Each step is one batch through :meth:`AppConnection.call_many`, which keeps many requests in
flight; only the gap filling takes one more batch per level of missing descendants.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from deskrig.a11y import constants as c
from deskrig.a11y.connection import (
    UNKNOWN_INTERFACE,
    UNKNOWN_METHOD,
    AppConnection,
    CallFailed,
    Reply,
    Request,
)
from deskrig.a11y.tree import Element, ElementRef, PathStep, ValueInfo
from deskrig.model import Bounds

#: Characters of Text interface content kept per element.
TEXT_CAP = 4000
#: GTK reports hidden widgets at this origin.
_OFFSCREEN = -(2**30)
#: The properties read per object, and per element with a Value, when the app lacks GetAll.
ACCESSIBLE_PROPERTIES = ("Name", "Description", "Parent", "ChildCount")
VALUE_PROPERTIES = ("CurrentValue", "MinimumValue", "MaximumValue", "MinimumIncrement")


@dataclass(slots=True)
class RawNode:
    """One accessible object as the app described it, before it is placed in the tree."""

    key: ElementRef
    parent: ElementRef | None
    index_in_parent: int
    child_count: int
    interfaces: frozenset[str]
    name: str
    role: int
    description: str
    states: int
    #: The children ``GetChildren`` (or an old-style cache item) listed; None when not asked.
    children: list[ElementRef] | None = None
    #: True when ``children`` lists only the showing ones (see ``TreeFetch._children_request``).
    offscreen_omitted: bool = False

    def has_state(self, state: int) -> bool:
        return bool(self.states >> state & 1)

    @property
    def showing(self) -> bool:
        return self.has_state(c.STATE_SHOWING)


@dataclass(slots=True)
class FetchedTree:
    elements: list[Element]
    truncated: bool
    used_cache: bool
    notes: list[str] = field(default_factory=list)


def _ref(ref: Any) -> ElementRef:
    return ElementRef(str(ref[0]), str(ref[1]))


def _short_interfaces(names: list[str]) -> frozenset[str]:
    return _interface_set(tuple(names))


@functools.cache
def _interface_set(names: tuple[str, ...]) -> frozenset[str]:
    # A toolkit uses a few dozen distinct interface lists; parse each once.
    return frozenset(n.removeprefix(c.IFACE_PREFIX) for n in names)


def node_from_cache_item(item: Any) -> RawNode:
    """Parse one ``Cache.GetItems`` item, in either the current or the pre-2.x (Qt 5) layout."""
    if isinstance(item[3], list):  # a((so)(so)(so)a(so)assusau): explicit children
        key, _app, parent, children, interfaces, name, role, description, states = item
        return RawNode(
            key=_ref(key),
            parent=_ref(parent),
            index_in_parent=-1,
            child_count=len(children),
            interfaces=_short_interfaces(interfaces),
            name=name,
            role=role,
            description=description,
            states=c.state_bits(states),
            children=[_ref(ch) for ch in children],
        )
    key, _app, parent, index, count, interfaces, name, role, description, states = item
    return RawNode(
        key=_ref(key),
        parent=_ref(parent),
        index_in_parent=index,
        child_count=count,
        interfaces=_short_interfaces(interfaces),
        name=name,
        role=role,
        description=description,
        states=c.state_bits(states),
    )


def property_requests(app: AppConnection, path: str, interface: str, names: Sequence[str]) -> list[Request]:
    """``Properties.GetAll``, or one ``Properties.Get`` per name where the app lacks GetAll (Qt)."""
    if app.answers_get_all:
        return [Request(path, c.PROPERTIES, "GetAll", "s", (interface,))]
    return [Request(path, c.PROPERTIES, "Get", "ss", (interface, name)) for name in names]


def parse_properties(replies: Sequence[Reply], names: Sequence[str]) -> dict[str, Any] | CallFailed:
    """The replies to :func:`property_requests` as one name -> value mapping."""
    failed = next((r for r in replies if isinstance(r, CallFailed)), None)
    if failed is not None:
        return failed
    if len(replies) == 1 and isinstance(_first(replies[0]), dict):
        return {name: variant.value for name, variant in _first(replies[0]).items()}
    return {name: _first(reply).value for name, reply in zip(names, replies, strict=True)}


async def read_properties(
    app: AppConnection, path: str, interface: str, names: Sequence[str]
) -> dict[str, Any]:
    """One object's properties of ``interface`` (which it implements); raises :class:`CallFailed`."""
    props = parse_properties(await app.call_many(property_requests(app, path, interface, names)), names)
    if app.answers_get_all and _refuses_get_all(props):
        app.answers_get_all = False
        return await read_properties(app, path, interface, names)
    if isinstance(props, CallFailed):
        raise props
    return props


def _refuses_get_all(reply: Reply | dict[str, Any]) -> bool:
    return isinstance(reply, CallFailed) and reply.error_name in (UNKNOWN_INTERFACE, UNKNOWN_METHOD)


def _node_requests(app: AppConnection, key: ElementRef) -> list[Request]:
    path = key.path
    return [
        Request(path, c.ACCESSIBLE, "GetRole"),
        Request(path, c.ACCESSIBLE, "GetState"),
        Request(path, c.ACCESSIBLE, "GetInterfaces"),
        *property_requests(app, path, c.ACCESSIBLE, ACCESSIBLE_PROPERTIES),
    ]


async def fetch_nodes(app: AppConnection, keys: Sequence[ElementRef]) -> list[RawNode | CallFailed]:
    """Describe objects the cache did not list, a few calls each, all in one batch."""
    groups = [_node_requests(app, key) for key in keys]
    replies = await app.call_many([r for group in groups for r in group])
    nodes: list[RawNode | CallFailed] = []
    start = 0
    for key, requests in zip(keys, groups, strict=True):
        group, start = replies[start : start + len(requests)], start + len(requests)
        if app.answers_get_all and not isinstance(group[0], CallFailed) and _refuses_get_all(group[3]):
            # The object answers but GetAll is unknown to the app: ask again property by property.
            app.answers_get_all = False
            return await fetch_nodes(app, keys)
        failed = next((r for r in group if isinstance(r, CallFailed)), None)
        if failed is not None:
            nodes.append(failed)
            continue
        role, states, interfaces = (_first(r) for r in group[:3])
        values = parse_properties(group[3:], ACCESSIBLE_PROPERTIES)
        assert not isinstance(values, CallFailed)  # every reply in the group succeeded
        parent = values.get("Parent")
        nodes.append(
            RawNode(
                key=key,
                parent=_ref(parent) if parent else None,
                index_in_parent=-1,
                child_count=int(values.get("ChildCount", 0)),
                interfaces=_short_interfaces(interfaces),
                name=str(values.get("Name", "")),
                role=int(role),
                description=str(values.get("Description", "")),
                states=c.state_bits(states),
            )
        )
    return nodes


def _get_children(node: RawNode) -> Request:
    return Request(node.key.path, c.ACCESSIBLE, "GetChildren")


def _first(reply: Reply) -> Any:
    assert not isinstance(reply, CallFailed)
    return reply[0]


class TreeFetch:
    """One fetch of one application's tree; use :func:`fetch_tree`."""

    def __init__(
        self,
        app: AppConnection,
        max_depth: int | None,
        max_elements: int | None,
        include_offscreen_items: bool,
    ) -> None:
        self.app = app
        self.include_offscreen_items = include_offscreen_items
        self.root = ElementRef(app.bus_name, c.ROOT_PATH)
        self.max_depth = max_depth
        self.budget = math.inf if max_elements is None else max_elements
        self.nodes: dict[ElementRef, RawNode] = {}
        self.claimed: defaultdict[ElementRef, list[ElementRef]] = defaultdict(list)
        self.walked: set[ElementRef] = set()
        self.notes: list[str] = []

    async def run(self) -> FetchedTree:
        used_cache = await self._load_cache()
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
        return FetchedTree(elements, truncated, used_cache, self.notes)

    async def _load_cache(self) -> bool:
        try:
            (items,) = await self.app.call(c.CACHE_PATH, c.CACHE, "GetItems")
        except CallFailed as exc:
            if exc.peer_gone:
                raise
            self.notes.append(f"no AT-SPI Cache ({exc.error_name}); walked the tree instead")
            return False
        if not items:
            # Qt's bridge: an empty cache. Older Qt (5.15, 6.4) also crashes on Properties.GetAll
            # instead of refusing it, so never send GetAll to such an app.
            self.app.answers_get_all = False
            self.notes.append("empty AT-SPI Cache (Qt); walked the tree, one property at a time")
            return False
        for item in items:
            node = node_from_cache_item(item)
            if node.key.bus_name == self.app.bus_name:  # skip e.g. plugs embedded from another process
                self.nodes[node.key] = node
        for node in sorted(self.nodes.values(), key=lambda n: n.index_in_parent):
            if node.parent is not None and node.parent != node.key:
                self.claimed[node.parent].append(node.key)
        return True

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
            node.children = [k for k in map(_ref, reply[0]) if k.path != c.NULL_PATH]
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
            return Request(
                node.key.path, c.COLLECTION, "GetMatches", c.MATCH_RULE_SIGNATURE, c.SHOWING_CHILDREN
            )
        return _get_children(node)

    def _flatten(self) -> tuple[list[Kept], bool]:
        """Depth-first order from the root: (node, depth, parent index, path) for each kept node."""
        kept: list[Kept] = []
        truncated = False
        visited: set[ElementRef] = set()
        stack: list[tuple[ElementRef, int, int | None, list[PathStep]]] = [(self.root, 0, None, [])]
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
        self, children: list[ElementRef], depth: int, parent_index: int, parent_path: list[PathStep]
    ) -> Iterator[tuple[ElementRef, int, int | None, list[PathStep]]]:
        seen: defaultdict[tuple[str, str], int] = defaultdict(int)
        for child in children:
            node = self.nodes.get(child)
            role, name = (c.role_name(node.role), node.name) if node else ("", "")
            nth = seen[(role, name)]
            seen[(role, name)] += 1
            step = PathStep(role, name, nth)
            yield child, depth + 1, parent_index, [*parent_path, step]


Kept = tuple[RawNode, int, int | None, list[PathStep]]  # node, depth, parent index, path


async def describe_many(app: AppConnection, kept: Sequence[Kept], first_index: int = 0) -> list[Element]:
    """Turn raw nodes into :class:`Element` s, fetching bounds, actions, values and text in one batch."""
    requests: list[Request] = []
    wanted: list[dict[str, slice]] = []  # per node: detail name -> its replies' place in requests
    for node, _depth, _parent, _path in kept:
        slots = {}
        for detail, detail_requests in _detail_requests(app, node):
            slots[detail] = slice(len(requests), len(requests) + len(detail_requests))
            requests.extend(detail_requests)
        wanted.append(slots)
    replies = await app.call_many(requests)
    elements = []
    for offset, ((node, depth, parent, path), slots) in enumerate(zip(kept, wanted, strict=True)):
        got = {detail: replies[where] for detail, where in slots.items()}
        text = _text(got.get("text"))
        # model_construct: the values come from typed D-Bus replies, and validation would add
        # a few milliseconds per few hundred elements.
        elements.append(
            Element.model_construct(
                index=first_index + offset,
                parent=parent,
                depth=depth,
                role=c.role_name(node.role),
                name=node.name,
                description=node.description,
                states=list(c.state_names(node.states)),
                text=text[:TEXT_CAP] if text is not None else None,
                text_truncated=text is not None and len(text) > TEXT_CAP,
                value=_value(got.get("value")),
                actions=_actions(got.get("actions")),
                bounds=_bounds(got.get("bounds")),
                child_count=node.child_count,
                offscreen_children_omitted=node.offscreen_omitted,
                interfaces=sorted(node.interfaces),
                ref=node.key,
                path=path,
            )
        )
    return elements


def _detail_requests(app: AppConnection, node: RawNode) -> Iterator[tuple[str, list[Request]]]:
    # Details only for what is on screen: a hidden element (a closed menu's item, another tab's
    # widgets) has no bounds to click, and skipping it saves a fifth of the round trips of a
    # typical GTK tree. element_action still finds a hidden element's actions when asked.
    if not node.showing:
        return
    path = node.key.path
    if "Component" in node.interfaces:
        yield "bounds", [Request(path, c.COMPONENT, "GetExtents", "u", (c.COORD_TYPE_SCREEN,))]
    if "Action" in node.interfaces:
        yield "actions", [Request(path, c.ACTION, "GetActions")]
    if "Value" in node.interfaces:
        yield "value", property_requests(app, path, c.VALUE, VALUE_PROPERTIES)
    # A label's text is its name; skipping it saves a round trip for most Text objects.
    if "Text" in node.interfaces and not (node.name and c.role_name(node.role) == "label"):
        yield "text", [Request(path, c.TEXT, "GetText", "ii", (0, -1))]


def _single(replies: list[Reply] | None) -> Reply | None:
    return replies[0] if replies else None


def _bounds(replies: list[Reply] | None) -> Bounds | None:
    reply = _single(replies)
    if reply is None or isinstance(reply, CallFailed):
        return None
    x, y, width, height = reply[0]
    if width <= 0 or height <= 0 or x < _OFFSCREEN or y < _OFFSCREEN:
        return None
    return Bounds(x=x, y=y, width=width, height=height)


def _actions(replies: list[Reply] | None) -> list[str]:
    reply = _single(replies)
    if reply is None or isinstance(reply, CallFailed):
        return []
    return [name for name, _description, _keybinding in reply[0] if name]


def _value(replies: list[Reply] | None) -> ValueInfo | None:
    values = parse_properties(replies, VALUE_PROPERTIES) if replies else None
    if values is None or isinstance(values, CallFailed):
        return None
    return ValueInfo(
        current=values.get("CurrentValue", 0.0),
        minimum=values.get("MinimumValue", 0.0),
        maximum=values.get("MaximumValue", 0.0),
        increment=values.get("MinimumIncrement", 0.0),
    )


def _text(replies: list[Reply] | None) -> str | None:
    reply = _single(replies)
    if reply is None or isinstance(reply, CallFailed):
        return None
    return str(reply[0])


async def fetch_tree(
    app: AppConnection,
    *,
    max_depth: int | None,
    max_elements: int | None,
    include_offscreen_items: bool = False,
) -> FetchedTree:
    return await TreeFetch(app, max_depth, max_elements, include_offscreen_items).run()
