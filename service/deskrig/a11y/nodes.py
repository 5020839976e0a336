"""Accessible objects as an app describes them (:class:`RawNode`), and reading their properties.

A node comes from one ``Cache.GetItems`` item, or from a few calls per object where the cache
left it out. Properties come from ``Properties.GetAll`` in one call, or one ``Properties.Get``
per name where the app lacks GetAll (Qt).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
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
from deskrig.a11y.tree import ElementRef

#: The properties read per object when the app lacks GetAll.
ACCESSIBLE_PROPERTIES = ("Name", "Description", "Parent", "ChildCount")


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


def element_ref(ref: Any) -> ElementRef:
    """A D-Bus object reference, ``(bus name, path)``, as an :class:`ElementRef`."""
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
            key=element_ref(key),
            parent=element_ref(parent),
            index_in_parent=-1,
            child_count=len(children),
            interfaces=_short_interfaces(interfaces),
            name=name,
            role=role,
            description=description,
            states=c.state_bits(states),
            children=[element_ref(ch) for ch in children],
        )
    key, _app, parent, index, count, interfaces, name, role, description, states = item
    return RawNode(
        key=element_ref(key),
        parent=element_ref(parent),
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
                parent=element_ref(parent) if parent else None,
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


def _first(reply: Reply) -> Any:
    assert not isinstance(reply, CallFailed)
    return reply[0]
