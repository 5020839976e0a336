"""Qt fixture showing personal data (tests/apps/pii_content.py) in labels, entries and a drawn
canvas: gtk_pii.py again in Qt Widgets, for Qt's accessibility bridge.

    PII_CANVAS_PNG=FILE qt_pii.py --title T --log FILE

The canvas is an image of text (FILE, drawn by the test), which the accessibility tree cannot
explain. Logs ``{"event": "ready", "pid": P, "widgets": {name: {x, y, width, height}}}`` (Qt's
global coordinates: a native Wayland client's are relative to its window) once painted, then
``{"event": "layout", "widgets": ...}`` whenever that changes. A "Refresh" button logs
``{"event": "button"}``. Needs PySide6 (tests/rigprocs.py: QT_PYTHON).
"""

from __future__ import annotations

import os
import sys

import pii_content as pii
from _qt_paint import AfterEachPaint
from PySide6.QtGui import QFont, QPixmap
from PySide6.QtWidgets import QApplication, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget


def main() -> None:
    title, events = pii.app_arguments()
    app = QApplication(sys.argv[:1])
    font = QFont("DejaVu Sans")
    font.setPixelSize(pii.FONT_PX)
    app.setFont(font)
    # A blinking caret would change the screen twice a second: the benchmark's "unchanged screen".
    app.setCursorFlashTime(0)
    window = QWidget()
    window.setWindowTitle(title)
    window.resize(760, 560)
    box = QVBoxLayout(window)
    box.setContentsMargins(12, 12, 12, 12)
    box.setSpacing(8)
    widgets: dict[str, QWidget] = {}
    for name, text in pii.LABELS:
        widgets[name] = QLabel(text)
    for name, text in pii.ENTRIES:
        entry = QLineEdit(text)
        entry.setMinimumWidth(30 * pii.FONT_PX // 2)
        widgets[name] = entry
    button = QPushButton("Refresh")
    button.clicked.connect(lambda: events.log(event="button"))
    widgets["button"] = button
    canvas = QLabel()
    canvas.setPixmap(QPixmap(os.environ["PII_CANVAS_PNG"]))
    widgets["canvas"] = canvas
    for widget in widgets.values():
        box.addWidget(widget)
    box.addStretch(1)

    def log_layout() -> None:
        """Log the widgets' geometry once painted ("ready"), then whenever it changes ("layout"):
        a tiling compositor resizes a window after its first frame."""
        layout = {}
        for name, widget in widgets.items():
            origin = widget.mapToGlobal(widget.rect().topLeft())
            layout[name] = {
                "x": origin.x(),
                "y": origin.y(),
                "width": widget.width(),
                "height": widget.height(),
            }
        events.layout(layout)

    AfterEachPaint(window, log_layout)
    window.show()
    sys.exit(app.exec())


if __name__ == "__main__":
    main()
