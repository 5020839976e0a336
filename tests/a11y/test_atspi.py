"""The accessibility layer against a real AT-SPI bus and real apps: the form fixtures of the
toolkits with an AT-SPI bridge (tests/toolkits.py), Tk, and GTK's widget factory, on every desktop
backend (under sway GTK is a native Wayland client, Tk an X client on Xwayland)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
from tests.apps._form_content import BUTTON_DESCRIPTION, LIST_ROWS
from tests.polling import poll
from tests.rigprocs import SYSTEM_PYTHON
from tests.toolkits import Capability, Toolkit, needs, only_on

from deskrig.a11y import AccessibilityClient, Element, ElementQuery, ElementRef, Snapshot, SnapshotStore
from deskrig.a11y.connection import AppConnection, call, close_bus, open_bus
from deskrig.a11y.fetch import fetch_tree
from deskrig.errors import DeskrigError, ErrorCode

from .conftest import (
    A11yDesktop,
    FormApp,
    on_every_backend,
    wait_until_registered,
)

T = TypeVar("T")
Run = Callable[[Coroutine[Any, Any, T]], T]

#: How far AT-SPI extents may differ from the app's own idea of the widget geometry.
GEOMETRY_TOLERANCE_PX = 3

ENTRY = ElementQuery(role="text", name="Name", match="exact")
NOTES = ElementQuery(role="text", name="Notes", match="exact")
BUTTON = ElementQuery(role="push button", name="Click me")
CHECK = ElementQuery(role="check box", name="Subscribe")
#: Why a test runs on GTK's form only: what it asserts is how GTK's bridge presents that form.
GTK_TREE = "asserts the GTK form's tree in detail (its label rows, a 'Volume' label, every widget's extents)"

#: The form fixture needs an AT-SPI bridge; Tk has its own test below.
pytestmark = needs(Capability.A11Y_TREE)
a11y_desktop = on_every_backend()
SLIDER = ElementQuery(role="slider", name="Volume")
STATUS = ElementQuery(role="label", name="clicked")


def error_of(run: Run[Any], coro: Coroutine[Any, Any, Any]) -> DeskrigError:
    with pytest.raises(DeskrigError) as caught:
        run(coro)
    return caught.value


def assert_matches_geometry(element: Element, geometry: dict[str, int]) -> None:
    assert element.bounds is not None, f"{element.role} {element.name!r} has no bounds"
    actual = element.bounds.model_dump()
    for key in ("x", "y", "width", "height"):
        assert abs(actual[key] - geometry[key]) <= GEOMETRY_TOLERANCE_PX, (element.name, actual, geometry)


@pytest.fixture
def snapshot(run: Run[Snapshot], client: AccessibilityClient, form: FormApp) -> Snapshot:
    return run(client.snapshot(form.pid))


def test_applications_lists_the_form_with_pid_and_name(
    run: Run[Any], client: AccessibilityClient, form: FormApp, toolkit: Toolkit
) -> None:
    apps = run(client.applications())
    listed = next(a for a in apps if a.pid == form.pid)
    assert listed.name == f"{toolkit.name}_form.py"
    assert listed.bus_name.startswith(":")


@needs(Capability.AT_SPI_CACHE)
@only_on("gtk", why=GTK_TREE)
def test_snapshot_has_the_form_widgets_with_roles_names_and_bounds(
    snapshot: Snapshot, form: FormApp, client: AccessibilityClient
) -> None:
    assert snapshot.pid == form.pid and not snapshot.truncated
    root = snapshot.elements[0]
    assert (root.index, root.parent, root.depth, root.role) == (0, None, 0, "application")

    for query, widget in ((ENTRY, "entry"), (BUTTON, "button"), (CHECK, "check"), (SLIDER, "scale")):
        element = snapshot.resolve(query)
        assert_matches_geometry(element, form.geometry[widget])
        assert snapshot.elements[element.parent or 0].depth == element.depth - 1
        assert element.path[-1].role == element.role and element.path[-1].name == element.name

    button = snapshot.resolve(BUTTON)
    assert "enabled" in button.states and "focusable" in button.states
    assert [a.casefold() for a in button.actions] == ["click"]
    slider = snapshot.resolve(SLIDER)
    assert slider.value is not None and (slider.value.minimum, slider.value.maximum) == (0, 100)

    # The list manages its descendants: only the rows on screen are in the tree.
    rows = snapshot.resolve(ElementQuery(role="list box", name="Rows"))
    assert rows.offscreen_children_omitted
    row_labels = [e.name for e in snapshot.find(ElementQuery(role="label", name="Row "))]
    assert "Row 1" in row_labels and f"Row {LIST_ROWS}" not in row_labels

    text = snapshot.render_text()
    shown = (
        f'[{button.index}] push button "Click me" description="{BUTTON_DESCRIPTION}" (enabled, focusable) @ '
    )
    assert shown in text
    assert 'slider "Volume"' in text and "value=" in text

    public = json.loads(snapshot.model_dump_json())
    assert "ref" not in public["elements"][0] and "bus_name" not in public
    assert client.diagnostics == [], "expected a peer-to-peer connection and the Cache interface"


@needs(Capability.AT_SPI_CACHE)
def test_the_bus_daemon_fallback_fetches_the_same_tree(
    run: Run[Any], a11y_desktop: A11yDesktop, form: FormApp, snapshot: Snapshot
) -> None:
    """What the client falls back to when an app offers no peer-to-peer connection."""

    async def fetch_via_daemon() -> list[Element]:
        session = await open_bus(a11y_desktop.session_bus_address)
        (address,) = await call(session, "org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress")
        await close_bus(session)
        bus = await open_bus(address)
        try:
            app = AppConnection(snapshot.bus_name, form.pid, bus, peer_to_peer=False)
            fetched = await fetch_tree(app, max_depth=None, max_elements=None)
        finally:
            await close_bus(bus)
        assert fetched.used_cache
        return fetched.elements

    via_daemon = run(fetch_via_daemon())
    assert [(e.role, e.name, e.bounds) for e in via_daemon] == [
        (e.role, e.name, e.bounds) for e in snapshot.elements
    ]


def test_limits_truncate_the_snapshot(run: Run[Snapshot], client: AccessibilityClient, form: FormApp) -> None:
    small = run(client.snapshot(form.pid, max_elements=5))
    assert len(small.elements) == 5 and small.truncated
    shallow = run(client.snapshot(form.pid, max_depth=1))
    assert max(e.depth for e in shallow.elements) == 1 and shallow.truncated
    with pytest.raises(DeskrigError) as caught:
        run(client.snapshot(form.pid, max_elements=0))
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


@only_on("gtk", why=GTK_TREE)
def test_queries_resolve_or_say_why_not(
    run: Run[Any], client: AccessibilityClient, form: FormApp, snapshot: Snapshot
) -> None:
    button = snapshot.resolve(ElementQuery(role="Push Button", name="click"))
    assert button.name == "Click me"

    # An exact name beats a partial one: "Notes" is both the text view and its label.
    notes = snapshot.resolve(ElementQuery(role="text", name="notes"))
    assert notes.role == "text"

    with pytest.raises(DeskrigError) as caught:
        snapshot.resolve(ElementQuery(name="Volume"))
    ambiguous = caught.value
    assert ambiguous.code is ErrorCode.AMBIGUOUS_TARGET
    assert ambiguous.details is not None
    candidates = {(c["role"], c["name"]) for c in ambiguous.details["candidates"]}
    assert candidates == {("slider", "Volume"), ("label", "Volume")}
    assert all(c["bounds"] is not None for c in ambiguous.details["candidates"])

    with pytest.raises(DeskrigError) as caught:
        snapshot.resolve(ElementQuery(name="Click", match="exact"))
    missing = caught.value
    assert missing.code is ErrorCode.ELEMENT_NOT_FOUND and "Click" in missing.message

    only_matches = run(client.snapshot(form.pid, query=ElementQuery(role="label", name="Row 1")))
    assert only_matches.elements[0].name == "Row 1"  # exact match first, then "Row 10" ...
    assert all(e.role == "label" and "Row 1" in e.name for e in only_matches.elements)
    stored = client.snapshots.get(only_matches.snapshot_id)
    assert stored.elements[only_matches.elements[0].index].name == "Row 1"


def test_click_action_on_the_button_updates_the_label(
    run: Run[Any], client: AccessibilityClient, form: FormApp, snapshot: Snapshot, toolkit: Toolkit
) -> None:
    before = len(form.events("button"))
    button = client.snapshots.resolve(snapshot.snapshot_id, snapshot.resolve(BUTTON).index)
    # "click" names the button's primary action whatever the bridge calls it (Qt: "Press").
    assert run(client.element_action(button, "click")).casefold() == toolkit.button_actions[0]

    status = snapshot.resolve(STATUS)
    expected = f"clicked {before + 1}"
    # DoAction replies before the toolkit acts: poll the label until it changes.
    poll(f"the label to read {expected!r}", lambda: run(client.read_element(status)).name == expected, 5)
    form.wait_for_event("button", lambda e: e["count"] == before + 1)

    # "press" works on GTK's "click" too; the check box toggles.
    run(client.element_action(snapshot.resolve(CHECK), "press"))
    form.wait_for_event("check", lambda e: e["active"] is True)
    poll("checked state", lambda: "checked" in run(client.read_element(snapshot.resolve(CHECK))).states, 5)

    wrong = error_of(run, client.element_action(button, "expand"))
    assert wrong.code is ErrorCode.INVALID_ARGUMENT
    assert wrong.details is not None
    assert tuple(a.casefold() for a in wrong.details["available"]) == toolkit.button_actions


def test_set_text_lands_in_the_entry_and_the_text_view(
    run: Run[Any], client: AccessibilityClient, form: FormApp, snapshot: Snapshot
) -> None:
    entry = snapshot.resolve(ENTRY)
    text = "Grüße, Ñandú — 東京 😀"
    run(client.set_text(entry, text))
    form.wait_for_event("entry", lambda e: e["text"] == text)
    assert run(client.read_element(entry)).text == text

    notes = snapshot.resolve(NOTES)
    run(client.set_text(notes, "line 1\nline 2"))
    form.wait_for_event("textview", lambda e: e["text"] == "line 1\nline 2")


@only_on("gtk", why="Qt's bridge takes set_text on a push button without an error")
def test_set_text_on_a_button_is_refused(
    run: Run[Any], client: AccessibilityClient, snapshot: Snapshot
) -> None:
    refused = error_of(run, client.set_text(snapshot.resolve(BUTTON), "no"))
    assert refused.code is ErrorCode.INVALID_ARGUMENT


def test_set_value_moves_the_slider(
    run: Run[Any], client: AccessibilityClient, form: FormApp, snapshot: Snapshot
) -> None:
    slider = snapshot.resolve(SLIDER)
    run(client.set_value(slider, 42))
    form.wait_for_event("scale", lambda e: e["value"] == 42)
    fresh = run(client.read_element(slider))
    assert fresh.value is not None and fresh.value.current == 42
    assert fresh.index == slider.index and fresh.path == slider.path

    out_of_range = error_of(run, client.set_value(slider, 150))
    assert out_of_range.code is ErrorCode.INVALID_ARGUMENT and "0..100" in out_of_range.message
    assert form.events("scale")[-1]["value"] == 42


def test_unknown_expired_and_stale_elements_are_not_found(
    run: Run[Any], client: AccessibilityClient, snapshot: Snapshot
) -> None:
    with pytest.raises(DeskrigError) as unknown:
        client.snapshots.resolve("no-such-snapshot", 0)
    assert unknown.value.code is ErrorCode.ELEMENT_NOT_FOUND
    assert unknown.value.details is not None and unknown.value.details["reason"] == "unknown"

    with pytest.raises(DeskrigError) as out_of_range:
        client.snapshots.resolve(snapshot.snapshot_id, 10_000)
    assert out_of_range.value.details is not None
    assert out_of_range.value.details["reason"] == "index_out_of_range"

    store = SnapshotStore(capacity=1)
    store.add(snapshot)
    store.add(snapshot.model_copy(update={"snapshot_id": "newer"}))
    with pytest.raises(DeskrigError) as expired:
        store.resolve(snapshot.snapshot_id, 0)
    assert expired.value.code is ErrorCode.ELEMENT_NOT_FOUND and "expired" in expired.value.message

    button = snapshot.resolve(BUTTON)
    gone = button.model_copy(
        update={"ref": ElementRef(bus_name=button.ref.bus_name, path="/org/a11y/atspi/accessible/999999")}
    )
    stale = error_of(run, client.read_element(gone))
    assert stale.code is ErrorCode.ELEMENT_NOT_FOUND
    assert stale.details is not None and stale.details["reason"] == "stale"


TK_APP = """
import tkinter
root = tkinter.Tk()
root.title("no a11y here")
tkinter.Button(root, text="Tk button").pack()
root.update()
print("ready", flush=True)
root.mainloop()
"""


def test_tk_app_is_a11y_unavailable_and_a_dead_pid_is_not_running(
    run: Run[Any], client: AccessibilityClient, a11y_desktop: A11yDesktop
) -> None:
    tk = a11y_desktop.launch([SYSTEM_PYTHON, "-c", TK_APP], x11_only=True, stdout=subprocess.PIPE, text=True)
    try:
        assert tk.stdout is not None and tk.stdout.readline().strip() == "ready"
        unavailable = error_of(run, client.snapshot(tk.pid))
        assert unavailable.code is ErrorCode.A11Y_UNAVAILABLE
        assert str(tk.pid) in unavailable.message and "Tk" in unavailable.message
    finally:
        a11y_desktop.stop(tk)

    finished = subprocess.Popen(["true"])
    finished.wait()
    dead = error_of(run, client.snapshot(finished.pid))
    assert dead.code is ErrorCode.APP_NOT_RUNNING


def test_widget_factory_snapshot_is_large_and_complete(
    runner: asyncio.Runner, client: AccessibilityClient, a11y_desktop: A11yDesktop
) -> None:
    factory = a11y_desktop.launch(["gtk3-widget-factory"], stderr=subprocess.DEVNULL)
    try:
        wait_until_registered(runner, client, factory.pid)
        # The window maps after the app registers; wait until its frame shows.
        snapshot = poll(
            "the widget factory's window to show",
            lambda: (
                (s := runner.run(client.snapshot(factory.pid))).elements[1:] and s.elements[1].bounds and s
            ),
            10,
        )
        assert len(snapshot.elements) > 200
        assert len({e.ref for e in snapshot.elements}) == len(snapshot.elements)  # no node twice
        showing = [e for e in snapshot.elements if "showing" in e.states]
        assert sum(e.bounds is not None for e in showing) > 0.9 * len(showing)
        assert snapshot.find(ElementQuery(role="push button"))
        assert snapshot.find(ElementQuery(role="check box", name="checkbutton"))
    finally:
        a11y_desktop.stop(factory)
