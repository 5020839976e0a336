"""The event log the form fixtures (gtk_form.py, qt_form.py) share: one JSON line per event.

Runs under Debian's /usr/bin/python3, outside the project venv, so it uses the stdlib only.
"""

from __future__ import annotations

import json
import os
from typing import Any

#: A widget's rectangle as the forms log it: x, y, width and height.
Geometry = dict[str, int]


class FormLog:
    """Appends the form's events to its log file, flushed at once so a test reads them as they come."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the app's life
        self._layout: dict[str, Geometry] | None = None

    def log(self, **record: Any) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def layout(self, widgets: dict[str, Geometry]) -> None:
        """Log the widgets' geometry once painted ("ready"), then whenever it changes ("layout"):
        a tiling compositor resizes a window after its first frame."""
        if self._layout is None:
            self.log(event="ready", pid=os.getpid(), widgets=widgets)
        elif widgets != self._layout:
            self.log(event="layout", widgets=widgets)
        self._layout = widgets
