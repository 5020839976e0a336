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


class _Tree:
    def __init__(self, state: RecordedState) -> None:
        self.elements = {e.index: e for e in state.elements}
        self.children: dict[int | None, list[int]] = defaultdict(list)
        for element in state.elements:
            parent = element.parent if element.parent in self.elements else None
            self.children[parent].append(element.index)


def _label(element: RecordedElement) -> str:
    return f'{element.role} "{element.name}"' if element.name else element.role


def _match(
    before: list[RecordedElement], after: list[RecordedElement]
) -> tuple[list[tuple[RecordedElement, RecordedElement]], list[RecordedElement], list[RecordedElement]]:
    """(pairs, unmatched before, unmatched after): by role and name, then the rest by role."""
    if len(before) == len(after) and all(
        old.role == new.role and old.name == new.name for old, new in zip(before, after, strict=True)
    ):
        return list(zip(before, after, strict=True)), [], []  # the usual case: nothing came or went
    pairs: list[tuple[RecordedElement, RecordedElement]] = []
    for key in ((lambda e: (e.role, e.name)), (lambda e: (e.role, ""))):
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
    pairs.sort(key=lambda pair: pair[1].index)  # tree order, whichever pass matched them
    return pairs, before, after


#: An element's ancestry as a linked list (label, parent's ancestry), spelled out only for a change.
_Ancestry = tuple[str, "_Ancestry"] | None


def _where(ancestry: _Ancestry) -> str:
    labels: list[str] = []
    while ancestry is not None:
        labels.append(ancestry[0])
        ancestry = ancestry[1]
    return " > ".join(reversed(labels))


def _compare(old: RecordedElement, new: RecordedElement, ancestry: _Ancestry) -> Iterable[A11yChange]:
    if old.name == new.name and old.states == new.states and old.text == new.text and old.value == new.value:
        return
    where = _where(ancestry)

    def change(kind: str, was: str | None, now: str | None) -> A11yChange:
        return A11yChange.model_validate(
            {"kind": kind, "role": new.role, "name": new.name, "where": where, "before": was, "after": now}
        )

    if old.name != new.name:
        yield change("renamed", old.name, new.name)
    gone, came = sorted(set(old.states) - set(new.states)), sorted(set(new.states) - set(old.states))
    if gone or came:
        yield change("states", " ".join(gone) or None, " ".join(came) or None)
    text_is_name = old.text == old.name and new.text == new.name  # a label: its rename says it
    if (old.text or "") != (new.text or "") and not text_is_name:
        yield change("text", old.text, new.text)
    was = old.value.current if old.value else None
    now = new.value.current if new.value else None
    if was != now:
        yield change("value", None if was is None else f"{was:g}", None if now is None else f"{now:g}")


def diff_states(before: RecordedState, after: RecordedState) -> tuple[list[A11yChange], int]:
    """The changes from ``before`` to ``after`` (at most :data:`MAX_CHANGES`) and how many more there were."""
    old, new = _Tree(before), _Tree(after)
    changes: list[A11yChange] = []
    # Depth-first with an explicit stack: trees can be deeper than Python's recursion limit.
    stack: list[tuple[list[int], list[int], _Ancestry]] = [(old.children[None], new.children[None], None)]
    while stack:
        old_ids, new_ids, ancestry = stack.pop()
        pairs, removed, added = _match([old.elements[i] for i in old_ids], [new.elements[i] for i in new_ids])
        for kind, elements in (("removed", removed), ("added", added)):
            for element in elements:
                changes.append(
                    A11yChange.model_validate(
                        {"kind": kind, "role": element.role, "name": element.name, "where": _where(ancestry)}
                    )
                )
        for was, now in pairs:
            changes.extend(_compare(was, now, ancestry))
        for was, now in reversed(pairs):  # popped in tree order
            old_children, new_children = old.children.get(was.index), new.children.get(now.index)
            if old_children or new_children:
                stack.append((old_children or [], new_children or [], (_label(now), ancestry)))
    return changes[:MAX_CHANGES], max(0, len(changes) - MAX_CHANGES)
