"""Tk form fixture app for the input tests: it logs, as JSON lines, everything it receives.

    /usr/bin/python3 tests/apps/tk_form.py --title T --log FILE

Widgets: an Entry, a Text, a Button that sets a Label to "clicked N", a horizontal Scale (0-100)
and a Listbox of 200 rows with a scrollbar. Events appended to FILE:

- ``{"event": "ready", "pid", "widgets": {name: {x, y, width, height}}, "scale_knob": {x, y},
  "scale_end": {x, y}}`` once the window is on screen (root coordinates), and ``"layout"`` with the
  same fields whenever the window moves or its widgets are resized;
- ``{"event": "entry", "text"}``, ``{"event": "text", "text"}`` on every change;
- ``{"event": "button", "count"}`` when the button is invoked;
- ``{"event": "mouse", "num", "state"}`` for a mouse button pressed on the button widget, and
  ``{"event": "double_click"}`` for the second press of a double click there;
- ``{"event": "scale", "value"}``, ``{"event": "listbox_view", "first"}`` (first visible row);
- ``{"event": "key", "keysym", "state"}`` for each key pressed in the Entry.

Runs under Debian's /usr/bin/python3 (tkinter), outside the project venv: stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import tkinter as tk
from pathlib import Path
from typing import Any


class EventLog:
    def __init__(self, path: Path) -> None:
        self._path = path

    def write(self, event: str, **fields: Any) -> None:
        # One write of a whole line in append mode; a reader may still catch part of it (tests.polling.json_lines).
        with self._path.open("a", encoding="utf-8") as log:
            log.write(json.dumps({"event": event, **fields}, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--title", required=True)
    parser.add_argument("--log", required=True, type=Path)
    args = parser.parse_args()
    log = EventLog(args.log)

    root = tk.Tk()
    root.title(args.title)

    entry_text = tk.StringVar(root)
    entry = tk.Entry(root, textvariable=entry_text, width=40)
    text = tk.Text(root, width=40, height=4)
    row = tk.Frame(root)
    clicks = 0
    label = tk.Label(row, text="clicked 0")

    def on_button() -> None:
        nonlocal clicks
        clicks += 1
        label.configure(text=f"clicked {clicks}")
        log.write("button", count=clicks)

    button = tk.Button(row, text="Click me", command=on_button)
    scale = tk.Scale(root, from_=0, to=100, orient="horizontal", length=300)
    list_frame = tk.Frame(root)
    scrollbar = tk.Scrollbar(list_frame, orient="vertical")
    listbox = tk.Listbox(list_frame, height=8, width=30)
    for index in range(200):
        listbox.insert("end", f"row {index}")

    entry.pack(padx=8, pady=4, fill="x")
    text.pack(padx=8, pady=4, fill="x")
    row.pack(padx=8, pady=4, fill="x")
    button.pack(side="left")
    label.pack(side="left", padx=8)
    scale.pack(padx=8, pady=4, fill="x")
    list_frame.pack(padx=8, pady=4, fill="both", expand=True)
    listbox.pack(side="left", fill="both", expand=True)
    scrollbar.pack(side="right", fill="y")

    entry_text.trace_add("write", lambda *_: log.write("entry", text=entry_text.get()))

    def on_text_modified(_event: tk.Event) -> None:
        if text.edit_modified():
            log.write("text", text=text.get("1.0", "end-1c"))
            text.edit_modified(False)  # re-arms <<Modified>>

    text.bind("<<Modified>>", on_text_modified)
    entry.bind("<KeyPress>", lambda e: log.write("key", keysym=e.keysym, state=e.state))
    # Where the keyboard goes, so a test types only once the field it clicked has the focus.
    entry.bind("<FocusIn>", lambda e: log.write("focus", widget="entry"))
    text.bind("<FocusIn>", lambda e: log.write("focus", widget="text"))
    button.bind("<ButtonPress>", lambda e: log.write("mouse", num=e.num, state=e.state))
    button.bind("<Double-Button-1>", lambda e: log.write("double_click"))
    scale.configure(command=lambda value: log.write("scale", value=int(float(value))))

    first_visible = -1

    def on_yscroll(first: str, last: str) -> None:
        nonlocal first_visible
        scrollbar.set(first, last)
        top = listbox.nearest(0)
        if top != first_visible:
            first_visible = top
            log.write("listbox_view", first=top)

    listbox.configure(yscrollcommand=on_yscroll)
    scrollbar.configure(command=listbox.yview)

    widgets = {
        "entry": entry,
        "text": text,
        "button": button,
        "label": label,
        "scale": scale,
        "listbox": listbox,
    }
    last_layout: dict[str, Any] | None = None

    def scale_point(value: int) -> dict[str, int]:
        x, y = scale.coords(value)
        return {"x": scale.winfo_rootx() + x, "y": scale.winfo_rooty() + y}

    def layout() -> dict[str, Any]:
        bounds = {
            name: {
                "x": w.winfo_rootx(),
                "y": w.winfo_rooty(),
                "width": w.winfo_width(),
                "height": w.winfo_height(),
            }
            for name, w in widgets.items()
        }
        return {"widgets": bounds, "scale_knob": scale_point(scale.get()), "scale_end": scale_point(100)}

    def report(event_name: str) -> None:
        nonlocal last_layout
        current = layout()
        if current != last_layout:
            last_layout = current
            log.write(event_name, pid=os.getpid(), **current)

    def on_shown(event: tk.Event) -> None:
        # "." can be mapped inside a still unmapped wrapper; viewable means really on screen.
        if event.widget is root and last_layout is None and root.winfo_viewable():
            root.update_idletasks()
            report("ready")

    def on_configure(event: tk.Event) -> None:
        # Any widget's, not only the window's: when a tiling compositor resizes the window, the
        # widgets are re-laid out (and configured) after the window's own event.
        if last_layout is not None:
            report("layout")

    root.bind("<Map>", on_shown)
    root.bind("<Visibility>", on_shown)
    root.bind("<Configure>", on_configure)
    entry.focus_set()
    root.mainloop()


if __name__ == "__main__":
    main()
