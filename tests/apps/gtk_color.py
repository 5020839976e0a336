"""GTK3 fixture app: one top-level window whose whole client area is one solid colour.

    /usr/bin/python3 tests/apps/gtk_color.py --title T --color '#RRGGBB' --log FILE [--size WxH] [--pos X,Y]

Once the window is mapped and its first frame is on the X server it appends
``{"event": "ready", "pid", "title", "x", "y", "width", "height"}`` to FILE (the client area in
root coordinates, as GTK sees it), then a ``"geometry"`` line whenever that changes.
"""

from __future__ import annotations

import os

from _fixture_cli import GeometryLog, parse_args

# Without a session bus the accessibility bridge would make GLib autolaunch a D-Bus daemon that
# outlives the app; with one (a rig's private bus) accessibility stays on.
if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
    os.environ["NO_AT_BRIDGE"] = "1"

import gi

gi.require_version("Gdk", "3.0")
gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, Gtk  # noqa: E402


def main() -> None:
    args = parse_args(__doc__ or "")
    log = GeometryLog(args.log, args.title)
    if not Gdk.RGBA().parse(args.color):
        raise SystemExit(f"not a colour: {args.color}")
    # CSS paints the window background: no cairo bindings (python3-gi-cairo) needed.
    css = Gtk.CssProvider()
    css.load_from_data(f"window {{ background-image: none; background-color: {args.color}; }}".encode())
    Gtk.StyleContext.add_provider_for_screen(Gdk.Screen.get_default(), css, Gtk.STYLE_PROVIDER_PRIORITY_USER)

    window = Gtk.Window(title=args.title)
    window.set_default_size(args.width, args.height)
    if args.position is not None:
        window.move(*args.position)

    def client_rect() -> tuple[int, int, int, int]:
        gdk_window = window.get_window()
        _, x, y = gdk_window.get_origin()
        return x, y, gdk_window.get_width(), gdk_window.get_height()

    def on_after_paint(_clock: Gdk.FrameClock) -> None:
        if log.ready:
            return
        # The frame's drawing requests are queued; a round trip puts them on the server first.
        Gdk.Display.get_default().sync()
        log.ready_at(*client_rect())

    def on_map(_window: Gtk.Window, _event: Gdk.Event) -> bool:
        window.get_window().get_frame_clock().connect("after-paint", on_after_paint)
        window.queue_draw()
        return False

    def on_configure(_window: Gtk.Window, _event: Gdk.Event) -> bool:
        log.geometry(*client_rect())
        return False

    window.connect("map-event", on_map)
    window.connect("configure-event", on_configure)
    window.connect("destroy", Gtk.main_quit)
    window.show_all()
    Gtk.main()


if __name__ == "__main__":
    main()
