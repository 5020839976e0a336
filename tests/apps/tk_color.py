"""Tk fixture app: one top-level window whose whole client area is one solid colour.

    /usr/bin/python3 tests/apps/tk_color.py --title T --color '#RRGGBB' --log FILE [--size WxH] [--pos X,Y]
        [--toggle-to '#RRGGBB']

Once the window is mapped (the X server paints a Tk frame's background itself, so mapped means
painted) it appends ``{"event": "ready", "pid", "title", "x", "y", "width", "height"}`` to FILE
(the client area in root coordinates, from winfo_rootx/rooty/width/height), then a
``"geometry"`` line whenever that changes. Tk sets no _NET_WM_PID: this is the app the X-Resource
pid lookup is tested with.

With ``--toggle-to`` each left click flips the window between the two colours and appends
``{"event": "toggled", "color"}`` once painted: a click whose effect covers the whole window (the
live screen's tests).
"""

from __future__ import annotations

import json
import os
import tkinter as tk

from _fixture_cli import GeometryLog, parse_args


def main() -> None:
    args = parse_args(__doc__ or "")
    log = GeometryLog(args.log, args.title)

    root = tk.Tk()
    root.title(args.title)
    placement = f"+{args.position[0]}+{args.position[1]}" if args.position else ""
    root.geometry(f"{args.width}x{args.height}{placement}")
    root.configure(background=args.color, borderwidth=0, highlightthickness=0)
    frame = tk.Frame(root, background=args.color, borderwidth=0, highlightthickness=0)
    frame.pack(fill="both", expand=True)
    colors = [args.color, args.toggle_to]

    def client_rect() -> tuple[int, int, int, int]:
        return root.winfo_rootx(), root.winfo_rooty(), root.winfo_width(), root.winfo_height()

    def on_shown(event: tk.Event) -> None:
        # "." can be mapped inside a still unmapped wrapper; viewable means really on screen.
        if event.widget is root and not log.ready and root.winfo_viewable():
            root.update_idletasks()
            log.ready_at(*client_rect())

    def on_configure(event: tk.Event) -> None:
        if event.widget is root:
            log.geometry(*client_rect())

    def on_click(_event: tk.Event) -> None:
        colors.reverse()
        frame.configure(background=colors[0])
        root.update_idletasks()
        with args.log.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"event": "toggled", "pid": os.getpid(), "color": colors[0]}) + "\n")

    if args.toggle_to:
        frame.bind("<ButtonPress-1>", on_click)
    root.bind("<Map>", on_shown)
    root.bind("<Visibility>", on_shown)
    root.bind("<Configure>", on_configure)
    root.mainloop()


if __name__ == "__main__":
    main()
