"""The window manager is ready only once it manages a window: openbox sets its
_NET_SUPPORTING_WM_CHECK before its event loop runs, and a MapRequest that comes in between is
lost, so an app that mapped its window then was never shown (seen under load: 3 of 40 container
starts). A stand-in window manager that drops the MapRequests of its first seconds does the same,
every time."""

from __future__ import annotations

import sys
from pathlib import Path

from deskrig.rig import Rig, RigOptions

#: Becomes the window manager (SubstructureRedirect on the root) and sets its check at once, but
#: drops every MapRequest of its first DEAF_S seconds; then maps and manages (WM_STATE,
#: _NET_CLIENT_LIST) each window asked for.
STAND_IN_WM = """#!{python}
import time
from Xlib import X, display
DEAF_S = 2.0
conn = display.Display()
root = conn.screen().root
atom = conn.get_atom
root.change_attributes(event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
check = root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
for window in (check, root):
    window.change_property(atom("_NET_SUPPORTING_WM_CHECK"), atom("WINDOW"), 32, [check.id])
conn.sync()
deaf_until = time.monotonic() + DEAF_S
clients = []
while True:
    event = conn.next_event()
    if event.type == X.MapRequest and time.monotonic() >= deaf_until:
        event.window.map()
        event.window.change_property(atom("WM_STATE"), atom("WM_STATE"), 32, [1, 0])
        clients.append(event.window.id)
        root.change_property(atom("_NET_CLIENT_LIST"), atom("WINDOW"), 32, clients)
        conn.flush()
"""


def test_an_app_is_shown_by_a_window_manager_that_drops_its_first_map_requests(tmp_path: Path) -> None:
    wm = tmp_path / "deaf-at-first-wm"
    wm.write_text(STAND_IN_WM.format(python=sys.executable))
    wm.chmod(0o755)
    options = RigOptions(size="640x480", wm=str(wm), app=["xlogo"], a11y=False, startup_timeout=10)
    with Rig(options) as rig:
        status = rig.status()
        assert status.wm_up and status.app_up
