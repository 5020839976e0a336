"""python-xlib fixture: a window that turns the keys it gets into keysyms with its own copy of the
keyboard mapping, re-read as Xlib re-reads it, and that misses one change of the mapping as Xlib
can.

Xlib re-reads lazily: a MappingNotify marks its copy stale and the next key it translates fetches
the map again; its first copy too is fetched at its first key. This app drops the first
MappingNotify after that first fetch. That is Xlib's miss: it asks XKB for map notifications only
once its first XkbGetMap is answered, so a change the server makes between the two never reaches
it (xedit, whose first key was deskrig's sentinel, on a loaded machine).

python tests/apps/x_key_reader.py --display :N --log FILE   (the tests' interpreter: python-xlib)

The log has a JSON line per event: {"ready": true} once the window is mapped, {"read": true} per
fetch of the map, {"missed": true} for the change dropped, and {"keysym": K} per key press (0 for
a keycode without keysyms). Every key is answered with a fill of the window, which is the repaint
deskrig waits for after typing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from Xlib import X
from Xlib.display import Display


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--display", required=True)
    parser.add_argument("--log", type=Path, required=True)
    options = parser.parse_args()
    log = options.log.open("a", encoding="utf-8")

    def note(entry: dict[str, Any]) -> None:
        log.write(json.dumps(entry) + "\n")
        log.flush()

    display = Display(options.display)
    screen = display.screen()
    window = screen.root.create_window(
        0, 0, 400, 300, 0, screen.root_depth, background_pixel=screen.white_pixel, event_mask=X.KeyPressMask
    )
    window.set_wm_name("Key reader")
    gc = window.create_gc(foreground=screen.black_pixel)
    window.map()
    display.sync()
    first, last = display.display.info.min_keycode, display.display.info.max_keycode
    rows: list[list[int]] | None = None
    stale = False
    missing_one = True

    def fetch() -> list[list[int]]:
        note({"read": True})
        return [list(row) for row in display.get_keyboard_mapping(first, last - first + 1)]

    note({"ready": True})
    while True:
        event = display.next_event()
        if event.type == X.MappingNotify and event.request == X.MappingKeyboard:
            if rows is not None and missing_one:
                missing_one = False
                note({"missed": True})
            else:
                stale = True
        elif event.type == X.KeyPress:
            if rows is None or stale:
                rows, stale = fetch(), False
            row = rows[event.detail - first]
            shifted = bool(event.state & X.ShiftMask) and len(row) > 1 and row[1] != X.NoSymbol
            note({"keysym": row[1] if shifted else row[0]})
            window.fill_rectangle(gc, 0, 0, 10, 10)
            display.flush()


if __name__ == "__main__":
    main()
