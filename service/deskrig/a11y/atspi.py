"""The AT-SPI client: find accessible applications, snapshot their trees, act on elements.

Pure-Python asyncio D-Bus (dbus-fast), so it works from any virtual environment; no pyatspi or
PyGObject. The client needs only the address of the desktop's D-Bus session bus, where the
AT-SPI bus launcher (``org.a11y.Bus``) tells it where the accessibility bus is.

Every method translates D-Bus failures into :class:`~deskrig.errors.DeskrigError` at this
boundary (with :func:`~deskrig.a11y.failures.translate_failures`): a missing process is APP_NOT_RUNNING, a process with no accessible application is
A11Y_UNAVAILABLE, a vanished object is ELEMENT_NOT_FOUND (stale).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from dbus_fast import Variant
from dbus_fast.aio import MessageBus
from pydantic import BaseModel

from deskrig.a11y import constants as c
from deskrig.a11y.connection import (
    UNKNOWN_OBJECT,
    AppConnection,
    CallFailed,
    Disconnected,
    Request,
    call,
    close_bus,
    open_bus,
)
from deskrig.a11y.constants import A11Y_BUS_NAME, A11Y_BUS_PATH, A11Y_STATUS, DBUS_NAME, DBUS_PATH
from deskrig.a11y.describe import VALUE_PROPERTIES, describe_many
from deskrig.a11y.events import EventFeed, ObjectEvent
from deskrig.a11y.failures import invalid_argument, require_running, translate_failures
from deskrig.a11y.fetch import FetchedTree, fetch_tree, toplevel_extents
from deskrig.a11y.mirror import MIRROR_MAX_ELEMENTS, AppMirror, MirroredTree
from deskrig.a11y.nodes import fetch_nodes, read_properties
from deskrig.a11y.placement import (
    PlacedCopies,
    WindowPlacement,
    open_submenus,
    placed,
    pointer_popups,
    toplevel_origins,
    toplevels,
)
from deskrig.a11y.snapshots import SnapshotStore
from deskrig.a11y.source import ACTIVATE_ALIASES, check_limits, deepest_focused
from deskrig.a11y.tree import Element, ElementQuery, ElementRef, Snapshot
from deskrig.config import A11Y_EVENTS_IDLE_TIMEOUT
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, Diagnostic

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0


class AppRef(BaseModel):
    """An application registered on the accessibility bus."""

    bus_name: str
    pid: int | None
    name: str


class AccessibilityClient:
    """AT-SPI over one desktop's accessibility bus. Create with :meth:`connect`."""

    name = "AT-SPI"

    def __init__(
        self,
        a11y_bus: MessageBus,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        store: SnapshotStore | None = None,
        events_idle_timeout: float = A11Y_EVENTS_IDLE_TIMEOUT,
    ) -> None:
        self._a11y_bus = a11y_bus
        self._timeout_s = timeout_s
        # Toolkits emit events only while someone listens, and an app that animates sends them
        # without pause (gtk3-widget-factory some 180 a second, which cost it, the bus daemon and
        # the server about 6% of a core between them). Once nobody has read a tree for this long,
        # the next event ends the feed; the next read subscribes again and fetches its tree whole,
        # as after any gap in the events. 0: never.
        self._events_idle_timeout = events_idle_timeout or math.inf
        #: Mirror reads under way, and when the last one ended.
        self._reads = 0
        self._last_read_at = time.monotonic()
        #: The task ending the idle event feed, while it runs.
        self._ending_feed: asyncio.Task[None] | None = None
        self._apps: dict[str, AppConnection] = {}  # by unique name on the a11y bus
        self._mirrors: dict[str, AppMirror] = {}  # likewise
        self._placed: dict[str, PlacedCopies] = {}  # likewise: each app's elements placed on screen last
        #: Reads that found a tree changed where no event said it had (see events_version).
        self._unannounced_changes = 0
        self.events = EventFeed(a11y_bus, self._on_event)
        self.snapshots = store if store is not None else SnapshotStore()
        self.diagnostics: list[Diagnostic] = []
        #: The desktop, which says where windows' accessibility coordinates start; without it,
        #: element bounds are the toolkit's own.
        self.placement: WindowPlacement | None = None

    @classmethod
    async def connect(
        cls,
        session_bus_address: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        events_idle_timeout: float = A11Y_EVENTS_IDLE_TIMEOUT,
    ) -> AccessibilityClient:
        """Ask the session bus's AT-SPI launcher for the accessibility bus, and connect to it."""
        try:
            async with asyncio.timeout(timeout_s):
                session = await open_bus(session_bus_address)
                try:
                    (address,) = await call(
                        session, A11Y_BUS_NAME, A11Y_BUS_PATH, A11Y_BUS_NAME, "GetAddress"
                    )
                    (enabled,) = await call(
                        session,
                        A11Y_BUS_NAME,
                        A11Y_BUS_PATH,
                        c.PROPERTIES,
                        "Get",
                        "ss",
                        [A11Y_STATUS, "IsEnabled"],
                    )
                finally:
                    await close_bus(session)
                client = cls(
                    await open_bus(address), timeout_s=timeout_s, events_idle_timeout=events_idle_timeout
                )
        except (CallFailed, Disconnected, TimeoutError) as exc:
            raise DeskrigError(
                ErrorCode.A11Y_UNAVAILABLE,
                f"no AT-SPI accessibility bus reachable through the session bus {session_bus_address}: {exc}",
                details={"session_bus_address": session_bus_address},
                remediation="Start at-spi-bus-launcher on the desktop's session bus (the rig does this) "
                "and give apps that bus in DBUS_SESSION_BUS_ADDRESS.",
            ) from exc
        if not enabled.value:
            client._note("org.a11y.Status.IsEnabled is false: toolkits may not expose their trees")
        return client

    async def close(self) -> None:
        if self._ending_feed is not None:
            self._ending_feed.cancel()  # the bus it would call on closes below
        for app in self._apps.values():
            await app.close()
        self._apps.clear()
        await close_bus(self._a11y_bus)

    # ---- applications ------------------------------------------------------------------------

    async def applications(self) -> list[AppRef]:
        """Every application registered with the AT-SPI registry, with its pid and name."""
        async with self._guard("listing accessible applications"):
            (refs,) = await self._daemon(c.REGISTRY_BUS_NAME, c.ROOT_PATH, c.ACCESSIBLE, "GetChildren")
            found = await asyncio.gather(*(self._describe_app(str(bus_name)) for bus_name, _path in refs))
        return [app for app in found if app is not None]

    async def _describe_app(self, bus_name: str) -> AppRef | None:
        try:
            pid_reply, name_reply = await asyncio.gather(
                self._daemon(DBUS_NAME, DBUS_PATH, DBUS_NAME, "GetConnectionUnixProcessID", "s", [bus_name]),
                self._daemon(bus_name, c.ROOT_PATH, c.PROPERTIES, "Get", "ss", [c.ACCESSIBLE, "Name"]),
            )
        except CallFailed:
            return None  # it exited while we asked
        return AppRef(bus_name=bus_name, pid=int(pid_reply[0]), name=str(name_reply[0].value))

    async def _app_for_pid(self, pid: int) -> AppConnection:
        require_running(pid)
        for app in list(self._apps.values()):
            if app.pid == pid:
                if app.alive:
                    return app
                del self._apps[app.bus_name]
                self._mirrors.pop(app.bus_name, None)
                self._placed.pop(app.bus_name, None)
        apps = await self.applications()
        match = next((a for a in apps if a.pid == pid), None)
        if match is None:
            raise DeskrigError(
                ErrorCode.A11Y_UNAVAILABLE,
                f"process {pid} is running but no accessible application with that pid is registered "
                "on the AT-SPI bus: the app has no AT-SPI support (Tk, plain X clients), has not "
                "started its accessibility bridge yet, or uses another session bus",
                details={"pid": pid, "registered": [a.model_dump() for a in apps]},
            )
        return await self._app(match.bus_name, pid)

    async def _app(self, bus_name: str, pid: int | None = None) -> AppConnection:
        """The connection to ``bus_name``: peer-to-peer when the app offers it, else via the daemon."""
        app = self._apps.get(bus_name)
        if app is not None and app.alive:
            return app
        if pid is None:
            (pid,) = await self._daemon(
                DBUS_NAME, DBUS_PATH, DBUS_NAME, "GetConnectionUnixProcessID", "s", [bus_name]
            )
        try:
            # Asking for the address also registers us with the bridge, which GTK's
            # Cache.GetItems requires before it answers.
            (address,) = await self._daemon(bus_name, c.ROOT_PATH, c.APPLICATION, "GetApplicationBusAddress")
            if not address:
                raise Disconnected("the app offers no peer-to-peer address")
            app = AppConnection(bus_name, pid, await open_bus(address), peer_to_peer=True)
        except (Disconnected, CallFailed) as exc:
            if isinstance(exc, CallFailed) and exc.peer_gone:
                raise
            self._note(
                f"peer-to-peer connection to {bus_name} (pid {pid}) failed ({exc}); using the bus daemon"
            )
            app = AppConnection(bus_name, pid, self._a11y_bus, peer_to_peer=False)
        self._apps[bus_name] = app
        return app

    # ---- snapshots ---------------------------------------------------------------------------

    async def snapshot(
        self,
        pid: int,
        *,
        max_depth: int | None = None,
        max_elements: int | None = 2000,
        query: ElementQuery | None = None,
        include_offscreen_items: bool = False,
        refresh: bool = False,
        store: bool = True,
    ) -> Snapshot:
        """The accessibility tree of the app with ``pid``, stored for ``{snapshot_id, index}`` lookups.

        The tree comes from the app's live mirror (:mod:`deskrig.a11y.mirror`), synced with the
        app first; ``refresh`` fetches it whole again instead (and renews the mirror). With
        ``query`` the returned snapshot lists only the matching elements (best first); the
        stored one keeps the whole tree, so indices stay valid. Lists, trees and tables that
        manage their own descendants contribute only their showing items unless
        ``include_offscreen_items`` (which can mean thousands of round trips, and bypasses the mirror).
        Without ``store`` the snapshot is kept nowhere: for a reader that names no element by it
        afterwards (the recorder), so it never evicts a client's snapshots.
        """
        check_limits(max_depth, max_elements)
        started = time.perf_counter()
        async with self._guard(f"reading the accessibility tree of pid {pid}", pid=pid):
            app = await self._app_for_pid(pid)
            mirrored = None
            if max_depth is None and not include_offscreen_items:
                mirrored = await self._mirrored(app, refresh=refresh)
                if mirrored.truncated and (max_elements is None or max_elements > MIRROR_MAX_ELEMENTS):
                    mirrored = None  # more than the mirror holds was asked for
            fetched = (
                None
                if mirrored is not None
                else await fetch_tree(
                    app,
                    max_depth=max_depth,
                    max_elements=max_elements,
                    include_offscreen_items=include_offscreen_items,
                )
            )
        if fetched is not None:
            for note in fetched.notes:
                self._note(f"pid {pid}: {note}")
            content = _from_fetch(fetched)
        else:
            assert mirrored is not None
            content = _from_mirror(mirrored, max_elements, time.monotonic())
        # The mirror keeps the toolkit's coordinates; where each window starts is asked anew.
        content["elements"] = await self._on_screen(pid, content["elements"], self._copies(app))
        snapshot = Snapshot(
            snapshot_id=uuid.uuid4().hex[:12],
            pid=pid,
            bus_name=app.bus_name,
            created_at=datetime.now(UTC),
            fetch_ms=round((time.perf_counter() - started) * 1000, 2),
            **content,
        )
        if store:
            self.snapshots.add(snapshot)
        return snapshot.matching(query) if query is not None else snapshot

    async def current_elements(self, pid: int) -> list[Element]:
        """The elements of the app with ``pid`` as they are now (from its mirror, synced with the
        app first), in screen coordinates, stored as no snapshot: for a reader that addresses no
        element afterwards (the PII masker), so it never evicts a client's snapshots."""
        async with self._guard(f"reading the accessibility tree of pid {pid}", pid=pid):
            app = await self._app_for_pid(pid)
            mirrored = await self._mirrored(app, refresh=False)
        # A list of the caller's own: the mirror's is the tree it corrects and serves next.
        return await self._on_screen(pid, list(mirrored.elements), self._copies(app))

    def events_version(self) -> tuple[int, int] | None:
        """Changes when an AT-SPI event arrives, when a read finds a tree changed where no event
        said it had or fetches one whole that differs from the one it held (toolkits do not report
        everything: see :mod:`deskrig.a11y.mirror`), or when
        the feed is renewed; None while no events are received (before the first tree read, or
        after the feed was lost). Any thread may ask."""
        events = self.events
        return (events.generation, events.received + self._unannounced_changes) if events.subscribed else None

    def mirror(self, bus_name: str) -> AppMirror | None:
        """The live mirror of the app at ``bus_name``; None before its first read."""
        return self._mirrors.get(bus_name)

    async def _mirrored(self, app: AppConnection, *, refresh: bool) -> MirroredTree:
        """The app's mirrored tree, current as of now (see :mod:`deskrig.a11y.events`); a read
        holds off the end of the event feed (``events_idle_timeout``) while it runs."""
        self._reads += 1
        try:
            if not self.events.subscribed:
                await self.events.subscribe()
            mirror = self._mirrors.get(app.bus_name)
            if mirror is None:
                mirror = self._mirrors[app.bus_name] = AppMirror(app.bus_name)
            if refresh:
                mirror.forget()
            tree = await mirror.read(
                app, lambda: self.events.sync(app.bus_name), lambda: self.events.generation
            )
        finally:
            self._reads -= 1
            self._last_read_at = time.monotonic()
        self._unannounced_changes += tree.changed_unannounced
        if tree.refetched:
            for note in tree.notes:
                self._note(f"pid {app.pid}: {note}")
        return tree

    def _on_event(self, event: ObjectEvent) -> None:
        mirror = self._mirrors.get(event.sender)
        if mirror is not None:
            mirror.note(event)
        if self._ending_feed is None and self._feed_idle(event.at):
            self._ending_feed = asyncio.get_running_loop().create_task(self._end_idle_feed())

    def _feed_idle(self, now: float) -> bool:
        """True when no tree read is under way and none ended within ``events_idle_timeout``."""
        return not self._reads and now - self._last_read_at >= self._events_idle_timeout

    async def _end_idle_feed(self) -> None:
        """Unsubscribe from the events, unless a read began since the event that called for it
        (the feed's turns then put the read's subscription after this)."""
        try:
            if self._feed_idle(time.monotonic()):
                async with asyncio.timeout(self._timeout_s):  # a hung registry holds no read up
                    await self.events.unsubscribe()
        except (CallFailed, Disconnected, TimeoutError) as exc:
            # The feed counts itself unsubscribed already: the next read subscribes again.
            log.info("ending the idle accessibility event feed failed: %s", exc)
        finally:
            self._ending_feed = None

    async def focused_element(self, pid: int) -> Element | None:
        """The deepest focusable element with the ``focused`` state, if any.

        It confirms typed text, so it must not rest on the toolkit having reported every change:
        the mirror reads the focused elements from the app again on every read."""
        return deepest_focused((await self.snapshot(pid, max_elements=None)).elements)

    async def read_element(self, element: Element) -> Element:
        """The element as it is now (states, text, value, bounds), to confirm an action's effect."""
        ref = element.ref
        async with self._guard(f"reading element {element.index}", ref=ref):
            app = await self._app(ref.bus_name)
            (node,) = await fetch_nodes(app, [ref])
            if isinstance(node, CallFailed):
                raise node
            if node.has_state(c.STATE_DEFUNCT):
                raise CallFailed(UNKNOWN_OBJECT, "the object is defunct")
            (fresh,) = await describe_many(
                app, [(node, element.depth, element.parent, element.path)], indices=[element.index]
            )
        (on_screen,) = await self._on_screen(app.pid, [fresh])
        return on_screen

    async def text_extents(self, element: Element, spans: list[tuple[int, int]]) -> list[Bounds | None]:
        """Where each ``(start, end)`` character span of the element's text is laid out, in the
        screen coordinates of ``element.bounds`` (Text.GetRangeExtents, placed by the element's own
        extents, both asked in window coordinates); None where the toolkit does not say. Not
        clipped: characters scrolled out of a field lie outside its bounds."""
        if element.bounds is None or not spans:
            return [None] * len(spans)
        path = element.ref.path
        requests = [Request(path, c.COMPONENT, "GetExtents", "u", (c.COORD_TYPE_WINDOW,))]
        requests += [
            Request(path, c.TEXT, "GetRangeExtents", "iiu", (s, e, c.COORD_TYPE_WINDOW)) for s, e in spans
        ]
        async with self._guard("reading text extents", ref=element.ref):
            app = await self._app(element.ref.bus_name)
            replies = await app.call_many(requests)
        own, ranges = replies[0], replies[1:]
        if isinstance(own, CallFailed):
            return [None] * len(spans)
        (ox, oy, _, _), bounds = own[0], element.bounds
        placed_spans: list[Bounds | None] = []
        for reply in ranges:
            if isinstance(reply, CallFailed) or reply[2] <= 0 or reply[3] <= 0:
                placed_spans.append(None)
                continue
            x, y, width, height = reply
            placed_spans.append(Bounds(x=bounds.x + x - ox, y=bounds.y + y - oy, width=width, height=height))
        return placed_spans

    def _copies(self, app: AppConnection) -> PlacedCopies:
        """The copies of the app's elements placed on screen last (for a whole tree's elements)."""
        return self._placed.setdefault(app.bus_name, PlacedCopies())

    async def _on_screen(
        self, pid: int, elements: list[Element], copies: PlacedCopies | None = None
    ) -> list[Element]:
        """``elements`` with their bounds in screen coordinates (see :mod:`deskrig.a11y.placement`),
        the ``copies`` placed last handed out again where still right."""
        if self.placement is None or self.placement.a11y_in_screen_pixels:
            return elements  # nothing to move: no worker thread, no wait for the desktop's lock
        steps = toplevels(elements)
        placement = self.placement
        if not steps:
            return elements
        try:
            shifted = await asyncio.to_thread(placement.a11y_origins, pid)
            popups = pointer_popups(elements) & steps if shifted else set()
            if not popups:
                return placed(elements, toplevel_origins(shifted, steps), copies)
            press, displays = await asyncio.to_thread(lambda: (placement.last_press(), placement.displays()))
        except DeskrigError as exc:
            self._note(f"pid {pid}: element bounds left as the toolkit reports them: {exc.message}")
            return elements
        bus_name = next(e.ref.bus_name for e in elements if e.path and e.path[0] in popups)
        async with self._guard("reading where its popup menus are", pid=pid):
            extents = await toplevel_extents(await self._app(bus_name), popups)
        reported = {step: extents.get(step) for step in popups}
        origins = toplevel_origins(
            shifted, steps, reported, press, displays, open_submenus(elements) & popups
        )
        return placed(elements, origins, copies)

    # ---- actions -----------------------------------------------------------------------------

    async def element_action(self, element: Element | ElementRef, action_name: str = "click") -> str:
        """Perform a named AT-SPI action; returns the toolkit's name for the action performed.

        ``click``, ``press`` and ``activate`` stand in for one another, since toolkits differ. The
        reply comes before the toolkit acts: confirm the effect by polling :meth:`read_element`.
        """
        ref = _ref(element)
        async with self._guard(f"performing {action_name!r}", ref=ref):
            app = await self._app(ref.bus_name)
            (actions,) = await app.call(ref.path, c.ACTION, "GetActions")
            names = [name for name, _description, _keybinding in actions]  # localised
            raw = await app.call_many(
                [Request(ref.path, c.ACTION, "GetName", "i", (i,)) for i in range(len(names))]
            )
            internal = ["" if isinstance(r, CallFailed) else str(r[0]) for r in raw]
            index = _pick_action(list(zip(names, internal, strict=True)), action_name)
            if index is None:
                raise DeskrigError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"the element has no action {action_name!r}"
                    + (f"; it offers: {', '.join(names)}" if names else "; it offers none"),
                    details={"argument": "action", "available": names},
                    remediation="Use one of details.available, or click the element's bounds instead.",
                )
            (done,) = await app.call(ref.path, c.ACTION, "DoAction", "i", [index])
        if not done:
            raise DeskrigError(ErrorCode.INPUT_FAILED, f"the app refused the action {names[index]!r}")
        return str(names[index])

    async def set_text(self, element: Element | ElementRef, text: str) -> str:
        """Replace the element's text via EditableText; returns which method did it."""
        ref = _ref(element)
        async with self._guard("setting text", ref=ref):
            app = await self._app(ref.bus_name)
            (done,) = await app.call(ref.path, c.EDITABLE_TEXT, "SetTextContents", "s", [text])
            if done:
                return "SetTextContents"
            (length,) = await app.call(ref.path, c.PROPERTIES, "Get", "ss", [c.TEXT, "CharacterCount"])
            await app.call(ref.path, c.EDITABLE_TEXT, "DeleteText", "ii", [0, length.value])
            (done,) = await app.call(ref.path, c.EDITABLE_TEXT, "InsertText", "isi", [0, text, len(text)])
        if not done:
            raise DeskrigError(ErrorCode.INPUT_FAILED, "the app refused to change the element's text")
        return "DeleteText+InsertText"

    async def set_value(self, element: Element | ElementRef, value: float) -> None:
        """Set the Value interface's CurrentValue (sliders, spin buttons), within its range."""
        ref = _ref(element)
        async with self._guard("setting a value", ref=ref):
            app = await self._app(ref.bus_name)
            props = await read_properties(app, ref.path, c.VALUE, VALUE_PROPERTIES)
            low, high = props["MinimumValue"], props["MaximumValue"]
            if not low <= value <= high:
                raise invalid_argument(
                    "value", value, f"value {value:g} is outside the element's range {low:g}..{high:g}"
                )
            await app.call(
                ref.path, c.PROPERTIES, "Set", "ssv", [c.VALUE, "CurrentValue", Variant("d", value)]
            )

    # ---- error translation -------------------------------------------------------------------

    def _guard(
        self, doing: str, *, pid: int | None = None, ref: ElementRef | None = None
    ) -> AbstractAsyncContextManager[None]:
        return translate_failures(doing, self._timeout_s, pid=pid, ref=ref)

    async def _daemon(
        self, destination: str, path: str, interface: str, member: str, signature: str = "", body: Any = ()
    ) -> list[Any]:
        return await call(self._a11y_bus, destination, path, interface, member, signature, body)

    def _note(self, message: str) -> None:
        log.info("a11y: %s", message)
        self.diagnostics.append(Diagnostic(component="a11y", message=message))


def _ref(element: Element | ElementRef) -> ElementRef:
    return element.ref if isinstance(element, Element) else element


def _pick_action(names: list[tuple[str, str]], wanted: str) -> int | None:
    """The index of the action called ``wanted`` (by its localised or internal name)."""
    folded = [{shown.casefold(), internal.casefold()} for shown, internal in names]
    wanted = wanted.casefold()
    found = next((i for i, both in enumerate(folded) if wanted in both), None)
    if found is None and wanted in ACTIVATE_ALIASES:
        found = next((i for i, both in enumerate(folded) if both & set(ACTIVATE_ALIASES)), None)
    return found


def _from_fetch(fetched: FetchedTree) -> dict[str, Any]:
    """The fields of a snapshot fetched whole just now."""
    return {
        "app_name": fetched.elements[0].name if fetched.elements else "",
        "truncated": fetched.truncated,
        "elements": fetched.elements,
        "source": "fetch",
        "tree_age_ms": 0.0,
        "newest_event_age_ms": None,
    }


def _from_mirror(tree: MirroredTree, max_elements: int | None, now: float) -> dict[str, Any]:
    """The fields of a snapshot read from the mirror: its first ``max_elements`` elements (in
    depth-first order, so every parent index stays valid) and how old the tree's parts are."""
    elements = tree.elements if max_elements is None else tree.elements[:max_elements]
    return {
        "app_name": tree.elements[0].name if tree.elements else "",
        "truncated": tree.truncated or len(elements) < len(tree.elements),
        "elements": elements,
        "source": "fetch" if tree.refetched else "mirror",
        "tree_age_ms": round((now - tree.fetched_at) * 1000, 1),
        "newest_event_age_ms": (
            None if tree.newest_event_at is None else round((now - tree.newest_event_at) * 1000, 1)
        ),
    }
