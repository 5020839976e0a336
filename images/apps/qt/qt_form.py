"""The Qt example app of deskrig/example-qt: a small form an agent can read and drive.

A name field, a Greet button and a label that answers "Hello, NAME!". Debian's PyQt5 under
/usr/bin/python3 (the rig's own venv is not involved).
"""

import sys

from PyQt5.QtWidgets import QApplication, QFormLayout, QLabel, QLineEdit, QPushButton, QWidget


def main() -> int:
    app = QApplication(sys.argv)
    window = QWidget()
    window.setWindowTitle("deskrig Qt example")
    name = QLineEdit()
    name.setAccessibleName("Name")
    greeting = QLabel("Type a name and press Greet.")
    greet = QPushButton("Greet")
    greet.clicked.connect(lambda: greeting.setText(f"Hello, {name.text() or 'nobody'}!"))
    form = QFormLayout(window)
    form.addRow("Name", name)
    form.addRow(greet)
    form.addRow(greeting)
    window.resize(420, 160)
    window.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
