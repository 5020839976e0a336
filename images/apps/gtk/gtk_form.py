"""The GTK example app of deskrig/example-gtk: a small form an agent can read and drive.

A name field, a Greet button and a label that answers "Hello, NAME!". Debian's python3-gi under
/usr/bin/python3 (the rig's own venv is not involved).
"""

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gtk  # noqa: E402


def main() -> None:
    window = Gtk.Window(title="deskrig GTK example")
    window.set_default_size(420, 160)
    window.connect("destroy", Gtk.main_quit)
    name = Gtk.Entry()
    name.get_accessible().set_name("Name")
    greeting = Gtk.Label(label="Type a name and press Greet.")
    greet = Gtk.Button(label="Greet")
    greet.connect("clicked", lambda _: greeting.set_text(f"Hello, {name.get_text() or 'nobody'}!"))
    grid = Gtk.Grid(row_spacing=8, column_spacing=8, margin=12)
    grid.attach(Gtk.Label(label="Name"), 0, 0, 1, 1)
    grid.attach(name, 1, 0, 1, 1)
    grid.attach(greet, 1, 1, 1, 1)
    grid.attach(greeting, 0, 2, 2, 1)
    window.add(grid)
    window.show_all()
    Gtk.main()


if __name__ == "__main__":
    main()
