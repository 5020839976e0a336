"""Tk fixture: a window of one colour that flips to a second colour (and back) on every click.

    /usr/bin/python3 tests/apps/tk_toggle.py --title T --color '#RRGGBB' --other '#RRGGBB' --log FILE
        [--size WxH] [--pos X,Y]

Appends ``{"event": "ready", ...}`` (as tk_color.py) once shown, then ``{"event": "toggled",
"color"}`` after each click has been painted. For the live screen's tests and benchmark: a click
whose effect covers the whole window.

Runs under Debian's /usr/bin/python3 (tkinter), outside the project venv: stdlib only.
"""

from __future__ import annotations

import json
import os
import sys
import tkinter as tk

from _fixture_cli import GeometryLog, parse_args


def main() -> None:
    other = sys.argv.index("--other")
    second = sys.argv[other + 1]
    del sys.argv[other : other + 2]
    args = parse_args(__doc__ or "")
    log = GeometryLog(args.log, args.title)
    colors = [args.color, second]

    root = tk.Tk()
    root.title(args.title)
    placement = f"+{args.position[0]}+{args.position[1]}" if args.position else ""
    root.geometry(f"{args.width}x{args.height}{placement}")
    frame = tk.Frame(root, background=args.color, borderwidth=0, highlightthickness=0)
    frame.pack(fill="both", expand=True)

    def client_rect() -> tuple[int, int, int, int]:
        return root.winfo_rootx(), root.winfo_rooty(), root.winfo_width(), root.winfo_height()

    def on_shown(event: tk.Event) -> None:
        if event.widget is root and not log.ready and root.winfo_viewable():
            root.update_idletasks()
            log.ready_at(*client_rect())

    def on_click(_event: tk.Event) -> None:
        colors.reverse()
        frame.configure(background=colors[0])
        root.update_idletasks()
        with args.log.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"event": "toggled", "pid": os.getpid(), "color": colors[0]}) + "\n")

    root.bind("<Map>", on_shown)
    root.bind("<Visibility>", on_shown)
    frame.bind("<ButtonPress-1>", on_click)
    root.mainloop()


if __name__ == "__main__":
    main()
