"""Admission to the orchestrator's rig slots: at most ``max_sessions`` rigs, the rest wait in line."""

from __future__ import annotations

from collections import deque

import anyio


class Slots:
    """FIFO admission: at most ``capacity`` holders; waiters get slots in arrival order."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._holders: set[str] = set()
        self._queue: deque[tuple[str, anyio.Event]] = deque()

    def position(self, key: str) -> int | None:
        for index, (queued, _) in enumerate(self._queue):
            if queued == key:
                return index + 1
        return None

    def hold(self, key: str) -> None:
        """Count ``key`` as a holder at once, even past capacity: its rig already runs."""
        self._holders.add(key)

    def request(self, key: str) -> anyio.Event:
        """Join the line (at once, so the order is the order of requests); the event fires with a slot."""
        granted = anyio.Event()
        if len(self._holders) < self.capacity and not self._queue:
            self._holders.add(key)
            granted.set()
        else:
            self._queue.append((key, granted))
        return granted

    def resize(self, capacity: int) -> None:
        """A new capacity (a cluster gained or lost nodes): more slots go to the line at once;
        with fewer, holders keep theirs and the line waits until enough are released."""
        self.capacity = capacity
        self._grant()

    def release(self, key: str) -> None:
        """Give up a slot or a place in line (either is fine; neither is a no-op)."""
        self._holders.discard(key)
        self._queue = deque(entry for entry in self._queue if entry[0] != key)
        self._grant()

    def _grant(self) -> None:
        while self._queue and len(self._holders) < self.capacity:
            next_key, granted = self._queue.popleft()
            self._holders.add(next_key)
            granted.set()
