#!/usr/bin/python3
"""GTK3 form fixture: run with Debian's /usr/bin/python3 (python3-gi), not the project venv.

    gtk_form.py --title T --log FILE

Widgets: a menu bar (File: New, Save), an entry (its context menu has "Stamp" and a submenu
"More" with "Deep"), a multi-line text view, a check box, a combo box (Small, Medium, Large), a
menu button (Actions: Alpha, Beta), a button that updates a label ("clicked N"), a scrolled list
of 200 rows and a slider (0..100). Every change is appended to FILE as one JSON line, so tests can
check the app's own view of what it received:

    {"event": "ready", "pid": P, "widgets": {name: {"x", "y", "width", "height"}}}  (root coords)
    {"event": "layout", "widgets": ...}      the same geometry again whenever it changes
    {"event": "entry", "text": ...}          {"event": "textview", "text": ...}
    {"event": "check", "active": ...}        {"event": "button", "count": N}
    {"event": "scale", "value": V}           {"event": "list_view", "first_visible": F}
    {"event": "combo", "active": "Large"}    {"event": "menu_item", "menu": "file", "item": "Save"}
    {"event": "row_added", "name": "Added row N"}   (on SIGUSR1: a row inserted at the top of the list)
    {"event": "twin", "open": true|false}    (on SIGUSR2: a second window with the same title, with a
                                              "Twin button", opened, or closed if open)
    {"event": "twin_button", "count": N}
"""

from __future__ import annotations

import argparse
import signal

import gi
from _form_content import BUTTON_DESCRIPTION, LIST_ROWS
from _form_log import FormLog

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402


class Form:
    def __init__(self, title: str, log_path: str) -> None:
        self.events = FormLog(log_path)
        self.clicks = 0
        self.rows_added = 0
        self.title = title
        self.twin: Gtk.Window | None = None
        self.twin_clicks = 0

        self.window = Gtk.Window(title=title)
        self.window.set_default_size(480, 640)
        self.window.connect("destroy", Gtk.main_quit)

        # A menu bar above the form, then the form; the menus are popups (xdg_popup under Wayland).
        outer = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
        self.window.add(outer)
        self.menubar = Gtk.MenuBar()
        file_item = Gtk.MenuItem(label="File")
        file_item.set_submenu(self.menu("file", ("New", "Save")))
        self.menubar.append(file_item)
        self.file_item = file_item
        outer.pack_start(self.menubar, False, False, 0)
        grid = Gtk.Grid(row_spacing=6, column_spacing=6, margin=12)
        outer.pack_start(grid, True, True, 0)

        name_label = Gtk.Label(label="_Name", use_underline=True, xalign=0)
        self.entry = Gtk.Entry(hexpand=True)
        name_label.set_mnemonic_widget(self.entry)
        self.entry.get_accessible().set_name("Name")  # GTK3 does not derive it from the label
        self.entry.connect("changed", lambda e: self.events.log(event="entry", text=e.get_text()))
        self.entry.connect("populate-popup", self.on_entry_popup)
        grid.attach(name_label, 0, 0, 1, 1)
        grid.attach(self.entry, 1, 0, 1, 1)

        self.textview = Gtk.TextView(wrap_mode=Gtk.WrapMode.WORD_CHAR)
        self.textview.get_accessible().set_name("Notes")
        buffer = self.textview.get_buffer()
        buffer.connect(
            "changed",
            lambda b: self.events.log(event="textview", text=b.get_text(*b.get_bounds(), True)),
        )
        notes_scroll = Gtk.ScrolledWindow(min_content_height=80, hexpand=True)
        notes_scroll.add(self.textview)
        grid.attach(Gtk.Label(label="Notes", xalign=0), 0, 1, 1, 1)
        grid.attach(notes_scroll, 1, 1, 1, 1)

        self.check = Gtk.CheckButton(label="Subscribe")
        self.check.connect("toggled", lambda c: self.events.log(event="check", active=c.get_active()))

        self.combo = Gtk.ComboBoxText()
        for size in ("Small", "Medium", "Large"):
            self.combo.append_text(size)
        self.combo.set_active(0)
        self.combo.get_accessible().set_name("Size")
        self.combo.connect("changed", lambda c: self.events.log(event="combo", active=c.get_active_text()))
        self.menubutton = Gtk.MenuButton(label="Actions", use_popover=False)
        self.menubutton.set_popup(self.menu("actions", ("Alpha", "Beta")))
        # In one row with the check box, high enough that their menus open below them.
        choices = Gtk.Box(spacing=6)
        for widget in (self.check, self.combo, self.menubutton):
            choices.pack_start(widget, False, False, 0)
        grid.attach(choices, 1, 2, 1, 1)

        self.button = Gtk.Button(label="Click me")
        self.button.get_accessible().set_description(BUTTON_DESCRIPTION)
        self.button.connect("clicked", self.on_clicked)
        self.status = Gtk.Label(label="clicked 0", xalign=0)
        grid.attach(self.button, 0, 3, 1, 1)
        grid.attach(self.status, 1, 3, 1, 1)

        self.listbox = Gtk.ListBox()
        self.listbox.get_accessible().set_name("Rows")
        for number in range(1, LIST_ROWS + 1):
            self.listbox.add(Gtk.Label(label=f"Row {number}", xalign=0))
        self.list_scroll = Gtk.ScrolledWindow(min_content_height=200, vexpand=True, hexpand=True)
        self.list_scroll.add(self.listbox)
        self.list_scroll.get_vadjustment().connect("value-changed", self.on_list_scrolled)
        grid.attach(self.list_scroll, 0, 4, 2, 1)

        self.scale = Gtk.Scale.new_with_range(Gtk.Orientation.HORIZONTAL, 0, 100, 1)
        self.scale.set_digits(0)
        self.scale.get_accessible().set_name("Volume")
        self.scale.connect("value-changed", lambda s: self.events.log(event="scale", value=s.get_value()))
        grid.attach(Gtk.Label(label="Volume", xalign=0), 0, 5, 1, 1)
        grid.attach(self.scale, 1, 5, 1, 1)

        self.window.show_all()
        # The first finished frame means the form is painted; then its geometry is final.
        self.window.get_window().get_frame_clock().connect("after-paint", self.on_painted)

    def menu(self, name: str, labels: tuple[str, ...]) -> Gtk.Menu:
        """A popup menu whose items log ``{"event": "menu_item", "menu": name, "item": label}``."""
        menu = Gtk.Menu()
        for label in labels:
            item = Gtk.MenuItem(label=label)
            item.connect(
                "activate", lambda _i, label=label: self.events.log(event="menu_item", menu=name, item=label)
            )
            menu.append(item)
        menu.show_all()
        return menu

    def on_entry_popup(self, _entry: Gtk.Entry, popup: Gtk.Widget) -> None:
        """Add "Stamp" to the entry's context menu (opened at the pointer), and a submenu "More"
        with "Deep": they log like a menu's."""
        item = Gtk.MenuItem(label="Stamp")
        item.connect("activate", lambda _i: self.events.log(event="menu_item", menu="context", item="Stamp"))
        item.show()
        popup.append(item)
        more = Gtk.MenuItem(label="More")
        more.set_submenu(self.menu("context", ("Deep",)))
        more.show()
        popup.append(more)

    def on_clicked(self, _button: Gtk.Button) -> None:
        self.clicks += 1
        self.status.set_text(f"clicked {self.clicks}")
        self.events.log(event="button", count=self.clicks)

    def add_row(self) -> bool:
        self.rows_added += 1
        label = Gtk.Label(label=f"Added row {self.rows_added}", xalign=0)
        label.show()
        self.listbox.insert(label, 0)
        self.events.log(event="row_added", name=label.get_text())
        return True  # keep the signal handler

    def toggle_twin(self) -> bool:
        if self.twin is not None:
            self.twin.destroy()
            self.twin = None
            self.events.log(event="twin", open=False)
            return True
        self.twin = Gtk.Window(title=self.title)
        button = Gtk.Button(label="Twin button")
        button.connect("clicked", self.on_twin_clicked)
        self.twin.add(button)
        self.twin.connect("map-event", lambda *_: self.events.log(event="twin", open=True))
        self.twin.show_all()
        return True  # keep the signal handler

    def on_twin_clicked(self, _button: Gtk.Button) -> None:
        self.twin_clicks += 1
        self.events.log(event="twin_button", count=self.twin_clicks)

    def on_list_scrolled(self, adjustment: Gtk.Adjustment) -> None:
        row = self.listbox.get_row_at_y(int(adjustment.get_value()))
        self.events.log(event="list_view", first_visible=row.get_index() if row else 0)

    def on_painted(self, _clock: object) -> None:
        GLib.idle_add(self.log_layout)

    def log_layout(self) -> bool:
        """Log the widgets' geometry (FormLog.layout)."""
        widgets = {
            "entry": self.entry,
            "textview": self.textview,
            "check": self.check,
            "button": self.button,
            "status": self.status,
            "list": self.list_scroll,
            "scale": self.scale,
            "file_menu": self.file_item,
            "combo": self.combo,
            "menubutton": self.menubutton,
        }
        self.events.layout({k: root_geometry(w) for k, w in widgets.items()})
        return False


def root_geometry(widget: Gtk.Widget) -> dict[str, int]:
    """The widget's allocation in root-window (screen) coordinates."""
    toplevel = widget.get_toplevel()
    x, y = widget.translate_coordinates(toplevel, 0, 0)
    _, origin_x, origin_y = toplevel.get_window().get_origin()
    allocation = widget.get_allocation()
    return {"x": origin_x + x, "y": origin_y + y, "width": allocation.width, "height": allocation.height}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--title", default="deskrig GTK form")
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    form = Form(args.title, args.log)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, form.add_row)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR2, form.toggle_twin)
    Gtk.main()


if __name__ == "__main__":
    main()
