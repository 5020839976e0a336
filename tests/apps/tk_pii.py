"""Tk fixture showing personal data (tests/apps/pii_content.py) in labels, entries and a drawn canvas.

    /usr/bin/python3 tests/apps/tk_pii.py --title T --log FILE

Tk has no AT-SPI bridge, so only OCR can find what it shows. Logs ``{"event": "ready", "pid",
"widgets": {name: {x, y, width, height}}}`` (root coordinates) once on screen, then ``{"event":
"layout", "widgets": ...}`` whenever that changes; a "Refresh" button logs ``{"event": "button"}``. Runs under Debian's /usr/bin/python3: stdlib only.
"""

from __future__ import annotations

import sys
import tkinter as tk
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pii_content as pii


def main() -> None:
    title, events = pii.app_arguments()

    root = tk.Tk()
    root.title(title)
    root.geometry("760x560+0+0")
    font = ("DejaVu Sans", -pii.FONT_PX)
    widgets: dict[str, tk.Widget] = {}
    for name, text in pii.LABELS:
        widgets[name] = tk.Label(root, text=text, font=font, anchor="w")
    for name, text in pii.ENTRIES:
        entry = tk.Entry(root, font=font, width=30)
        entry.insert(0, text)
        widgets[name] = entry
    widgets["button"] = tk.Button(root, text="Refresh", font=font, command=lambda: events.log(event="button"))
    canvas = tk.Canvas(root, width=700, height=170, background="white", highlightthickness=0)
    for row, line in enumerate(pii.CANVAS_LINES):
        canvas.create_text(10, 20 + row * 36, text=line, font=font, anchor="w", fill="black")
    widgets["canvas"] = canvas
    for widget in widgets.values():
        widget.pack(anchor="w", padx=12, pady=4)

    def log_layout() -> None:
        """Log the widgets' geometry once on screen ("ready"), then whenever it changes
        ("layout"): a tiling compositor resizes and moves the window after it shows."""
        layout = {
            name: {
                "x": w.winfo_rootx(),
                "y": w.winfo_rooty(),
                "width": w.winfo_width(),
                "height": w.winfo_height(),
            }
            for name, w in widgets.items()
        }
        events.layout(layout)

    def check_layout() -> None:
        if root.winfo_ismapped():
            root.update_idletasks()
            log_layout()
        root.after(200, check_layout)

    root.after(500, check_layout)
    root.mainloop()


if __name__ == "__main__":
    main()
