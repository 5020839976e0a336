"""The GUI toolkits the action and accessibility tests run on, and how they differ, declared once.

A test asks for the ``toolkit`` fixture (directly, or through a fixture built on it such as
``form``) and runs once per toolkit. A test that needs something a toolkit lacks says so with
``@needs(Capability.X)``; that toolkit is then left out of its parameters, and the reason declared
here is listed in pytest's summary. Nothing is skipped: a test that does not apply is not generated.
A test that also asks for ``backend`` (tests/conftest.py) runs on every desktop backend in
:data:`BACKENDS` too, for each toolkit.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from tests.rigprocs import BACKENDS, QT_PYTHON, SYSTEM_PYTHON


class Capability(enum.Enum):
    """Something a test may need from a toolkit beyond drawing widgets and taking input."""

    #: An AT-SPI tree: elements, element targets, set_value, and effects confirmed by reading back.
    A11Y_TREE = "a11y_tree"
    #: An entry's context menu, with its "Select All" item, shows up in the app's tree.
    CONTEXT_MENU_IN_TREE = "context_menu_in_tree"
    #: The bridge fills the AT-SPI Cache interface, so a tree comes in one call.
    AT_SPI_CACHE = "at_spi_cache"


@dataclass(frozen=True)
class Toolkit:
    """One form fixture (tests/apps/<name>_form.py) and what its toolkit does differently.

    The forms log the same events for the same widgets except where named here."""

    name: str
    title: str
    #: The interpreter that runs the form: one any user can run, as a sway rig runs its apps as an
    #: unprivileged user (tests/rigprocs.py).
    python: str
    #: Capabilities this toolkit lacks, each with why: the tests needing them are not generated.
    lacks: Mapping[Capability, str] = field(default_factory=dict)
    #: The multi-line text widget's name in the form's ``ready`` widgets and its change event.
    text_widget: str = "textview"
    #: The scrolling list's widget name, its scroll event and that event's first-visible-row field.
    list_widget: str = "list"
    list_event: str = "list_view"
    list_first_field: str = "first_visible"
    #: The button's actions as its a11y bridge names them (lower-cased), in order.
    button_actions: tuple[str, ...] = ()
    #: The role of the accessible whose name is "Row N" in the list.
    list_row_role: str = "list item"
    #: How far accessibility bounds may stray from the geometry the app logs itself.
    bounds_slack_px: int = 0
    #: Where on the slider, from its left edge, a drag must start to move it from 0.
    slider_grab_px: int = 10
    #: Why a masked match in an entry also covers the words beside it, where the toolkit's
    #: character extents are loose ("" where they are exact, or where there are none).
    loose_text_extents: str = ""
    #: Whether a sway rig runs the form as a native Wayland client (else on Xwayland, as X11):
    #: a Wayland client knows no screen position, so it logs its widgets relative to its window.
    native_wayland: bool = False

    def has(self, capability: Capability) -> bool:
        return capability not in self.lacks


GTK = Toolkit(
    name="gtk",
    title="GTK Form",
    python=SYSTEM_PYTHON,
    button_actions=("click",),
    # GtkListBox rows are unnamed; the label inside each row carries "Row N".
    list_row_role="label",
    # GTK sliders jump to the press point with the primary button; the drag carries on from there.
    slider_grab_px=10,
    native_wayland=True,
)
QT = Toolkit(
    name="qt",
    title="Qt Form",
    python=QT_PYTHON,
    lacks={
        Capability.AT_SPI_CACHE: "Qt's bridge leaves the AT-SPI Cache empty: the tree is walked",
        Capability.CONTEXT_MENU_IN_TREE: (
            "the Select All item of a QLineEdit's context menu never shows up in the app's tree "
            "(wait_for times out)"
        ),
    },
    button_actions=("press", "set focus"),
    bounds_slack_px=3,
    loose_text_extents=(
        "Qt reports a line edit's character ranges from its top edge and wider than the glyphs (a "
        "space 21 px wide where GTK says 6): the padded box over a match meets the words beside it "
        "and the entry's frame, and tesseract reads that line as noise though the words show"
    ),
    # Unlike GTK's, a Qt slider does not jump to a press on its groove: start on the handle,
    # which sits at the left end at 0.
    slider_grab_px=4,
    native_wayland=True,
)
TK = Toolkit(
    name="tk",
    title="Tk Form",
    python=SYSTEM_PYTHON,
    lacks={
        Capability.A11Y_TREE: "Tk has no AT-SPI bridge: no tree, so no elements and no read-back",
        Capability.CONTEXT_MENU_IN_TREE: "Tk has no AT-SPI bridge",
        Capability.AT_SPI_CACHE: "Tk has no AT-SPI bridge",
    },
    text_widget="text",
    list_widget="listbox",
    list_event="listbox_view",
    list_first_field="first",
)
TOOLKITS = (GTK, QT, TK)

F = TypeVar("F", bound=Callable[..., Any])


def needs(*capabilities: Capability) -> Callable[[F], F]:
    """Run the test only on the toolkits that have every one of ``capabilities``."""
    return pytest.mark.needs(*capabilities)


def without(*capabilities: Capability) -> Callable[[F], F]:
    """Run the test only on the toolkits that lack every one of ``capabilities``: for what a
    client sees when they are missing."""
    return pytest.mark.without(*capabilities)


def only_on(*names: str, why: str) -> Callable[[F], F]:
    """Run the test only on the named toolkits: for checks of the server, not of a toolkit,
    which would only repeat themselves on every toolkit; ``why`` says so."""
    return pytest.mark.only_on(*names, why=why)


def not_on(backend: str, *, why: str) -> Callable[[F], F]:
    """Leave ``backend`` out of the test's runs, saying why: for what a backend cannot do yet."""
    return pytest.mark.not_on(backend, why=why)


def toolkits_for(metafunc: pytest.Metafunc) -> tuple[list[Toolkit], list[str]]:
    """The toolkits a test runs on, and why each other one is left out."""
    wanted: set[Capability] = set()
    for mark in metafunc.definition.iter_markers("needs"):
        wanted.update(mark.args)
    unwanted: set[Capability] = set()
    for mark in metafunc.definition.iter_markers("without"):
        unwanted.update(mark.args)
    chosen: list[Toolkit] = []
    left_out: list[str] = []
    for toolkit in TOOLKITS:
        missing = [toolkit.lacks[c] for c in wanted if not toolkit.has(c)]
        missing += [f"it has {c.value}" for c in unwanted if toolkit.has(c)]
        if missing:
            left_out.append(f"{toolkit.name}: {'; '.join(dict.fromkeys(missing))}")
        else:
            chosen.append(toolkit)
    for mark in metafunc.definition.iter_markers("only_on"):
        left_out += [f"{t.name}: {mark.kwargs['why']}" for t in chosen if t.name not in mark.args]
        chosen = [t for t in chosen if t.name in mark.args]
    return chosen, left_out


def backends_for(metafunc: pytest.Metafunc) -> tuple[list[str], list[str]]:
    """The desktop backends a test runs on, and why each other one is left out."""
    left_out = {mark.args[0]: mark.kwargs["why"] for mark in metafunc.definition.iter_markers("not_on")}
    return [b for b in BACKENDS if b not in left_out], [f"{b}: {why}" for b, why in left_out.items()]


def runs_for(metafunc: pytest.Metafunc) -> tuple[list[tuple[str, Toolkit]], list[str]]:
    """The (backend, toolkit) pairs a test that asks for both runs on, and why others are left out."""
    chosen, left_out = toolkits_for(metafunc)
    backends, backends_left_out = backends_for(metafunc)
    left_out += backends_left_out
    runs = [(backend, toolkit) for backend in backends for toolkit in chosen]
    return runs, left_out


#: GTK takes a button released within 500 ms of the press that opened a menu for the end of that
#: press (a press-drag-release pick) and ignores it: a click on an item comes later, as a person's does.
MENU_CLICK_AFTER_S = 0.6
