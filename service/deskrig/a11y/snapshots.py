"""The last few snapshots, by id, so action tools can name an element as ``{snapshot_id, index}``."""

from __future__ import annotations

from collections import OrderedDict, deque

from deskrig.a11y.tree import Element, Snapshot
from deskrig.errors import DeskrigError, ErrorCode

DEFAULT_CAPACITY = 32
#: How many evicted ids are remembered, to tell "expired" from "never existed".
_EVICTED_MEMORY = 1024


class SnapshotStore:
    """Keeps the newest ``capacity`` snapshots; older ones expire first in, first out."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()
        self._evicted: deque[str] = deque(maxlen=_EVICTED_MEMORY)

    def __len__(self) -> int:
        return len(self._snapshots)

    def add(self, snapshot: Snapshot) -> None:
        self._snapshots[snapshot.snapshot_id] = snapshot
        while len(self._snapshots) > self._capacity:
            evicted_id, _ = self._snapshots.popitem(last=False)
            self._evicted.append(evicted_id)

    def get(self, snapshot_id: str) -> Snapshot:
        snapshot = self._snapshots.get(snapshot_id)
        if snapshot is not None:
            return snapshot
        expired = snapshot_id in self._evicted
        if expired:
            why = f"snapshot {snapshot_id!r} has expired: only the newest {self._capacity} snapshots are kept"
        else:
            why = f"unknown snapshot id {snapshot_id!r}: no snapshot with that id was taken by this rig"
        raise DeskrigError(
            ErrorCode.ELEMENT_NOT_FOUND,
            why,
            details={"snapshot_id": snapshot_id, "reason": "expired" if expired else "unknown"},
        )

    def resolve(self, snapshot_id: str, index: int) -> Element:
        """The element ``index`` of snapshot ``snapshot_id``, or ELEMENT_NOT_FOUND saying why."""
        return self.get(snapshot_id).element(index)
