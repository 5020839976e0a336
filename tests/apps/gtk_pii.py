#!/usr/bin/python3
"""GTK3 fixture showing personal data (tests/apps/pii_content.py) in labels, entries and a drawn canvas.

    PII_CANVAS_PNG=FILE gtk_pii.py --title T --log FILE

The canvas is an image of text (FILE, drawn by the test: Debian's python3-gi has no cairo
bindings here), which the accessibility tree cannot explain.

Logs ``{"event": "ready", "pid": P, "widgets": {name: {x, y, width, height}}}`` (root coordinates;
a native Wayland client's are relative to its window) once painted, then ``{"event": "layout",
"widgets": ...}`` whenever that changes. A "Refresh" button logs ``{"event": "button"}``. Run with Debian's /usr/bin/python3.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pii_content as pii  # noqa: E402

CSS = f"* {{ font-family: DejaVu Sans; font-size: {pii.FONT_PX}px; }}".encode()


def main() -> None:
    title, events = pii.app_arguments()

    # A blinking caret would change the screen twice a second: the benchmark's "unchanged screen".
    Gtk.Settings.get_default().set_property("gtk-cursor-blink", False)
    provider = Gtk.CssProvider()
    provider.load_from_data(CSS)
    Gtk.StyleContext.add_provider_for_screen(
        Gtk.Window().get_screen(), provider, Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION
    )
    window = Gtk.Window(title=title)
    window.set_default_size(760, 560)
    window.move(0, 0)
    box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8, margin=12)
    widgets: dict[str, Gtk.Widget] = {}
    for name, text in pii.LABELS:
        label = Gtk.Label(label=text, xalign=0)
        widgets[name] = label
        box.pack_start(label, False, False, 0)
    for name, text in pii.ENTRIES:
        entry = Gtk.Entry(text=text, width_chars=30)
        widgets[name] = entry
        box.pack_start(entry, False, False, 0)
    button = Gtk.Button(label="Refresh")
    button.connect("clicked", lambda _b: events.log(event="button"))
    widgets["button"] = button
    box.pack_start(button, False, False, 0)

    canvas = Gtk.Image.new_from_file(os.environ["PII_CANVAS_PNG"])
    canvas.set_halign(Gtk.Align.START)
    widgets["canvas"] = canvas
    box.pack_start(canvas, False, False, 0)
    window.add(box)
    window.connect("destroy", Gtk.main_quit)
    window.show_all()

    def log_layout() -> bool:
        """Log the widgets' geometry once painted ("ready"), then whenever it changes ("layout"):
        a tiling compositor resizes a window after its first frame."""
        toplevel = window.get_window()
        if toplevel is None or not canvas.get_mapped():
            return False
        _, ox, oy = toplevel.get_origin()
        layout = {}
        for name, widget in widgets.items():
            x, y = widget.translate_coordinates(window, 0, 0)
            alloc = widget.get_allocation()
            layout[name] = {"x": ox + x, "y": oy + y, "width": alloc.width, "height": alloc.height}
        events.layout(layout)
        return False

    # After each finished frame: its geometry is final then.
    window.get_window().get_frame_clock().connect("after-paint", lambda _clock: GLib.idle_add(log_layout))
    Gtk.main()


if __name__ == "__main__":
    main()
