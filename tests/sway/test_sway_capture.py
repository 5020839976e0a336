"""What a sway capture costs and keeps: its CPU on a busy screen (held frames or sway's next frame,
never polling), and its pixels after the next capture reuses the shared-memory buffer."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest
from tests.desktop.conftest import SCREEN, FixtureApp, stop_process
from tests.polling import poll
from tests.sway.conftest import COLOR, app_env, window_of
from tests.sway.swayproc import start_sway

from deskrig.desktop import Desktop, open_desktop
from deskrig.model import Bounds

CAPTURES = 20
#: CPU per capture, well above what a capture that sleeps on the socket spends here (about
#: 0.6 ms for a small region, 3 ms for the whole 1280x800 screen) and well below what polling
#: the compositor with round trips through a frame interval spent (about 6 and 12 ms).
REGION_CPU_BUDGET_MS = 2.0
SCREEN_CPU_BUDGET_MS = 7.0


@pytest.fixture(scope="module")
def animated_desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desktop]:
    """A sway of its own showing gtk3-widget-factory, whose spinners redraw every frame: the damage
    watch's thread then copies every frame while captures come (its CPU counts), and a capture it
    cannot answer waits for sway's next frame, as on any busy screen."""
    session = start_sway(tmp_path_factory.mktemp("sway-animated"), SCREEN)
    app = subprocess.Popen(
        ["gtk3-widget-factory"], env=app_env(session), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in session.env.items():
                patch.setenv(name, value)
            desktop = open_desktop("sway")
        poll("gtk3-widget-factory's window", desktop.windows)
        yield desktop
        desktop.close()
    finally:
        stop_process(app)
        session.stop()


def _cpu_ms_per_capture(desktop: Desktop, region: Bounds) -> float:
    """CPU of this process (the damage watch's thread included) per grab, as the tools take them."""
    desktop.grab(region)  # the shared-memory buffers are made on the first captures
    desktop.grab(region)
    started = time.process_time()
    for _ in range(CAPTURES):
        desktop.grab(region)
    return (time.process_time() - started) * 1000 / CAPTURES


def test_a_capture_sleeps_while_sway_renders_its_frame(animated_desktop: Desktop) -> None:
    spent = _cpu_ms_per_capture(animated_desktop, Bounds(x=100, y=100, width=200, height=200))
    assert spent < REGION_CPU_BUDGET_MS


def test_a_full_screen_capture_copies_the_pixels_once(animated_desktop: Desktop) -> None:
    spent = _cpu_ms_per_capture(animated_desktop, animated_desktop.screen_bounds())
    assert spent < SCREEN_CPU_BUDGET_MS


def test_a_capture_keeps_its_pixels_when_the_next_one_reuses_the_buffer(
    sway_desktop: Desktop, color_app: FixtureApp
) -> None:
    window = window_of(sway_desktop, color_app)
    inside = Bounds(x=window.bounds.x + 10, y=window.bounds.y + 10, width=40, height=40)
    beside = inside.model_copy(update={"x": window.bounds.right + 10})  # the same shape: the same buffer
    # Until the form app has drawn itself, sway may still show the colour app's wider first frame there.
    poll(
        "other pixels beside the colour app", lambda: sway_desktop.capture(beside).getpixel((20, 20)) != COLOR
    )
    first = sway_desktop.capture(inside)
    sway_desktop.capture(beside)
    assert first.getcolors() == [(40 * 40, COLOR)]
