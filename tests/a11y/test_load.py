"""The accessibility client under concurrent load, against the real GTK form fixture."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tests.toolkits import only_on

from deskrig.a11y import AccessibilityClient
from deskrig.errors import DeskrigError

from .conftest import FormApp

T = TypeVar("T")
Run = Callable[[Coroutine[Any, Any, T]], T]

#: Concurrent snapshots per round, as 20 MCP clients calling get_app_state at once. The full
#: 8 rounds x 20 clients x 100 calls is `scripts/bench reliability`.
CLIENTS = 20
ROUNDS = 5


@only_on("gtk", why="GTK reads its bus socket slowly enough to fill it; the defect was found there")
def test_concurrent_snapshots_all_succeed(run: Run[Any], client: AccessibilityClient, form: FormApp) -> None:
    """20 snapshots at once fill the socket to the app faster than GTK reads it. dbus-fast took the
    full buffer (EAGAIN) for a lost connection: every pending call failed, the next hit EBADF."""
    failures: Counter[str] = Counter()

    async def one() -> None:
        try:
            await client.snapshot(form.pid, max_elements=None)
        except DeskrigError as exc:
            failures[f"{exc.code.value}: {exc.message[:80]}"] += 1

    async def load() -> None:
        for _ in range(ROUNDS):
            await asyncio.gather(*(one() for _ in range(CLIENTS)))

    run(load())
    assert not failures, failures
