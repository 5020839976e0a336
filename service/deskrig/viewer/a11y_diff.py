"""What changed in an app's accessibility tree across one action: elements added, removed,
renamed, and changes of states, text and value.

The two snapshots are walked together from their roots. Children of a matched pair are matched by
role and name first (the n-th "push button OK" with the n-th), then what is left by role in tree
order, which is how a label whose text changed ("clicked 0" -> "clicked 1") shows as renamed
rather than as one removed and one added. A removed or added element is reported once, not
with each of its descendants.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from deskrig.viewer.models import A11yChange, RecordedElement, RecordedState

#: Changes listed per turn at most; the rest are counted (a list refilled with 500 rows is one story).
MAX_CHANGES = 200


def _children(state: RecordedState) -> dict[int | None, list[RecordedElement]]:
    """Each element's children in tree order, by its index; the roots under None (so is an element
    whose parent is not in the snapshot)."""
    elements = state.get("elements", [])
    known = {element["index"] for element in elements}
    children: dict[int | None, list[RecordedElement]] = defaultdict(list)
    for element in elements:
        parent = element["parent"]
        children[parent if parent in known else None].append(element)
    return children


def _name(element: RecordedElement) -> str:
    return element.get("name") or ""


def _current(element: RecordedElement) -> float | None:
    value = element.get("value")
    return value["current"] if value else None


def _label(element: RecordedElement) -> str:
    name = _name(element)
    return f'{element["role"]} "{name}"' if name else element["role"]


def _by_name(element: RecordedElement) -> tuple[str, str]:
    return element["role"], _name(element)


def _by_role(element: RecordedElement) -> tuple[str, str]:
    return element["role"], ""


def _match(
    before: list[RecordedElement], after: list[RecordedElement]
) -> tuple[list[tuple[RecordedElement, RecordedElement]], list[RecordedElement], list[RecordedElement]]:
    """(pairs, unmatched before, unmatched after): by role and name, then the rest by role."""
    if [_by_name(e) for e in before] == [_by_name(e) for e in after]:
        return list(zip(before, after, strict=True)), [], []  # the usual case: nothing came or went
    pairs: list[tuple[RecordedElement, RecordedElement]] = []
    for key in (_by_name, _by_role):
        waiting: dict[tuple[str, str], list[RecordedElement]] = defaultdict(list)
        for element in after:
            waiting[key(element)].append(element)
        rest: list[RecordedElement] = []
        for element in before:
            candidates = waiting.get(key(element))
            if candidates:
                pairs.append((element, candidates.pop(0)))
            else:
                rest.append(element)
        paired = {id(a) for _, a in pairs}
        before, after = rest, [e for e in after if id(e) not in paired]
    pairs.sort(key=lambda pair: pair[1]["index"])  # tree order, whichever pass matched them
    return pairs, before, after


#: An element's ancestry as a linked list (element, parent's ancestry), spelled out only for a change.
_Ancestry = tuple[RecordedElement, "_Ancestry"] | None


def _where(ancestry: _Ancestry) -> str:
    labels: list[str] = []
    while ancestry is not None:
        labels.append(_label(ancestry[0]))
        ancestry = ancestry[1]
    return " > ".join(reversed(labels))


def _same(old: RecordedElement, new: RecordedElement) -> bool:
    return (
        _name(old) == _name(new)
        and old.get("states", []) == new.get("states", [])
        and old.get("text") == new.get("text")
        and _current(old) == _current(new)
    )


def _compare(old: RecordedElement, new: RecordedElement, ancestry: _Ancestry) -> Iterable[A11yChange]:
    where = _where(ancestry)
    old_name, new_name = _name(old), _name(new)
    old_text, new_text = old.get("text"), new.get("text")

    def change(kind: str, was: str | None, now: str | None) -> A11yChange:
        return A11yChange.model_validate(
            {"kind": kind, "role": new["role"], "name": new_name, "where": where, "before": was, "after": now}
        )

    if old_name != new_name:
        yield change("renamed", old_name, new_name)
    old_states, new_states = set(old.get("states", [])), set(new.get("states", []))
    gone, came = sorted(old_states - new_states), sorted(new_states - old_states)
    if gone or came:
        yield change("states", " ".join(gone) or None, " ".join(came) or None)
    text_is_name = old_text == old_name and new_text == new_name  # a label: its rename says it
    if (old_text or "") != (new_text or "") and not text_is_name:
        yield change("text", old_text, new_text)
    was, now = _current(old), _current(new)
    if was != now:
        yield change("value", None if was is None else f"{was:g}", None if now is None else f"{now:g}")


def diff_states(before: RecordedState, after: RecordedState) -> tuple[list[A11yChange], int]:
    """The changes from ``before`` to ``after`` (at most :data:`MAX_CHANGES`) and how many more there were."""
    old, new = _children(before), _children(after)
    changes: list[A11yChange] = []
    # Depth-first with an explicit stack: trees can be deeper than Python's recursion limit.
    stack: list[tuple[list[RecordedElement], list[RecordedElement], _Ancestry]] = [
        (old[None], new[None], None)
    ]
    while stack:
        old_level, new_level, ancestry = stack.pop()
        # Most levels of a tree are as they were: equal element for element (one comparison in C).
        if old_level == new_level:
            pairs = list(zip(old_level, new_level, strict=True))
        else:
            pairs, removed, added = _match(old_level, new_level)
            for kind, elements in (("removed", removed), ("added", added)):
                for element in elements:
                    where = _where(ancestry)
                    changes.append(
                        A11yChange.model_validate(
                            {"kind": kind, "role": element["role"], "name": _name(element), "where": where}
                        )
                    )
            for was, now in pairs:
                if was != now and not _same(was, now):  # an index moved, or something changed
                    changes.extend(_compare(was, now, ancestry))
        for was, now in reversed(pairs):  # popped in tree order
            old_children, new_children = old.get(was["index"]), new.get(now["index"])
            if old_children or new_children:
                stack.append((old_children or [], new_children or [], (now, ancestry)))
    return changes[:MAX_CHANGES], max(0, len(changes) - MAX_CHANGES)
