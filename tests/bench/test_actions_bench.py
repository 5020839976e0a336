"""`scripts/bench actions`' get_app_state comparison in one round against a real rig: the pyatspi
walk, the bare JSON-RPC client (session and stateless calls), mcp.Client (with and without its
output schema check), deskrig.client (jsonschema-rs first) and the TypeScript SDK's Client all answer, and each is set against the walk;
then tools/list through a 2026-07-28 mcp.Client, over the wire and from its cache."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import pytest

from deskrig.bench import actions
from deskrig.bench.stats import Timing

pytestmark = pytest.mark.slow


def test_one_round_of_get_app_state_against_the_pyatspi_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds: list[list[str]] = []
    measure_interleaved = actions.measure_interleaved

    async def noting_the_order(
        cases: Sequence[tuple[str, Callable[[], Awaitable[object]]]], runs: int, warmup: int = 2
    ) -> list[Timing]:
        rounds.append([name for name, _ in cases])
        return await measure_interleaved(cases, runs, warmup)

    monkeypatch.setattr(actions, "measure_interleaved", noting_the_order)
    rows = actions.app_state_rows(1)
    # mcp.Client's pure-Python check of the elements slows the next call in this process: the
    # peer, timed in its own process, is the one that follows it, round after round.
    order, listings = rounds
    assert order[(order.index(actions.SDK_APP_STATE_ELEMENTS) + 1) % len(order)] == "peer"
    peer = rows[0].timing
    assert peer.name.startswith("peer: pyatspi walk (") and peer.samples_ms, "the walker walked"
    # Last, tools/list through a 2026-07-28 mcp.Client, over the wire and from its cache.
    wire, cached = rows[-2:]
    assert [wire.timing.name, cached.timing.name] == listings
    assert cached.baseline is wire.timing and wire.timing.p50 > 0 and cached.timing.p50 > 0
    compared = {row.timing.name: row for row in rows if row.baseline is peer and row.target}
    assert {name.split(",")[0] for name in compared} == {
        "get_app_state",
        "get_app_state over MCP/HTTP",
        "get_app_state with include_elements=true over MCP/HTTP",
    }
    # in process; the default answer through the bare client (session, stateless), mcp.Client,
    # deskrig.client and the TypeScript SDK's Client; with the elements through the bare client,
    # mcp.Client and deskrig.client
    assert len(compared) == 9
    assert all(row.timing.p50 > 0 for row in rows)
    assert [row.timing.name for row in rows if row.timing.name.endswith(", CPU")] == [
        "get_app_state over MCP/HTTP, bare JSON-RPC client, CPU",
        "get_app_state over MCP/HTTP, mcp.Client (checks the result against the outputSchema), CPU",
        "get_app_state with include_elements=true over MCP/HTTP, mcp.Client (checks the result against the "
        "outputSchema), CPU",
        f"get_app_state with include_elements=true over MCP/HTTP, {actions.QUICK_CLIENT}, CPU",
        "get_app_state with include_elements=true over MCP/HTTP, mcp.Client without its outputSchema check, CPU",
    ]
