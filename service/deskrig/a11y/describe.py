"""Turning raw nodes into :class:`Element` s: bounds, actions, values and text, in one batch.

Details are fetched only for the elements that show; the rest keep what their node says.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from deskrig.a11y import constants as c
from deskrig.a11y.connection import AppConnection, CallFailed, Reply, Request
from deskrig.a11y.nodes import RawNode, parse_properties, property_requests
from deskrig.a11y.tree import Element, ElementRef, PathStep, ValueInfo
from deskrig.model import Bounds

#: Characters of Text interface content kept per element.
TEXT_CAP = 4000
#: GTK reports hidden widgets at this origin.
_OFFSCREEN = -(2**30)
#: The properties read per element with a Value when the app lacks GetAll.
VALUE_PROPERTIES = ("CurrentValue", "MinimumValue", "MaximumValue", "MinimumIncrement")


Kept = tuple[RawNode, int, int | None, tuple[PathStep, ...]]  # node, depth, parent index, path


@dataclass(frozen=True, slots=True)
class Details:
    """The detail requests a node called for, and their replies: read ahead of the node's own
    re-read, and used by :func:`describe_many` if the fresh node calls for the same requests."""

    requests: list[Request]
    replies: list[Reply]


async def read_details(app: AppConnection, nodes: Sequence[RawNode]) -> list[Details]:
    """Each node's details as its node (read earlier) calls for them, in one batch."""
    groups = [_all_detail_requests(app, node) for node in nodes]
    replies = await app.call_many([r for group in groups for r in group])
    details, start = [], 0
    for group in groups:
        details.append(Details(group, replies[start : start + len(group)]))
        start += len(group)
    return details


def answered_by(app: AppConnection, node: RawNode, details: Details | None) -> bool:
    """Whether ``details`` (read ahead) answer every detail request of ``node``."""
    return details is not None and details.requests == _all_detail_requests(app, node)


async def describe_many(
    app: AppConnection,
    kept: Sequence[Kept],
    indices: Sequence[int] | None = None,
    read_ahead: Mapping[ElementRef, Details] | None = None,
) -> list[Element]:
    """Turn raw nodes into :class:`Element` s, numbered by ``indices`` (default: their places in
    ``kept``), fetching bounds, actions, values and text in one batch; a node's details in
    ``read_ahead`` are used instead where its requests are the same."""
    requests: list[Request] = []
    wanted: list[dict[str, slice]] = []  # per node: detail name -> its replies' place in requests
    reused: list[Details | None] = []  # per node: the details read ahead that answer its requests
    for node, _depth, _parent, _path in kept:
        slots = {}
        own: list[Request] = []
        for detail, detail_requests in _detail_requests(app, node):
            slots[detail] = slice(len(own), len(own) + len(detail_requests))
            own.extend(detail_requests)
        ahead = (read_ahead or {}).get(node.key)
        if ahead is not None and ahead.requests == own:  # answered_by, with the requests at hand
            reused.append(ahead)
        else:
            reused.append(None)
            slots = {
                detail: slice(s.start + len(requests), s.stop + len(requests)) for detail, s in slots.items()
            }
            requests.extend(own)
        wanted.append(slots)
    fetched = await app.call_many(requests)
    elements = []
    for index, (node, depth, parent, path), slots, ahead in zip(
        range(len(kept)) if indices is None else indices, kept, wanted, reused, strict=True
    ):
        replies = fetched if ahead is None else ahead.replies
        got = {detail: replies[where] for detail, where in slots.items()}
        text = _text(got.get("text"))
        # model_construct: the values come from typed D-Bus replies, and validation would add
        # a few milliseconds per few hundred elements.
        elements.append(
            Element.model_construct(
                index=index,
                parent=parent,
                depth=depth,
                role=c.role_name(node.role),
                name=node.name,
                description=node.description,
                states=tuple(c.state_names(node.states)),
                text=text[:TEXT_CAP] if text is not None else None,
                text_truncated=text is not None and len(text) > TEXT_CAP,
                value=_value(got.get("value")),
                actions=_actions(got.get("actions")),
                bounds=_bounds(got.get("bounds")),
                child_count=node.child_count,
                offscreen_children_omitted=node.offscreen_omitted,
                interfaces=tuple(sorted(node.interfaces)),
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


def _all_detail_requests(app: AppConnection, node: RawNode) -> list[Request]:
    return [request for _detail, requests in _detail_requests(app, node) for request in requests]


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


def _actions(replies: list[Reply] | None) -> tuple[str, ...]:
    reply = _single(replies)
    if reply is None or isinstance(reply, CallFailed):
        return ()
    return tuple(name for name, _description, _keybinding in reply[0] if name)


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
