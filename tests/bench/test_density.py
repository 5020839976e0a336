"""`scripts/bench density`: the steps and the knee, what one rig's threads did over a window, and
one small step against a real Docker rig with every figure the issue asks for."""

from __future__ import annotations

import time

import anyio
import pytest
from tests.orchestrator.conftest import build_images

from deskrig.bench import density
from deskrig.bench.density import ProcessUse, knee, next_count
from deskrig.bench.stats import at_once


def _counts(max_rigs: int, held_up_to: int) -> list[int]:
    counts, count = [], next_count(0, True, max_rigs)
    while count is not None:
        counts.append(count)
        count = next_count(count, count <= held_up_to, max_rigs)
    return counts


def test_steps_reach_the_target_whatever_happens_and_go_on_only_while_every_rig_answers() -> None:
    assert _counts(128, held_up_to=0) == [16, 32, 48, 64]
    assert _counts(128, held_up_to=80) == [16, 32, 48, 64, 80, 96]
    assert _counts(128, held_up_to=1000) == [16, 32, 48, 64, 80, 96, 112, 128]
    assert _counts(70, held_up_to=1000) == [16, 32, 48, 64, 70]
    assert _counts(2, held_up_to=0) == [2]
    assert knee({16: True, 32: True, 48: False, 64: False}) == 32
    assert knee({16: False}) == 0


def test_the_rigs_images_are_the_bench_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    """DESKRIG_BENCH_TAG runs the orchestrator and density suites on a build under its own tag."""
    monkeypatch.delenv("DESKRIG_BENCH_TAG", raising=False)
    assert density.bare_image() == "deskrig/rig:latest"
    monkeypatch.setenv("DESKRIG_BENCH_TAG", "mine")
    assert density.bare_image() == "deskrig/rig:mine"


def test_a_threads_counts_go_with_it_and_a_new_thread_counts_from_zero() -> None:
    before = {("app", "10"): (5_000_000, 10), ("app", "11"): (9_000_000, 90), ("Xvfb", "20"): (1_000_000, 3)}
    after = {("app", "10"): (7_000_000, 14), ("app", "12"): (1_000_000, 2), ("Xvfb", "20"): (1_000_000, 3)}
    assert density._per_process(before, after, 2.0) == {
        "app": ProcessUse(cpu_ms_per_s=1.5, wakeups_per_s=3.0),  # thread 11 ended: not -4 ms/s
        "Xvfb": ProcessUse(cpu_ms_per_s=0.0, wakeups_per_s=0.0),
    }


def test_at_once_starts_every_call_together_and_keeps_their_order() -> None:
    async def sleepy(delay: float) -> float:
        await anyio.sleep(delay)
        return delay

    async def run() -> tuple[list[float], float]:
        started = time.monotonic()
        results = await at_once([lambda delay=delay: sleepy(delay) for delay in (0.3, 0.1, 0.2)])
        return results, time.monotonic() - started

    results, took = anyio.run(run)
    assert results == [0.3, 0.1, 0.2]
    assert took < 0.6  # together, not one after another


@pytest.mark.docker
@pytest.mark.slow
def test_one_step_of_one_real_rig_prints_every_figure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    build_images("rig-image", "rig")
    monkeypatch.setattr(density, "SETTLE_S", 1.0)
    monkeypatch.setattr(density, "QUIET_WINDOW_S", 3.0)
    (step,) = density.run(1)
    assert step.rigs == 1
    idle = step.idle
    assert 30 < idle.rig_memory_mib[0] < 1024
    assert 0 <= idle.rig_cpu_ms_per_s[0] < 1000
    assert 0 < idle.machine_busy <= 1 and idle.load_1min >= 0
    # The processes a GTK rig runs, each measured (the engine runs on this kernel here).
    assert {"Xvfb", "openbox", "deskrig", "python3", "dbus-daemon", "at-spi2-registr"} <= set(idle.first_rig)
    for spread in (step.one_at_a_time, step.all_at_once, step.fresh_all_at_once):
        assert len(spread.samples_ms) == 1 and spread.p50 > 0
    printed = capsys.readouterr().out
    assert "| 1 | " in printed and "knee: most idle rigs" in printed and "| deskrig | " in printed
