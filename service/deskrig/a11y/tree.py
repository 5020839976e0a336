"""The snapshot model: one fetched accessibility tree, its text rendering, and element queries.

A :class:`Snapshot` is an immutable, flattened, depth-first list of :class:`Element` s; an element's
``index`` is its position in that list and stays meaningful for as long as the snapshot is kept
(see :mod:`deskrig.a11y.snapshots`). Each element carries an :class:`ElementRef` (the D-Bus
address of the live object) for the server's own use, left out of the public JSON.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Generic, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

T = TypeVar("T")

#: States that nearly every visible element has; the text rendering leaves them out.
_UNREMARKABLE_STATES = frozenset({"visible", "showing", "sensitive", "opaque", "selectable_text"})
_RENDERED_TEXT_CHARS = 80


class ElementRef(NamedTuple):
    """Where the live accessible object is: its owner's unique name on the a11y bus and its path.

    Also the key of every node while a tree is fetched (the path alone is not unique: the
    application root's parent, the registry, has the root's path).
    """

    bus_name: str
    path: str


class PathStep(NamedTuple):
    """One step from the application root down to an element, for re-resolving it later.

    A named tuple rather than a model: a snapshot makes one per element, and it is never
    validated input.
    """

    role: str
    name: str
    nth: int  # position among earlier siblings with the same role and name


class ValueInfo(BaseModel):
    """The AT-SPI Value interface of a slider, spin button, progress bar ..."""

    model_config = ConfigDict(frozen=True)

    current: float
    minimum: float
    maximum: float
    increment: float = 0.0


def _absent(value: object) -> bool:
    """Whether an element's optional field holds nothing (None, "", 0, False or []) and is left out
    of its JSON: most elements lack most of them, and every key a client receives is one more
    value its schema validator checks (the MCP SDK's ``mcp.Client`` checks each in pure Python)."""
    return not value


def _none(value: object) -> bool:
    """For ``text``, where "" (an empty entry) says something that None (no text at all) does not."""
    return value is None


class Element(BaseModel):
    """One accessible object as it was when its snapshot was taken.

    In JSON, an optional field without a value (no text, no bounds, no actions ...) is left out:
    read it with its default.
    """

    # Immutable, down to its sequences (tuples) and nested models: the live mirror hands the same
    # element objects to every snapshot while they stay as they are (it puts a changed copy in the
    # place of one that changed), and readers keep what they made of an element by its identity
    # (the recorder's state files), so an element changed in place would go unseen. (A comment, not
    # the docstring: the docstring is the output schema's description, which clients read.)
    model_config = ConfigDict(frozen=True)

    index: int
    parent: int | None = Field(description="Index of the parent element; None for the application")
    depth: int
    role: str
    name: str
    description: str = Field(default="", exclude_if=_absent, description="Absent when empty")
    states: tuple[str, ...]
    text: str | None = Field(
        default=None,
        exclude_if=_none,
        description='Text interface content, capped; showing only; absent when none (an empty entry\'s is "")',
    )
    text_truncated: bool = Field(default=False, exclude_if=_absent, description="Absent when false")
    value: ValueInfo | None = Field(default=None, exclude_if=_absent, description="Absent when none")
    actions: tuple[str, ...] = Field(
        default=(),
        exclude_if=_absent,
        description="Action names; showing elements only; absent when none",
    )
    bounds: Bounds | None = Field(
        default=None,
        exclude_if=_absent,
        description="Screen pixels; absent when the element is not showing or bounds_unknown",
    )
    bounds_unknown: bool = Field(
        default=False,
        exclude_if=_absent,
        description="Showing, but where on screen is unknown (a popup menu the compositor moved where "
        "the toolkit does not say): no bounds, so reach it by keyboard (arrow keys, Return); absent when false",
    )
    child_count: int = Field(
        default=0, exclude_if=_absent, description="As the toolkit reports it; -1 when unknown; absent when 0"
    )
    offscreen_children_omitted: bool = Field(
        default=False,
        exclude_if=_absent,
        description="Only the showing children of this list/tree/table are included; absent when false",
    )
    interfaces: tuple[str, ...] = Field(default=(), exclude=True)
    ref: ElementRef = Field(exclude=True)
    path: tuple[PathStep, ...] = Field(default=(), exclude=True)

    def has_state(self, state: str) -> bool:
        return state in self.states

    def has_interface(self, interface: str) -> bool:
        return interface in self.interfaces

    def summary(self) -> dict[str, Any]:
        """What an AMBIGUOUS_TARGET error lists for each candidate."""
        return {
            "index": self.index,
            "role": self.role,
            "name": self.name,
            "bounds": self.bounds.model_dump() if self.bounds else None,
        }

    def render_line(self) -> str:
        """``[12] push button "Click me" (enabled, focusable) @ 100,200 80x30 actions=click``"""
        parts = [f"[{self.index}] {self.role}"]
        if self.name:
            parts.append(_quote(self.name))
        # The line is all an agent reads by default (get_app_state's elements are on request), so
        # it shows the description too: often a tool tip, what an icon button does.
        if self.description and self.description != self.name:
            parts.append(f"description={_shown(self.description)}")
        states = [s for s in self.states if s not in _UNREMARKABLE_STATES]
        if "showing" not in self.states and self.role != "application":
            states.append("hidden")
        if states:
            parts.append(f"({', '.join(states)})")
        if self.bounds is not None:
            b = self.bounds
            parts.append(f"@ {b.x},{b.y} {b.width}x{b.height}")
        elif self.bounds_unknown:
            parts.append("@ unknown")
        if self.value is not None:
            v = self.value
            parts.append(f"value={v.current:g} ({v.minimum:g}..{v.maximum:g})")
        if self.text and self.text != self.name:
            parts.append(f"text={_shown(self.text, self.text_truncated)}")
        if self.actions:
            parts.append(f"actions={','.join(self.actions)}")
        if self.offscreen_children_omitted:
            parts.append("[off-screen items omitted]")
        return " ".join(parts)


class ElementQuery(BaseModel):
    """Find an element by role and name, resolved fresh against a new snapshot.

    Both match case-insensitively. ``match="substring"`` (the default) accepts a name or role that
    contains the given text but prefers exact matches; ``match="exact"`` accepts only those.
    """

    role: str | None = None
    name: str | None = None
    match: Literal["exact", "substring"] = "substring"

    def describe(self) -> str:
        parts = [f"role={self.role!r}"] if self.role else []
        if self.name is not None:
            parts.append(f"name={self.name!r}")
        return " ".join(parts) or "any element"

    def score(self, element: Element) -> tuple[int, int, int] | None:
        """How well ``element`` matches, higher is better; None when it does not match at all.

        The tuple is (name score, role score, showing): an exact name beats a partial one, and an
        element on screen beats a hidden one with the same name and role.
        """
        name_score = _text_score(self.name, element.name, self.match)
        role_score = _text_score(self.role, element.role, self.match)
        if name_score is None or role_score is None:
            return None
        return name_score, role_score, int(element.has_state("showing"))


class Snapshot(BaseModel):
    """The accessibility tree of one application at one moment (its fields cannot be set again;
    its list of elements is its own: validation copies the list it is given)."""

    model_config = ConfigDict(frozen=True)

    snapshot_id: str
    pid: int
    app_name: str
    bus_name: str = Field(exclude=True)
    created_at: datetime
    fetch_ms: float = Field(description="Wall time spent reading the tree (from the live mirror or the app)")
    source: Literal["mirror", "fetch"] = Field(
        "fetch",
        description="mirror: the live mirror, synced with the app just now and corrected from its "
        "AT-SPI events; fetch: the whole tree was fetched from the app for this snapshot",
    )
    tree_age_ms: float = Field(0.0, description="How long ago the bulk fetch this tree descends from started")
    newest_event_age_ms: float | None = Field(
        None,
        description="How old the newest AT-SPI event of the app that this tree reflects is; None "
        "when the app sent none since the tree was fetched",
    )
    truncated: bool = Field(description="True when max_depth or max_elements cut the tree short")
    query: ElementQuery | None = Field(default=None, description="Set when elements lists only the matches")
    elements: list[Element]

    def render_text(self, lines: Sequence[str] | None = None) -> str:
        """A compact indented outline for agents, one element per line: ``lines``, the elements'
        :meth:`Element.render_line` in order, rendered here when not given (a reader that renders
        many snapshots of one tree keeps its elements' lines: :class:`RenderedElements`)."""
        header = f"app {_quote(self.app_name)} pid={self.pid} snapshot={self.snapshot_id}"
        if self.query is not None:
            header += f" matching {self.query.describe()}"
        if lines is None:
            lines = [element.render_line() for element in self.elements]
        indent = 0 if self.query is not None else 1
        outline = [header]
        outline.extend("  " * (e.depth * indent) + line for e, line in zip(self.elements, lines, strict=True))
        if self.truncated:
            outline.append("… tree truncated (raise max_depth / max_elements to see more)")
        return "\n".join(outline)

    def element(self, index: int) -> Element:
        """The element at ``index`` (valid only on an unfiltered snapshot)."""
        if not 0 <= index < len(self.elements):
            raise DeskrigError(
                ErrorCode.ELEMENT_NOT_FOUND,
                f"snapshot {self.snapshot_id} has no element {index} "
                f"(valid indices are 0..{len(self.elements) - 1})",
                details={
                    "snapshot_id": self.snapshot_id,
                    "index": index,
                    "size": len(self.elements),
                    "reason": "index_out_of_range",
                },
            )
        return self.elements[index]

    def find(self, query: ElementQuery) -> list[Element]:
        """Every element matching ``query``, best first (ties keep tree order)."""
        scored = self._scored(query)
        scored.sort(key=lambda pair: pair[0], reverse=True)
        return [e for _, e in scored]

    def resolve(self, query: ElementQuery) -> Element:
        """The one element ``query`` names; errors when none or several match equally well."""
        scored = self._scored(query)
        if not scored:
            raise DeskrigError(
                ErrorCode.ELEMENT_NOT_FOUND,
                f"no element matches {query.describe()} in {self.app_name!r} (pid {self.pid})",
                details={"query": query.model_dump(), "snapshot_id": self.snapshot_id},
                remediation="Call get_app_state to see the roles and names the app exposes.",
            )
        best = max(s for s, _ in scored)
        winners = [e for s, e in scored if s == best]
        if len(winners) > 1:
            raise DeskrigError(
                ErrorCode.AMBIGUOUS_TARGET,
                f"{len(winners)} elements match {query.describe()} equally well",
                details={
                    "query": query.model_dump(),
                    "snapshot_id": self.snapshot_id,
                    "candidates": [e.summary() for e in winners],
                },
                remediation="Use a more specific name or role, or pass "
                "{snapshot_id, index} of one of details.candidates.",
            )
        return winners[0]

    def _scored(self, query: ElementQuery) -> list[tuple[tuple[int, int, int], Element]]:
        return [(s, e) for e in self.elements if (s := query.score(e)) is not None]

    def matching(self, query: ElementQuery) -> Snapshot:
        """A copy listing only the elements that match ``query`` (indices unchanged)."""
        return self.model_copy(update={"elements": self.find(query), "query": query})


def _text_score(wanted: str | None, actual: str, match: str) -> int | None:
    if wanted is None:
        return 0
    wanted_folded, actual_folded = wanted.casefold(), actual.casefold()
    if wanted_folded == actual_folded:
        return 2
    if match == "substring" and wanted_folded in actual_folded:
        return 1
    return None


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _shown(text: str, truncated: bool = False) -> str:
    """``text`` quoted as far as a line of the rendering shows it, with an ellipsis where it goes on
    (``truncated``: the text was capped before it reached the rendering)."""
    ellipsis = "…" if truncated or len(text) > _RENDERED_TEXT_CHARS else ""
    return f"{_quote(text[:_RENDERED_TEXT_CHARS])}{ellipsis}"


class RenderedElements(Generic[T]):
    """What a reader makes of each element (its JSON, its line of the text rendering), kept for
    the elements of the snapshot it rendered last, by the element object itself.

    The live mirror hands out the same element objects for the parts of a tree that did not change
    (on gtk3-widget-factory, about 240 of 261 from one action to the next), so a reader renders
    only the others: each element anew cost about 2 ms a snapshot, all of it holding the GIL. This
    relies on an element never being changed once a snapshot holds it: ``Element`` is frozen, its
    sequences are tuples, and the mirror puts a changed copy in its place. The objects are held
    while their entries are, so an entry is never taken for another object given the same id.
    What ``render`` makes is shared by every snapshot that holds the element: readers must not
    change it. Any thread may ask."""

    def __init__(self, render: Callable[[Element], T]) -> None:
        self._render = render
        self._lock = threading.Lock()
        self._last: dict[int, tuple[Element, T]] = {}

    def of(self, elements: Sequence[Element]) -> list[T]:
        """What ``render`` made of each of ``elements``, in their order; these are kept next."""
        with self._lock:
            last: dict[int, tuple[Element, T]] = {}
            made = []
            for element in elements:
                entry = self._last.get(id(element))
                if entry is None or entry[0] is not element:
                    entry = (element, self._render(element))
                last[id(element)] = entry
                made.append(entry[1])
            self._last = last
        return made
