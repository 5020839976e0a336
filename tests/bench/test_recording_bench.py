"""`scripts/bench recording`'s rows over MCP in one short round against a real rig: both clients,
every action and pacing, off and on blocks alternating (each on-block checked to have recorded
its turns)."""

from __future__ import annotations

import pytest

from deskrig.bench import recording

pytestmark = pytest.mark.slow


def test_added_cost_over_mcp_in_alternating_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recording, "BLOCK", 2)  # three runs: two blocks a side, one partly used
    monkeypatch.setattr(recording, "PACE_OVER_MCP", 0.05)
    rows = recording._over_mcp(3)
    cases = {(row.client, row.action, row.pacing) for row in rows}
    assert cases == {
        (client, action, pacing)
        for client in ("bare JSON-RPC", "mcp.Client")
        for action in ("move_cursor", "click (x, y)", "click (element)")
        for pacing in ("paced", "back-to-back")
    }
    for row in rows:
        assert len(row.off.samples_ms) == len(row.on.samples_ms) == len(row.added.samples_ms) == 3
        assert min(row.off.samples_ms + row.on.samples_ms) > 0
        assert len(row.off.cpu_samples_ms) == len(row.on.cpu_samples_ms) == 2  # one per block
        assert row.on.cpu().p50 > 0
