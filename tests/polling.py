"""The one way the tests wait for something to happen: ``poll(what, check)``; and what they read
while they wait: :func:`json_lines`, the events a fixture app is still writing to its log."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: Long enough for a slow, shared CI machine; a passing check returns as soon as it holds.
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_INTERVAL_S = 0.05


def poll(
    what: str,
    check: Callable[[], T | None],
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = DEFAULT_INTERVAL_S,
) -> T:
    """Call ``check`` until it returns something truthy and return that; fail saying ``what``
    never happened (with the last value seen) after ``timeout`` seconds. ``check`` always runs
    at least once, and once more at the deadline, so a slow machine is not failed early."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def json_lines(log: Path) -> list[dict[str, Any]]:
    """The complete lines of a JSON-lines log that another process may be writing right now (none
    while it does not exist). A read beside a write can see part of it, even of one ``write()`` in
    append mode: the last line without its newline is left for the next read."""
    if not log.exists():
        return []
    complete = log.read_text(encoding="utf-8").rpartition("\n")[0]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]
