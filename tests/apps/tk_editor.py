"""Tk text editor fixture app for the file tools: opens a file, saves it on ctrl+s.

    /usr/bin/python3 tests/apps/tk_editor.py --title T --log LOG FILE

Shows FILE (UTF-8) in a Text widget with the cursor at its end and the keyboard focus in it;
ctrl+s writes the widget's text back to FILE as UTF-8. Events appended to LOG as JSON lines:
``{"event": "ready", "pid", "file", "size"}`` once the window is on screen, and
``{"event": "saved", "file", "size"}`` after each save.

Runs under Debian's /usr/bin/python3 (tkinter), outside the project venv: stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import tkinter as tk
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--title", required=True)
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("file", type=Path)
    args = parser.parse_args()

    def log(event: str, **fields: Any) -> None:
        with args.log.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"event": event, **fields}) + "\n")

    root = tk.Tk()
    root.title(args.title)
    text = tk.Text(root, width=60, height=12)
    text.pack(fill="both", expand=True)
    contents = args.file.read_text(encoding="utf-8")
    text.insert("1.0", contents)
    text.mark_set("insert", "end-1c")

    def save(_event: tk.Event) -> str:
        data = text.get("1.0", "end-1c").encode("utf-8")
        args.file.write_bytes(data)
        log("saved", file=str(args.file), size=len(data))
        return "break"

    text.bind("<Control-s>", save)

    def announce() -> None:
        root.update_idletasks()
        text.focus_force()
        log("ready", pid=os.getpid(), file=str(args.file), size=len(contents.encode("utf-8")))

    root.after(200, announce)
    root.mainloop()


if __name__ == "__main__":
    main()
