"""Window listing on every backend: the forms' windows with their title, class, pid and bounds.

On sway the Tk form is an X client under Xwayland: it is listed like a native window, by its X11
class, with the pid of its process, and with bounds that hold every widget it reports.
"""

from __future__ import annotations

from .forms import Forms, laid_out


def test_the_forms_are_listed_with_title_pid_and_the_bounds_their_widgets_are_in(backend: Forms) -> None:
    for app in (backend.gtk, backend.tk):
        window = backend.window(app)

        assert (window.title, window.pid, window.minimized) == (app.title, app.pid, False)
        assert laid_out(backend, app), app.title


def test_the_tk_form_is_listed_by_its_x11_class(backend: Forms) -> None:
    assert backend.window(backend.tk).app == "Tk"
