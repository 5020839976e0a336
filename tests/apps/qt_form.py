"""Qt form fixture: the GTK form (gtk_form.py) again in Qt Widgets. Needs PySide6-Essentials (the
`dev` extra): the tests run it in Debian's python3 given the venv's PySide6 (tests/rigprocs.py: QT_PYTHON).

    qt_form.py --title T --log FILE

Widgets: a line edit ("Name"), a multi-line text edit ("Notes"), a check box, a button that
updates a label ("clicked N"), a list of 200 rows ("Rows") and a slider 0..100 ("Volume").
Every change is appended to FILE as one JSON line, with the same events as the GTK form:

    {"event": "ready", "pid": P, "widgets": {name: {"x", "y", "width", "height"}}}  (root coords)
    {"event": "layout", "widgets": ...}      the same geometry again whenever it changes
    {"event": "entry", "text": ...}          {"event": "textview", "text": ...}
    {"event": "check", "active": ...}        {"event": "button", "count": N}
    {"event": "scale", "value": V}           {"event": "list_view", "first_visible": F}
    {"event": "row_added", "name": "Added row N"}   (on SIGUSR1: a row inserted at the top of the list)
"""

from __future__ import annotations

import argparse
import signal
import sys

from _form_content import BUTTON_DESCRIPTION, LIST_ROWS
from _form_log import FormLog
from _qt_paint import AfterEachPaint
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QGridLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSlider,
    QWidget,
)


class Form(QWidget):
    def __init__(self, title: str, log_path: str) -> None:
        super().__init__()
        self.events = FormLog(log_path)
        self.clicks = 0
        self.rows_added = 0
        self.setWindowTitle(title)
        self.resize(480, 640)

        grid = QGridLayout(self)
        grid.setContentsMargins(12, 12, 12, 12)
        grid.setSpacing(6)

        self.entry = QLineEdit()
        self.entry.setAccessibleName("Name")
        self.entry.textChanged.connect(lambda text: self.events.log(event="entry", text=text))
        name_label = QLabel("&Name")
        name_label.setBuddy(self.entry)
        grid.addWidget(name_label, 0, 0)
        grid.addWidget(self.entry, 0, 1)

        self.textview = QPlainTextEdit()
        self.textview.setAccessibleName("Notes")
        self.textview.setMinimumHeight(80)
        self.textview.textChanged.connect(
            lambda: self.events.log(event="textview", text=self.textview.toPlainText())
        )
        grid.addWidget(QLabel("Notes"), 1, 0)
        grid.addWidget(self.textview, 1, 1)

        self.check = QCheckBox("Subscribe")
        self.check.toggled.connect(lambda active: self.events.log(event="check", active=active))
        grid.addWidget(self.check, 2, 1)

        self.button = QPushButton("Click me")
        self.button.setAccessibleDescription(BUTTON_DESCRIPTION)
        self.button.clicked.connect(self.on_clicked)
        self.status = QLabel("clicked 0")
        grid.addWidget(self.button, 3, 0)
        grid.addWidget(self.status, 3, 1)

        self.list = QListWidget()
        self.list.setAccessibleName("Rows")
        self.list.setMinimumHeight(200)
        self.list.addItems([f"Row {number}" for number in range(1, LIST_ROWS + 1)])
        self.list.verticalScrollBar().valueChanged.connect(self.on_list_scrolled)
        grid.addWidget(self.list, 4, 0, 1, 2)
        grid.setRowStretch(4, 1)

        self.scale = QSlider(Qt.Orientation.Horizontal)
        self.scale.setRange(0, 100)
        self.scale.setAccessibleName("Volume")
        # float, like GTK's adjustment value, so tests compare the same JSON either way
        self.scale.valueChanged.connect(lambda value: self.events.log(event="scale", value=float(value)))
        grid.addWidget(QLabel("Volume"), 5, 0)
        grid.addWidget(self.scale, 5, 1)
        AfterEachPaint(self, self.log_layout)

    def on_clicked(self) -> None:
        self.clicks += 1
        self.status.setText(f"clicked {self.clicks}")
        self.events.log(event="button", count=self.clicks)

    def add_row(self) -> None:
        self.rows_added += 1
        name = f"Added row {self.rows_added}"
        self.list.insertItem(0, name)
        self.events.log(event="row_added", name=name)

    def on_list_scrolled(self, _value: int) -> None:
        item = self.list.itemAt(0, 0)
        self.events.log(event="list_view", first_visible=self.list.row(item) if item else 0)

    def log_layout(self) -> None:
        """Log the widgets' geometry (FormLog.layout)."""
        widgets = {
            "entry": self.entry,
            "textview": self.textview,
            "check": self.check,
            "button": self.button,
            "status": self.status,
            "list": self.list,
            "scale": self.scale,
        }
        self.events.layout({k: root_geometry(w) for k, w in widgets.items()})


def root_geometry(widget: QWidget) -> dict[str, int]:
    """The widget's rectangle in Qt's global coordinates: the screen's under xcb, the window's
    under Wayland (a Wayland client is never told where its window is)."""
    origin = widget.mapToGlobal(widget.rect().topLeft())
    return {"x": origin.x(), "y": origin.y(), "width": widget.width(), "height": widget.height()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--title", default="deskrig Qt form")
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    app = QApplication(sys.argv[:1])
    form = Form(args.title, args.log)
    form.show()
    # Python runs a signal handler only between bytecodes: a timer gives it the chance while Qt's
    # loop waits, and the handler defers the work to the loop.
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: QTimer.singleShot(0, form.add_row))
    wakeup = QTimer()
    wakeup.start(50)
    wakeup.timeout.connect(lambda: None)
    sys.exit(app.exec())


if __name__ == "__main__":
    main()
