"""Damage on sway (wlr-screencopy's copy_with_damage): the backend's damage fd sleeps while the
screen is still and wakes when something is drawn, and the live screen's capture loop sleeps on it
rather than grabbing an idle screen."""

from __future__ import annotations

import itertools
import select
import threading
import time

import anyio
import pytest
from tests.desktop.conftest import FixtureApp
from tests.desktop.screen_loops import READERS, change_seen_after_another_reader, quiet
from tests.polling import poll
from tests.sway.conftest import window_of

from deskrig.desktop import Desktop
from deskrig.live import LiveScreen
from deskrig.observation import Observer
from deskrig.security import WindowBlocklist

#: Seconds without a grab that show the live screen's loop asleep (it grabbed four times a second).
ASLEEP_SECONDS = 3.0
_MOVES = itertools.count()


def _redraw(desktop: Desktop, form_app: FixtureApp) -> None:
    """Change the screen: move the pointer (headless sway draws it into its frames) somewhere new
    over the form."""
    window = window_of(desktop, form_app)
    step = next(_MOVES) % 20
    x, y = window.bounds.x + 20 + 3 * step, window.bounds.y + 20 + 2 * step
    desktop.with_input(lambda device: device.move(x, y))


def test_the_damage_fd_sleeps_on_a_still_screen_and_wakes_on_a_change(
    sway_desktop: Desktop, form_app: FixtureApp
) -> None:
    poll("sway's screen still", lambda: quiet(sway_desktop), timeout=30)
    fd = sway_desktop.damage_fd()
    assert fd is not None
    _redraw(sway_desktop, form_app)  # the pointer moves: sway draws it into its frames
    assert select.select([fd], [], [], 5.0)[0], "no damage reported for the pointer's move"
    poll("sway's screen still again", lambda: quiet(sway_desktop), timeout=30)


def test_the_live_screen_grabs_an_idle_sway_screen_no_more(
    sway_desktop: Desktop, form_app: FixtureApp, grab_times: list[float]
) -> None:
    """Before the damage watch, the loop grabbed sway's still screen four times a second."""
    screen = LiveScreen(Observer(sway_desktop, WindowBlocklist([])))
    stopping = threading.Event()
    frames: list[int] = []

    async def watch() -> None:
        async for frame in screen.frames(stopping):
            frames.append(frame.seq)

    def run() -> None:
        anyio.run(watch)

    viewer = threading.Thread(target=run)
    viewer.start()
    try:
        poll("the first frame", lambda: frames, timeout=10)
        poll(
            f"no grab for {ASLEEP_SECONDS:g} s",
            lambda: time.monotonic() - grab_times[-1] > ASLEEP_SECONDS,
            timeout=30,
        )
        shown = len(frames)
        _redraw(sway_desktop, form_app)
        poll("a frame of the change", lambda: len(frames) > shown, timeout=5)
    finally:
        stopping.set()
        viewer.join(timeout=10)


@pytest.mark.parametrize("reader", READERS)
def test_the_changing_screen_sees_a_change_whose_damage_another_reader_took_first(
    sway_desktop: Desktop, form_app: FixtureApp, reader: str
) -> None:
    change_seen_after_another_reader(sway_desktop, reader, lambda: _redraw(sway_desktop, form_app))


def test_the_damage_serial_stays_put_while_held_frames_prove_a_still_screen_and_moves_on_a_change(
    sway_desktop: Desktop, form_app: FixtureApp
) -> None:
    """What lets a screenshot of a still screen reuse its encoding, as on X11."""

    def settled() -> int | None:
        sway_desktop.grab(sway_desktop.screen_bounds())  # a capture: the watch holds frames
        serial = sway_desktop.damage_serial()
        return serial if sway_desktop.damage_serial() == serial else None

    still = poll("the serial settled", settled, timeout=30)
    _redraw(sway_desktop, form_app)
    assert sway_desktop.damage_serial() != still  # deskrig's own change, drawn or not yet
