#!/usr/bin/python3
"""GTK3 fixture: an entry (focused) above a scrolled pane of 60 buttons, which GTK puts in a
viewport. Run with Debian's /usr/bin/python3 (python3-gi), not the project venv.

    gtk_viewport.py --log FILE

Appends ``{"event": "ready", "pid": P}`` to FILE once shown, then ``{"event": "scrolled", "value": V}``
whenever the pane scrolls. Scrolling a viewport moves its buttons and changes which of them show
without GTK reporting either (only the scroll bar's value change is reported).
"""

from __future__ import annotations

import argparse
import json
import os

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

BUTTONS = 60


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    log_file = open(parser.parse_args().log, "a", encoding="utf-8")  # noqa: SIM115 - open for the app's life

    def log(**record: object) -> None:
        log_file.write(json.dumps(record) + "\n")
        log_file.flush()

    window = Gtk.Window(title="viewport")
    window.set_default_size(300, 300)
    window.connect("destroy", Gtk.main_quit)
    buttons = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
    for number in range(BUTTONS):
        buttons.pack_start(Gtk.Button(label=f"Button {number}"), False, False, 0)
    pane = Gtk.ScrolledWindow()
    pane.add(buttons)  # not scrollable itself: GTK puts a Gtk.Viewport around it
    pane.get_vadjustment().connect("value-changed", lambda a: log(event="scrolled", value=a.get_value()))
    entry = Gtk.Entry()
    column = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
    column.pack_start(entry, False, False, 0)
    column.pack_start(pane, True, True, 0)
    window.add(column)
    window.show_all()
    entry.grab_focus()
    GLib.idle_add(lambda: log(event="ready", pid=os.getpid()))
    Gtk.main()


if __name__ == "__main__":
    main()
