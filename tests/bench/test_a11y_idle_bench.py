"""`scripts/bench a11y-idle` in one short round against a real rig whose
``--a11y-events-idle-timeout`` is 2 s: its server listens to the app's events after a read, stops
once the timeout has passed, and its next read fetches the tree whole."""

from __future__ import annotations

import pytest

from deskrig.bench import a11y_idle

pytestmark = pytest.mark.slow


def test_the_feed_ends_after_the_rigs_idle_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(a11y_idle, "CPU_SECONDS", 1.0)
    monkeypatch.setattr(a11y_idle, "IDLE_TIMEOUT_S", 2.0)
    cost = a11y_idle.measure()
    assert [source for _, (source, _) in cost.reads] == ["fetch", "mirror", "fetch"]
    assert all(took > 0 for _, (_, took) in cost.reads)
    assert all("whole rig" in shares and "app" in shares for _, shares in cost.states)
