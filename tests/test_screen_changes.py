"""The changing-screen loop (:mod:`deskrig.screen_changes`) over the scripted desktop, given a damage
fd and serial the way a backend may behave; the real X11 and sway loops are tested with their
backends (tests/desktop/test_x11.py, tests/sway/test_sway_damage.py)."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator

import pytest

from deskrig.desktop import Desktop
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.model import Bounds
from deskrig.observation import Observer
from deskrig.screen_changes import PATIENCE, ScreenChanges
from deskrig.security import WindowBlocklist


@pytest.fixture
def quiet_fd() -> Iterator[int]:
    """A damage fd nothing is ever written to."""
    read, write = os.pipe()
    yield read
    os.close(read)
    os.close(write)


def test_a_serial_moving_with_nothing_drawn_does_not_keep_the_loop_past_its_deadline(
    quiet_fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sway's serial moves on every call while it cannot prove a still screen: the loop looks once
    after a quiet wait, then gives up at its deadline."""
    world = ScriptedDesktop()
    world.add_window("still", Bounds(x=10, y=10, width=200, height=100), (0, 120, 0))
    desktop: Desktop = world.open()
    serials = itertools.count()
    monkeypatch.setattr(desktop, "damage_fd", lambda: quiet_fd)
    monkeypatch.setattr(desktop, "damage_serial", lambda: next(serials))
    changes = ScreenChanges(Observer(desktop, WindowBlocklist([])), fast_tick=0.001)
    assert changes.next(5.0) is not None
    ended = threading.Event()
    frames: list[bool] = []

    def waits() -> None:
        # Enough calls for the loop to settle (PATIENCE unchanged grabs) and wait on the fd.
        frames.extend(changes.next(0.05) is not None for _ in range(4 * PATIENCE))
        ended.set()

    threading.Thread(target=waits, daemon=True).start()  # spins for ever if the bug is back
    assert ended.wait(20), "the loop kept grabbing a still screen past its deadline"
    assert not any(frames), "a frame of a still screen"
