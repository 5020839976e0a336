"""`scripts/bench sway` in one round against real X11 and sway rigs, and the round-robin timing
it is built on."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from deskrig.bench import sway
from deskrig.bench.stats import awaitable, measure_interleaved

pytestmark = pytest.mark.slow


def test_interleaved_cases_run_in_turn_and_count_their_childrens_cpu() -> None:
    order: list[str] = []
    burn = [sys.executable, "-c", "sum(range(3_000_000))"]
    cases = [
        ("idle", awaitable(lambda: order.append("idle"))),
        ("child", awaitable(lambda: (order.append("child"), subprocess.run(burn, check=True)))),
    ]
    idle, child = anyio.run(measure_interleaved, cases, 3, 1)
    assert order == ["idle", "child"] * 4  # one warm-up round, then three
    assert (idle.name, len(idle.samples_ms), len(idle.cpu_samples_ms)) == ("idle", 3, 3)
    assert min(child.cpu_samples_ms) > 10 * max(idle.cpu_samples_ms)
    assert child.cpu().name == "child, CPU"


def test_one_round_of_every_comparison_on_both_rigs() -> None:
    with sway.rig_side("x11", "X11") as x11, sway.rig_side("sway", "sway") as on_sway:
        assert on_sway.window.bounds.width == sway.SIZE[0]  # tiled: the app fills the output
        captures, actions = sway.capture_rows(x11, on_sway, 1), sway.action_rows(x11, on_sway, 1)
        idle = sway.measure_idle("a moment", on_sway, 0.5)
    targets = {(row.timing.name, row.baseline.name): row.target for row in captures + actions if row.baseline}
    assert targets[("sway: screenshot_screen png", "peer: grim - (full screen)")] == 3.0
    assert targets[("sway: screenshot_screen png", "X11: screenshot_screen png")] == 0.5
    assert targets[("sway: click + after-screenshot", "peer: swaymsg click + grim -")] == 5.0
    assert all(row.timing.p50 > 0 and row.timing.cpu_samples_ms for row in captures + actions)
    # The headless output's frame timer wakes sway however still the screen is.
    assert idle.sway_wakeups > 0 and idle.sway_cpu_ms >= 0 and idle.server_cpu_ms >= 0
