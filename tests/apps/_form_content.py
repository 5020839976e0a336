"""What the GTK and Qt forms (gtk_form.py, qt_form.py) show that the tests check for: one place
for both toolkits' fixtures and the tests that read them."""

#: Rows in the form's list: far more than its viewport shows, so the list's off-screen rows are
#: left out of its accessibility tree.
LIST_ROWS = 200
#: The "Click me" button's accessible description (as a tool tip would give it, without the tool
#: tip's popup window, which would come and go under the tests' pointer).
BUTTON_DESCRIPTION = "Counts its clicks in the label beside it"
