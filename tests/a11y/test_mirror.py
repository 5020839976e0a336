"""The live accessibility mirror against the real form fixtures, on every desktop backend (under
sway GTK is a native Wayland client): every snapshot after a change shows it (a label renamed, an
entry typed into, a row added), a snapshot says how old its tree is, added rows are fetched with
their list alone, and an event gap fetches the tree again. Clicks, keys and typed text come from
the desktop backend's own input, as a server's do."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
from dbus_fast import Message
from dbus_fast.aio import MessageBus
from tests.polling import poll
from tests.toolkits import Capability, needs, not_on

from deskrig.a11y import AccessibilityClient, ElementQuery, Snapshot
from deskrig.a11y import mirror as mirror_module
from deskrig.a11y.connection import AppConnection, CallFailed, Reply, Request, call, close_bus, open_bus
from deskrig.a11y.constants import (
    A11Y_BUS_NAME,
    A11Y_BUS_PATH,
    ACCESSIBLE,
    DBUS_NAME,
    DBUS_PATH,
    REGISTRY_BUS_NAME,
    ROOT_PATH,
)
from deskrig.a11y.events import (
    EVENT_INTERFACE,
    EVENT_KINDS,
    MATCH_RULE,
    REGISTRY_INTERFACE,
    REGISTRY_PATH,
    ObjectEvent,
)
from deskrig.a11y.fetch import FetchedTree
from deskrig.a11y.mirror import AppMirror
from deskrig.a11y.nodes import RawNode
from deskrig.a11y.source import deepest_focused
from deskrig.a11y.tree import Element, ElementRef
from deskrig.desktop import Desktop
from deskrig.errors import DeskrigError
from deskrig.model import Bounds

from .conftest import MOVE_UNSEEN, A11yDesktop, FormApp, FormWindow, click, on_every_backend

T = TypeVar("T")
Run = Callable[[Coroutine[Any, Any, T]], T]

pytestmark = needs(Capability.A11Y_TREE)
a11y_desktop = on_every_backend()

BUTTON = ElementQuery(role="push button", name="Click me")
STATUS = ElementQuery(role="label", name="clicked")
ENTRY = ElementQuery(role="text", name="Name", match="exact")
ROWS = ElementQuery(name="Rows", match="exact")
#: The size the window resize test gives the form's window (no window starts at this size).
RESIZED = (720, 600)


def names(snapshot: Snapshot) -> list[str]:
    return [e.name for e in snapshot.elements]


def add_rows(form: FormApp, count: int) -> str:
    """Have the form insert ``count`` rows at the top of its list; the newest row's name."""
    before = len(form.events("row_added"))
    for number in range(before + 1, before + count + 1):
        os.kill(form.pid, signal.SIGUSR1)
        # One at a time: signals that arrive before the handler has run fold into one.
        form.wait_for_event("row_added", lambda e, name=f"Added row {number}": e["name"] == name)
    return f"Added row {before + count}"


def click_button(run: Run[Any], client: AccessibilityClient, form: FormApp, snapshot: Snapshot) -> str:
    """Click the form's button (found in ``snapshot``); returns what its status label reads once
    the app has acted."""
    count = len(form.events("button")) + 1
    run(client.element_action(snapshot.resolve(BUTTON), "click"))
    form.wait_for_event("button", lambda e: e["count"] == count)
    return f"clicked {count}"


def settles_in_the_mirror(run: Run[Any], client: AccessibilityClient, form: FormApp) -> None:
    """Once the app stops changing (it lays rows out a frame after adding them), the tree is read
    from the mirror, not fetched again."""
    poll("a snapshot from the mirror", lambda: run(client.snapshot(form.pid)).source == "mirror", 5)


def quiet(run: Run[Any], client: AccessibilityClient) -> bool:
    """Whether no event arrived for a tenth of a second (events are taken in while the loop runs)."""
    received = client.events.received
    run(asyncio.sleep(0.1))
    return client.events.received == received


def quiet_mirror(
    run: Run[Any], client: AccessibilityClient, form: FormApp, query: ElementQuery
) -> tuple[AppMirror, Element]:
    """The form's mirror and the element ``query`` finds in it, once the form stopped sending events."""
    snapshot = run(client.snapshot(form.pid))
    mirror = client.mirror(snapshot.bus_name)
    assert mirror is not None
    element = snapshot.resolve(query)
    poll("the form to stop sending events", lambda: quiet(run, client), 5)
    return mirror, element


def test_an_unchanged_app_is_read_from_the_mirror(
    run: Run[Any], client: AccessibilityClient, form: FormApp
) -> None:
    fetched = run(client.snapshot(form.pid, refresh=True))
    assert fetched.source == "fetch" and fetched.tree_age_ms <= fetched.fetch_ms
    time.sleep(0.2)
    mirrored = run(client.snapshot(form.pid))
    assert mirrored.source == "mirror"
    assert mirrored.tree_age_ms >= 200, "the age counts from the bulk fetch"
    assert [(e.role, e.name, e.states, e.text) for e in mirrored.elements] == [
        (e.role, e.name, e.states, e.text) for e in fetched.elements
    ]
    assert mirrored.snapshot_id != fetched.snapshot_id
    assert client.snapshots.get(mirrored.snapshot_id) is not None


def test_the_next_snapshot_shows_each_change(
    run: Run[Any], client: AccessibilityClient, form: FormApp
) -> None:
    renamed = click_button(
        run, client, form, run(client.snapshot(form.pid, refresh=True))
    )  # the status label is renamed
    after_click = run(client.snapshot(form.pid))
    status = after_click.resolve(STATUS)
    assert status.name == renamed
    assert status.path[-1].name == renamed, "the path that re-resolves it follows the rename"
    assert after_click.newest_event_age_ms is not None, "the change came as an event"
    assert after_click.newest_event_age_ms <= after_click.tree_age_ms

    text = f"typed at {time.monotonic():.3f}"
    run(client.set_text(run(client.snapshot(form.pid)).resolve(ENTRY), text))
    form.wait_for_event("entry", lambda e: e["text"] == text)
    assert run(client.snapshot(form.pid)).resolve(ENTRY).text == text

    row = add_rows(form, 1)
    assert row in names(run(client.snapshot(form.pid)))

    settles_in_the_mirror(run, client, form)


def test_added_rows_are_fetched_with_their_list_not_the_whole_tree(
    run: Run[Any], client: AccessibilityClient, form: FormApp
) -> None:
    before = run(client.snapshot(form.pid))
    newest = add_rows(form, 12)
    renamed = click_button(run, client, form, before)
    after = run(client.snapshot(form.pid))
    assert after.source == "mirror", "the list's subtree is fetched again and spliced in"
    assert newest in names(after) and after.resolve(STATUS).name == renamed


def test_an_event_gap_fetches_the_tree_again(
    run: Run[Any], client: AccessibilityClient, form: FormApp
) -> None:
    before = run(client.snapshot(form.pid))
    run(client.events.unsubscribe())  # events sent from now on are lost
    renamed = click_button(run, client, form, before)
    after_gap = run(client.snapshot(form.pid))
    assert after_gap.source == "fetch", "a tree that may have missed events is not served"
    assert after_gap.resolve(STATUS).name == renamed
    assert client.events.subscribed, "reading a tree subscribes again"

    renamed = click_button(run, client, form, after_gap)
    assert run(client.snapshot(form.pid)).resolve(STATUS).name == renamed


#: What the toolkits' bridges send whether or not anyone listens: AT-SPI clients cache names.
ALWAYS_SENT = {"PropertyChange:accessible-name"}


class EventWatch:
    """The AT-SPI object events one app sends, and what the registry says clients listen for, on
    a connection of its own to the accessibility bus that registers for nothing (so it changes
    nothing of what the toolkit's bridge emits)."""

    def __init__(self, bus: MessageBus, bus_name: str) -> None:
        self.bus, self.bus_name = bus, bus_name
        #: Each event as member:detail (``StateChanged:focused``).
        self.events: list[str] = []

    @classmethod
    async def open(cls, session_bus_address: str, bus_name: str) -> EventWatch:
        session = await open_bus(session_bus_address)
        try:
            (address,) = await call(session, A11Y_BUS_NAME, A11Y_BUS_PATH, A11Y_BUS_NAME, "GetAddress")
        finally:
            await close_bus(session)
        watch = cls(await open_bus(address), bus_name)
        watch.bus.add_message_handler(watch._handle)
        await call(watch.bus, DBUS_NAME, DBUS_PATH, DBUS_NAME, "AddMatch", "s", [MATCH_RULE])
        return watch

    def _handle(self, message: Message) -> None:
        if message.interface == EVENT_INTERFACE and message.sender == self.bus_name:
            self.events.append(f"{message.member}:{message.body[0] if message.body else ''}")

    async def synced(self) -> list[str]:
        """The events once every one the app sent before now has arrived (the app answers a call
        through the bus after the events it sent before it)."""
        await call(self.bus, self.bus_name, ROOT_PATH, ACCESSIBLE, "GetRole")
        return list(self.events)

    async def registered(self) -> list[str]:
        """The object events clients have registered for with the registry, which the bridges
        follow (as it spells them: ``Object:BoundsChanged:``)."""
        (listeners,) = await call(
            self.bus, REGISTRY_BUS_NAME, REGISTRY_PATH, REGISTRY_INTERFACE, "GetRegisteredEvents"
        )
        return [str(kind) for _, kind in listeners if str(kind).startswith("Object:")]


def test_a_feed_nobody_reads_ends_and_the_app_stops_sending_events(
    run: Run[Any], client: AccessibilityClient, form: FormApp, a11y_desktop: A11yDesktop, desktop: Desktop
) -> None:
    """Toolkits emit events only while someone has registered for them: once no tree has been read
    for the events idle timeout, the next event ends the feed and deregisters it, and the app sends no
    events but the always sent for a change; the next read registers again and fetches the tree
    whole, change included."""
    run(client.events.unsubscribe())  # the module's client: it subscribes again at its next read
    reader = run(AccessibilityClient.connect(a11y_desktop.session_bus_address, events_idle_timeout=0.5))
    watch: EventWatch | None = None
    try:
        before = run(reader.snapshot(form.pid))
        watch = run(EventWatch.open(a11y_desktop.session_bus_address, before.bus_name))
        assert len(run(watch.registered())) == len(EVENT_KINDS)
        button = before.resolve(BUTTON).bounds
        assert button is not None
        click_button_by_pointer(desktop, form, button)
        run(asyncio.sleep(0.6))  # the loop hears the click's events, within the timeout
        assert reader.events.subscribed
        click_button_by_pointer(desktop, form, button)  # its events come after the timeout
        poll("the idle feed to end", lambda: run(asyncio.sleep(0.05, not reader.events.subscribed)), 5)
        assert run(watch.registered()) == [], "nobody listens"
        sent = len(run(watch.synced()))
        renamed = click_button_by_pointer(desktop, form, button)
        assert set(run(watch.synced())[sent:]) <= ALWAYS_SENT, "the app sends no events for nobody"

        after = run(reader.snapshot(form.pid))
        assert reader.events.subscribed and len(run(watch.registered())) == len(EVENT_KINDS)
        assert after.source == "fetch", "a tree that may have missed events is fetched whole"
        assert after.resolve(STATUS).name == renamed
        renamed = click_button_by_pointer(desktop, form, button)
        assert run(reader.snapshot(form.pid)).resolve(STATUS).name == renamed
    finally:
        if watch is not None:
            run(close_bus(watch.bus))
        run(reader.close())


def test_a_feed_without_an_idle_timeout_listens_on(
    run: Run[Any], form: FormApp, a11y_desktop: A11yDesktop, desktop: Desktop
) -> None:
    """``events_idle_timeout`` 0: the feed never ends for want of reads."""
    reader = run(AccessibilityClient.connect(a11y_desktop.session_bus_address, events_idle_timeout=0))
    try:
        button = run(reader.snapshot(form.pid)).resolve(BUTTON).bounds
        assert button is not None
        run(asyncio.sleep(0.2))
        renamed = click_button_by_pointer(desktop, form, button)
        run(asyncio.sleep(0.2))  # the loop hears the click's events
        assert reader.events.subscribed
        after = run(reader.snapshot(form.pid))
        assert after.source == "mirror" and after.resolve(STATUS).name == renamed
    finally:
        run(reader.close())


def click_button_by_pointer(desktop: Desktop, form: FormApp, button: Bounds) -> str:
    """Click the form's button with the desktop's pointer (no D-Bus call); what its status label
    reads once the app has acted."""
    count = len(form.events("button")) + 1
    click(desktop, form, button)
    form.wait_for_event("button", lambda e: e["count"] == count)
    return f"clicked {count}"


def accessibility_bus_daemon(a11y_desktop: A11yDesktop) -> int:
    """The pid of the accessibility bus's dbus-daemon, which the desktop's AT-SPI launcher started."""
    launcher = a11y_desktop.processes[0].pid
    children = [
        int(pid)
        for task in Path(f"/proc/{launcher}/task").iterdir()
        for pid in (task / "children").read_text().split()
    ]
    return next(pid for pid in children if b"dbus-daemon" in Path(f"/proc/{pid}/cmdline").read_bytes())


def test_a_change_whose_events_are_still_on_their_way_is_in_the_next_snapshot(
    run: Run[Any], client: AccessibilityClient, form: FormApp, a11y_desktop: A11yDesktop, desktop: Desktop
) -> None:
    """A read syncs with the app over the bus its events travel on, so the events the app sent
    before the read are applied even when they arrive after the read's own calls (which the app
    answers peer to peer): the mirror never serves a tree older than a fetch would. Here the bus
    daemon is stopped while the form renames its label, and resumed while the read waits."""
    button = run(client.snapshot(form.pid)).resolve(BUTTON).bounds
    assert button is not None
    daemon = accessibility_bus_daemon(a11y_desktop)
    count = len(form.events("button")) + 1
    os.kill(daemon, signal.SIGSTOP)
    resume = threading.Timer(0.5, os.kill, (daemon, signal.SIGCONT))
    try:
        click(desktop, form, button)  # no D-Bus call
        form.wait_for_event("button", lambda e: e["count"] == count)  # renamed; its events held up
        resume.start()
        after = run(client.snapshot(form.pid))
    finally:
        resume.cancel()
        os.kill(daemon, signal.SIGCONT)
    assert after.resolve(STATUS).name == f"clicked {count}"


@not_on("sway", why=MOVE_UNSEEN)
def test_a_moved_window_moves_its_elements_and_the_events_version(
    run: Run[Any], client: AccessibilityClient, form: FormApp, form_window: FormWindow
) -> None:
    before = run(client.snapshot(form.pid)).resolve(ENTRY).bounds
    assert before is not None
    version = client.events_version()
    form_window.move_by(40, 30)
    # No element reports new bounds (GTK and Qt report no event at all); every element in the
    # window has moved on the screen.
    expected = (before.x + 40, before.y + 30)
    poll(
        f"the entry at {expected}",
        lambda: (
            (b := run(client.snapshot(form.pid)).resolve(ENTRY).bounds) is not None and (b.x, b.y) == expected
        ),
        5,
    )
    # What tells its readers (the recorder, the PII masker) that a tree may have changed.
    assert client.events_version() != version, "a change no event announced changes the events version"


def test_a_moved_window_has_its_elements_placed_where_it_moved_from_the_mirror(
    run: Run[Any], client: AccessibilityClient, form_window: FormWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the desktop placing elements on screen, as a server's client has it (under sway the
    window-relative tree is placed at its window's origin: :mod:`deskrig.a11y.placement`), a
    moved window's elements are where it moved, read from the mirror: on X11 the mirror moved
    them itself, under sway its tree stands and is placed anew."""
    pid = form_window.form.pid
    monkeypatch.setattr(client, "placement", form_window.desktop)
    before = run(client.snapshot(pid)).resolve(ENTRY).bounds
    assert before is not None
    form_window.move_by(40, 30)
    expected = (before.x + 40, before.y + 30)

    def placed_there() -> Snapshot | None:
        snapshot = run(client.snapshot(pid))
        bounds = snapshot.resolve(ENTRY).bounds
        return snapshot if bounds is not None and (bounds.x, bounds.y) == expected else None

    assert poll(f"the entry at {expected}", placed_there, 5).source == "mirror"


def focused_ref(snapshot: Snapshot) -> ElementRef | None:
    focused = deepest_focused(snapshot.elements)
    return None if focused is None else focused.ref


def focus_entry(run: Run[Any], client: AccessibilityClient, form: FormApp, desktop: Desktop) -> Element:
    """Click into the form's entry, which takes the keyboard focus; the entry."""
    entry = run(client.snapshot(form.pid)).resolve(ENTRY)
    assert entry.bounds is not None
    click(desktop, form, entry.bounds)
    poll("the entry focused", lambda: focused_ref(run(client.snapshot(form.pid))) == entry.ref, 5)
    return entry


def test_focus_moved_by_keyboard_shows_in_the_next_snapshot(
    run: Run[Any], client: AccessibilityClient, form: FormApp, desktop: Desktop
) -> None:
    entry = focus_entry(run, client, form, desktop)
    desktop.with_input(lambda device: device.press_key("Tab"))
    poll(
        "the focus to leave the entry",
        lambda: focused_ref(run(client.snapshot(form.pid, refresh=True))) not in (None, entry.ref),
        5,
    )
    fetched, mirrored = run(client.snapshot(form.pid, refresh=True)), run(client.snapshot(form.pid))
    assert mirrored.source == "mirror"
    assert focused_ref(mirrored) == focused_ref(fetched)
    assert [e.states for e in mirrored.elements] == [e.states for e in fetched.elements]


def test_text_typed_into_the_focused_entry_shows_without_an_event(
    run: Run[Any],
    client: AccessibilityClient,
    form: FormApp,
    desktop: Desktop,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The focused element is read again on every read, whatever the events say: a toolkit may
    not report text typed into it (Qt's text view did not, for keys typed through XTEST). Here
    every event about the entry is dropped, as from such a toolkit."""
    entry = focus_entry(run, client, form, desktop)
    note = AppMirror.note

    def unreported(mirror: AppMirror, event: ObjectEvent) -> None:
        if event.path != entry.ref.path:
            note(mirror, event)

    monkeypatch.setattr(AppMirror, "note", unreported)
    text = f"keyed {int(time.monotonic() * 1000) % 100000}"
    desktop.with_input(lambda device: [device.press_key(key) for key in ("ctrl+a", "BackSpace")])
    desktop.with_input(lambda device: device.type_text(text, delay_ms=5))
    poll(
        "the app to take the typed text",
        lambda: run(client.snapshot(form.pid, max_depth=1000)).resolve(ENTRY).text == text,
        5,
    )
    assert run(client.snapshot(form.pid)).resolve(ENTRY).text == text


class Batches:
    """Counts the app's request batches in a read that begin after one was answered: a read in one
    round trip begins none."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answered = self.asked_after_an_answer = 0
        call_many = AppConnection.call_many

        async def counted(connection: AppConnection, requests: Sequence[Request]) -> list[Reply]:
            if requests and self.answered:
                self.asked_after_an_answer += 1
            try:
                return await call_many(connection, requests)
            finally:
                self.answered += bool(requests)

        monkeypatch.setattr(AppConnection, "call_many", counted)

    def one_round_trip(self, run: Run[Any], client: AccessibilityClient, pid: int) -> Snapshot | None:
        """A snapshot read from the mirror in one round trip; None if it took more."""
        self.answered = self.asked_after_an_answer = 0
        snapshot = run(client.snapshot(pid))
        return snapshot if snapshot.source == "mirror" and self.asked_after_an_answer == 0 else None


def test_a_read_of_an_unchanged_app_asks_it_in_one_round_trip(
    run: Run[Any],
    client: AccessibilityClient,
    form: FormApp,
    desktop: Desktop,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sync, the checks for unreported changes and the focused element's node and details
    (it takes typed text, which a toolkit may not report) are all asked at once: once the app has
    stopped changing (a fresh form still lays itself out), a read asks nothing after the first
    answer."""
    entry = focus_entry(run, client, form, desktop)
    batches = Batches(monkeypatch)

    def one_round_trip() -> bool:
        snapshot = batches.one_round_trip(run, client, form.pid)
        return snapshot is not None and focused_ref(snapshot) == entry.ref

    poll("a read of the app in one round trip", one_round_trip, 5)


def test_what_events_said_changed_before_a_read_is_read_with_the_sync(
    run: Run[Any],
    client: AccessibilityClient,
    form: FormApp,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An app that keeps reporting changes (gtk3-widget-factory's animations report new bounds a
    few hundred times a second) is read in one round trip too: the objects that events noted before
    the read began named are read with the sync. Here the button renames its label before a read."""
    bus_name = run(client.snapshot(form.pid)).bus_name
    mirror = client.mirror(bus_name)
    assert mirror is not None
    batches = Batches(monkeypatch)

    def read_in_one_round_trip_after_a_rename() -> bool:
        renamed = click_button(run, client, form, run(client.snapshot(form.pid)))
        # Events are taken in while the loop runs.
        poll("the rename noted", lambda: run(asyncio.sleep(0.02, mirror.changes_noted)), 5)
        snapshot = batches.one_round_trip(run, client, form.pid)
        return snapshot is not None and snapshot.resolve(STATUS).name == renamed

    poll("a read after a rename in one round trip", read_in_one_round_trip_after_a_rename, 10)


def test_an_event_noted_after_the_sync_was_answered_is_left_to_the_next_read(
    run: Run[Any],
    client: AccessibilityClient,
    form: FormApp,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read is current as of the moment the app answered its sync: an event noted after that
    is not read for it (gtk3-widget-factory reports unchanged bounds 180 times a second, and a third
    of its reads took one or two more round trips for them) but by the next read. Here the button
    reports new bounds just after each sync returns, stamped an hour ahead: a tree that claimed to
    reflect it would show a negative ``newest_event_age_ms``."""
    mirror, button = quiet_mirror(run, client, form, BUTTON)
    sync = client.events.sync

    async def sync_then_an_event(bus_name: str) -> None:
        await sync(bus_name)
        event = ObjectEvent(bus_name, button.ref.path, "BoundsChanged", "", time.monotonic() + 3600)
        asyncio.get_running_loop().call_soon(mirror.note, event)

    monkeypatch.setattr(client.events, "sync", sync_then_an_event)
    batches = Batches(monkeypatch)
    reads: list[Snapshot] = []

    def read_in_one_round_trip() -> bool:
        read = batches.one_round_trip(run, client, form.pid)
        reads.extend([read] if read is not None else [])
        return read is not None

    # A fresh form may still be laying itself out: some read soon asks nothing after the sync.
    poll("a read in one round trip", read_in_one_round_trip, 5)
    age = reads[-1].newest_event_age_ms
    assert age is None or age >= 0, "the tree does not reflect the event noted after the sync"
    assert mirror.changes_noted, "the event is left to the next read"
    monkeypatch.undo()
    age = run(client.snapshot(form.pid)).newest_event_age_ms
    assert age is not None and age < 0, "the next read reflects it"


@pytest.mark.parametrize("failing", ["sync", "patch"])
def test_a_failed_read_leaves_what_changed_to_the_next(
    run: Run[Any], client: AccessibilityClient, form: FormApp, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """A read takes what the events said changed when it begins; if it fails (its sync, or its
    re-read of what changed), the next read still shows the change."""
    mirror = client.mirror(run(client.snapshot(form.pid)).bus_name)
    assert mirror is not None
    renamed = click_button(run, client, form, run(client.snapshot(form.pid)))
    poll("the rename noted", lambda: run(asyncio.sleep(0.02, mirror.changes_noted)), 5)
    failure = CallFailed("org.freedesktop.DBus.Error.Failed", "the bus hiccuped")

    async def fail(*args: object) -> None:
        raise failure

    if failing == "sync":
        monkeypatch.setattr(client.events, "sync", fail)
    else:
        monkeypatch.setattr(AppMirror, "_patch", fail)
    with pytest.raises(DeskrigError):
        run(client.snapshot(form.pid))
    monkeypatch.undo()
    assert run(client.snapshot(form.pid)).resolve(STATUS).name == renamed


def test_what_a_read_took_at_its_sync_is_noted_again_when_the_rest_fails(
    run: Run[Any], client: AccessibilityClient, form: FormApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read takes what the events noted during its sync once the sync is answered; if what it
    asked on the way fails, that is noted again for the next read. Here the status label is
    reported renamed during the sync, and the details read ahead fail."""
    mirror, status = quiet_mirror(run, client, form, STATUS)
    sync = client.events.sync

    async def an_event_then_sync(bus_name: str) -> None:
        mirror.note(
            ObjectEvent(bus_name, status.ref.path, "PropertyChange", "accessible-name", time.monotonic())
        )
        await sync(bus_name)

    async def fail(*args: object) -> None:
        raise CallFailed("org.freedesktop.DBus.Error.Failed", "the bus hiccuped")

    monkeypatch.setattr(client.events, "sync", an_event_then_sync)
    monkeypatch.setattr(mirror_module, "read_details", fail)
    with pytest.raises(DeskrigError):
        run(client.snapshot(form.pid))
    monkeypatch.undo()
    assert mirror.changes_noted


def test_an_event_noted_after_a_fetch_does_not_age_the_newest_event(
    run: Run[Any], client: AccessibilityClient, form: FormApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``newest_event_age_ms`` is the age of the newest event the tree reflects. An event about an
    object that a subtree fetched again adds, which came in while that fetch ran (it is held until
    the fetched tree holds its object), is noted after newer events: it does not make the newest
    older."""
    snapshot = run(client.snapshot(form.pid))
    known, button = {e.ref for e in snapshot.elements}, snapshot.resolve(BUTTON).ref
    mirror = client.mirror(snapshot.bus_name)
    assert mirror is not None
    add_rows(form, 1)
    poll("the form to stop sending events", lambda: quiet(run, client), 5)
    subtree_fetch = mirror_module.fetch_subtrees
    newest: list[float] = []

    async def with_events_meanwhile(app: AppConnection, roots: list[str], **options: Any) -> Any:
        fetched = await subtree_fetch(app, roots, **options)
        added = next(
            e
            for tree in fetched
            if isinstance(tree, FetchedTree)
            for e in tree.elements
            if e.ref not in known
        )
        newest.append(time.monotonic())
        for path, at in ((added.ref.path, newest[0] - 10), (button.path, newest[0])):
            mirror.note(ObjectEvent(app.bus_name, path, "PropertyChange", "accessible-description", at))
        return fetched

    monkeypatch.setattr(mirror_module, "fetch_subtrees", with_events_meanwhile)
    assert run(client.snapshot(form.pid)).source == "mirror", "the list's subtree was fetched again"
    monkeypatch.undo()
    age = run(client.snapshot(form.pid)).newest_event_age_ms
    assert age is not None and age <= (time.monotonic() - newest[0]) * 1000


def test_a_change_to_a_list_that_manages_its_descendants_is_read_from_the_mirror(
    run: Run[Any], client: AccessibilityClient, form: FormApp
) -> None:
    """A list that manages its descendants is described again like any element an event names,
    not fetched with the whole tree: its children are watched by listing them, and its child count
    differs by how it was read (GTK's cache says -1, its ChildCount property the number)."""
    mirror, rows = quiet_mirror(run, client, form, ROWS)
    mirror.note(
        ObjectEvent(rows.ref.bus_name, rows.ref.path, "PropertyChange", "accessible-description", 0.0)
    )
    snapshot = run(client.snapshot(form.pid))
    assert snapshot.source == "mirror"
    assert snapshot.resolve(ROWS).child_count == rows.child_count


def test_an_element_renamed_while_a_read_syncs_shows_its_new_name(
    run: Run[Any], client: AccessibilityClient, form: FormApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a read asks with its sync may predate an event noted during the sync: the status
    label, noted changed before the read (so its node is read with the sync), is renamed after its
    node was read and before the sync returns; the read shows the new name."""
    snapshot = run(client.snapshot(form.pid))
    mirror = client.mirror(snapshot.bus_name)
    assert mirror is not None
    status, button = snapshot.resolve(STATUS), snapshot.resolve(BUTTON)
    mirror.note(
        ObjectEvent(snapshot.bus_name, status.ref.path, "PropertyChange", "accessible-description", 0.0)
    )
    count = len(form.events("button")) + 1
    nodes_read = asyncio.Event()
    read_nodes, sync = mirror_module.fetch_nodes, client.events.sync

    async def nodes_then_flag(app: AppConnection, keys: Sequence[ElementRef]) -> Any:
        try:
            return await read_nodes(app, keys)
        finally:
            nodes_read.set()

    async def rename_then_sync(bus_name: str) -> None:
        await nodes_read.wait()
        await client.element_action(button, "click")
        await asyncio.to_thread(form.wait_for_event, "button", lambda e: e["count"] == count)
        await sync(bus_name)

    monkeypatch.setattr(mirror_module, "fetch_nodes", nodes_then_flag)
    monkeypatch.setattr(client.events, "sync", rename_then_sync)
    renamed = run(client.snapshot(form.pid)).resolve(STATUS).name
    monkeypatch.undo()
    assert renamed == f"clicked {count}"


@not_on("sway", why=MOVE_UNSEEN)
def test_a_change_only_a_whole_fetch_finds_moves_the_events_version(
    run: Run[Any], client: AccessibilityClient, form: FormApp, form_window: FormWindow
) -> None:
    """A whole fetch (here a refresh) may be what first serves a change no event announced (a
    moved window): the events version, which readers trust to say a tree may have changed (the
    recorder takes an after-tree over as the next before on it), moves with it."""
    before = run(client.snapshot(form.pid)).resolve(ENTRY).bounds
    assert before is not None
    form_window.move_by(30, 20)

    def moved_past_the_mirror() -> bool:
        fetched = run(client.snapshot(form.pid, max_depth=1000, store=False)).resolve(ENTRY).bounds
        return fetched is not None and (fetched.x, fetched.y) == (before.x + 30, before.y + 20)

    poll("the entry moved, in a fetch past the mirror", moved_past_the_mirror, 5)
    poll("the form to stop sending events", lambda: quiet(run, client), 5)
    version = client.events_version()
    refreshed = run(client.snapshot(form.pid, refresh=True)).resolve(ENTRY).bounds
    assert refreshed is not None and (refreshed.x, refreshed.y) == (before.x + 30, before.y + 20)
    assert client.events_version() != version, "the change the fetch served moved the events version"


def test_a_resized_window_is_laid_out_anew_in_the_next_snapshot(
    run: Run[Any], client: AccessibilityClient, form_window: FormWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every read checks each window's extents: a window of another size has its subtree fetched
    again, whatever the toolkit reported of its elements' new bounds. Under sway a native Wayland
    client's window extents start at its own origin whatever its place: its size is all that
    changes in them (a tiled window's tile changes whenever another window maps). Here every event
    is dropped while the window is resized, as from a toolkit that reports none of it; the next
    snapshot is the tree a fetch past the mirror finds."""
    pid = form_window.form.pid
    window = form_window.listed()
    assert (window.bounds.width, window.bounds.height) != RESIZED
    entry = run(client.snapshot(pid)).resolve(ENTRY).bounds
    assert entry is not None
    monkeypatch.setattr(AppMirror, "note", lambda mirror, event: None)
    width, height = RESIZED
    form_window.place(window.bounds.model_copy(update={"width": width, "height": height}))

    def laid_out_anew() -> bool:
        fetched = run(client.snapshot(pid, max_depth=1000, store=False))
        frame, now = fetched.elements[1].bounds, fetched.resolve(ENTRY).bounds
        return (
            frame is not None
            and (frame.width, frame.height) == RESIZED
            and now is not None
            and now.width != entry.width
        )

    poll("the form laid out in its resized window", laid_out_anew, 5)
    poll("the form to stop sending events", lambda: quiet(run, client), 5)
    monkeypatch.undo()
    mirrored = run(client.snapshot(pid))
    fetched = run(client.snapshot(pid, max_depth=1000, store=False))
    assert [(e.role, e.name, e.bounds) for e in mirrored.elements] == [
        (e.role, e.name, e.bounds) for e in fetched.elements
    ]


def without_component(node: RawNode) -> RawNode:
    return replace(node, interfaces=node.interfaces - {"Component"})


@pytest.mark.parametrize("extents", ["lost", "gained"])
def test_a_window_that_loses_or_gains_its_extents_has_the_tree_fetched_whole(
    run: Run[Any], client: AccessibilityClient, form: FormApp, monkeypatch: pytest.MonkeyPatch, extents: str
) -> None:
    """The mirror watches the extents of every top-level element that has them (the Component
    interface). A top-level element described again without them, or with them where it had none
    (here its node is read without Component, or the whole fetch had none), changes which windows
    are watched: the read fetches the whole tree (it raised ValueError from the windows-held-still
    check, which paired the extents of the windows watched before with those of the others), and
    the next read is the mirror's again."""
    snapshot = run(client.snapshot(form.pid))
    frame = next(e for e in snapshot.elements if e.depth == 1 and e.has_interface("Component"))
    if extents == "gained":
        whole_fetch = mirror_module.fetch_tree

        async def frame_without_component(app: AppConnection, **limits: Any) -> FetchedTree:
            fetched = await whole_fetch(app, **limits)
            at = next(e.index for e in fetched.elements if e.ref == frame.ref)
            element = fetched.elements[at]
            interfaces = tuple(i for i in element.interfaces if i != "Component")
            fetched.elements[at] = element.model_copy(update={"interfaces": interfaces, "bounds": None})
            fetched.nodes[at] = without_component(fetched.nodes[at])
            return fetched

        monkeypatch.setattr(mirror_module, "fetch_tree", frame_without_component)
        run(client.snapshot(form.pid, refresh=True))
        monkeypatch.undo()
    else:
        read_nodes = mirror_module.fetch_nodes

        async def frame_read_without_component(
            app: AppConnection, keys: Sequence[ElementRef]
        ) -> list[RawNode | CallFailed]:
            return [
                without_component(node) if isinstance(node, RawNode) and node.key == frame.ref else node
                for node in await read_nodes(app, keys)
            ]

        monkeypatch.setattr(mirror_module, "fetch_nodes", frame_read_without_component)
    mirror = client.mirror(snapshot.bus_name)
    assert mirror is not None
    note_changed(mirror, [frame])
    assert run(client.snapshot(form.pid)).source == "fetch"
    monkeypatch.undo()
    poll("a read from the mirror", lambda: run(client.snapshot(form.pid)).source == "mirror", 5)


def note_changed(mirror: AppMirror, elements: Sequence[Element], times: int = 1) -> None:
    """Note a property change of each of ``elements``, ``times`` over."""
    for _ in range(times):
        for element in elements:
            mirror.note(
                ObjectEvent(
                    element.ref.bus_name, element.ref.path, "PropertyChange", "accessible-description", 0.0
                )
            )


@pytest.mark.parametrize(
    ("objects", "events_each", "whole_fetch"),
    [(3, 4, False), (4, 1, True)],
    ids=["duplicates count once", "more objects than the limit"],
)
def test_the_burst_limit_counts_changed_objects(
    run: Run[Any],
    client: AccessibilityClient,
    form: FormApp,
    monkeypatch: pytest.MonkeyPatch,
    objects: int,
    events_each: int,
    whole_fetch: bool,
) -> None:
    """More changed objects than the burst limit (3 here) fetch the whole tree, in one bulk fetch,
    rather than re-read each; several events about one object count it once."""
    monkeypatch.setattr(mirror_module, "BURST_LIMIT", 3)
    settles_in_the_mirror(run, client, form)
    poll("the form to stop sending events", lambda: quiet(run, client), 5)
    snapshot = run(client.snapshot(form.pid))
    mirror = client.mirror(snapshot.bus_name)
    assert mirror is not None
    labels = [e for e in snapshot.elements if e.role == "label" and e.depth > 1][:objects]
    assert len(labels) == objects
    note_changed(mirror, labels, events_each)
    assert run(client.snapshot(form.pid)).source == ("fetch" if whole_fetch else "mirror")


def test_changes_inside_a_subtree_fetched_again_are_not_read_again(
    run: Run[Any], client: AccessibilityClient, form: FormApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An element noted changed inside a subtree that the read fetches again is in the fetched
    subtree as it is now: it is not described again after the fetch."""
    settles_in_the_mirror(run, client, form)
    snapshot = run(client.snapshot(form.pid))
    mirror = client.mirror(snapshot.bus_name)
    assert mirror is not None
    elements = snapshot.elements
    parent = next(e for e in elements if e.depth >= 2 and e.child_count > 0 and e.bounds is not None)
    child = next(e for e in elements if e.parent == parent.index and not e.has_state("focused"))
    mirror.note(ObjectEvent(parent.ref.bus_name, parent.ref.path, "ChildrenChanged", "add", 0.0))
    note_changed(mirror, [child])
    subtree_fetch, call_many = mirror_module.fetch_subtrees, AppConnection.call_many
    fetched: list[bool] = []
    asked_after: list[Request] = []

    async def flagged(app: AppConnection, roots: list[str], **options: Any) -> Any:
        try:
            return await subtree_fetch(app, roots, **options)
        finally:
            fetched.append(True)

    async def recorded(connection: AppConnection, requests: Sequence[Request]) -> list[Reply]:
        if fetched:
            asked_after.extend(requests)
        return await call_many(connection, requests)

    monkeypatch.setattr(mirror_module, "fetch_subtrees", flagged)
    monkeypatch.setattr(AppConnection, "call_many", recorded)
    assert run(client.snapshot(form.pid)).source == "mirror"
    assert fetched, "the parent's subtree was fetched again"
    assert [r.member for r in asked_after if r.path == child.ref.path] == []
