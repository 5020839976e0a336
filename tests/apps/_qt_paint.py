"""What the Qt fixtures (qt_form.py, qt_pii.py) share: a call after each paint of their window.

Needs PySide6 (tests/rigprocs.py: QT_PYTHON).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget


class AfterEachPaint(QObject):
    """Calls ``then`` from the event loop after each paint of ``widget``: the layout, and so the
    geometry, is final then, and the window manager's placement has settled."""

    def __init__(self, widget: QWidget, then: Callable[[], None]) -> None:
        super().__init__(widget)  # the widget's child: it lives as long as the widget
        self._then = then
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.UpdateRequest:
            QTimer.singleShot(0, self._then)
        return False
