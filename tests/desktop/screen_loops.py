"""The changing-screen loop (:mod:`deskrig.screen_changes`) against another reader of the damage,
shared by the X11 and the sway tests: the video and the live screen sleep on the backend's damage
fd, and a screenshot's ``damage_serial`` (which drains it), or the other loop waking first, may
take the notification before they wake. Their next look must still see the change."""

from __future__ import annotations

import select
from collections.abc import Callable

from tests.polling import poll

from deskrig.desktop.base import Desktop
from deskrig.observation import Observer
from deskrig.screen_changes import ScreenChanges, ScreenFrame
from deskrig.security import WindowBlocklist

#: A still screen makes no damage for this long.
QUIET_SECONDS = 1.0
#: Who takes the damage first: screenshots reading the serial, or the other loop (video and live).
READERS = ["screenshot", "another loop"]


def quiet(desktop: Desktop) -> bool:
    """Read the damage so far, as a screenshot does, then whether none comes for
    :data:`QUIET_SECONDS`."""
    fd = desktop.damage_fd()
    assert fd is not None
    desktop.damage_serial()
    return not select.select([fd], [], [], QUIET_SECONDS)[0]


def settled_loop(desktop: Desktop) -> ScreenChanges:
    """A changing-screen loop that has shown the screen and fallen asleep on the damage fd."""
    changes = ScreenChanges(Observer(desktop, WindowBlocklist([])))
    assert changes.next(5.0) is not None  # the screen as it is
    poll("the loop asleep on a still screen", lambda: changes.next(0.3) is None, timeout=30)
    return changes


def change_seen_after_another_reader(
    desktop: Desktop, reader: str, change: Callable[[], None]
) -> ScreenFrame:
    """The frame a settled loop shows of ``change`` once ``reader`` (of :data:`READERS`) took every
    damage notification of it, up to a still screen."""
    changes = settled_loop(desktop)
    other = settled_loop(desktop) if reader == "another loop" else None
    # No wait on the fd for the change's damage here: a reader left from an earlier test (a live
    # screen's last wait) may take it too, which is just what the loop must survive.
    change()
    if other is None:
        poll("screenshots reading the damage up to a still screen", lambda: quiet(desktop), timeout=30)
    else:
        assert poll("the other loop's frame of the change", lambda: other.next(0.3), timeout=5)
        poll("the other loop asleep again", lambda: other.next(QUIET_SECONDS) is None, timeout=30)

    return poll("the change", lambda: changes.next(0.3), timeout=5)
