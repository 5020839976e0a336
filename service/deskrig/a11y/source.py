"""The accessibility source behind the tools: one interface, one implementation per platform.

Like python-mss's backends: :class:`AccessibilitySource` is what every tool, the recorder and the
PII tree detector use; :func:`deskrig.a11y.access.open_access` picks the implementation for the
desktop at run time and imports only that platform's libraries:

- Linux (X11, Sway): AT-SPI over D-Bus with its live mirror (:class:`deskrig.a11y.atspi.AccessibilityClient`);
- macOS: the AX API (:mod:`deskrig.a11y.macos_ax` maps what ``deskrig.desktop.macos_ax_native`` reads);
- Windows: UI Automation (:mod:`deskrig.a11y.windows_uia` maps what ``windows_uia_native`` reads).

macOS and Windows share :class:`NativeTreeSource`: a blocking :class:`NativeReader` reads an app's
tree as plain nested dicts and performs an operation (AXPress, Invoke, a value write) on an element;
a :class:`NativePlatform` maps those dicts to the element model (AT-SPI's role, state, action and
interface names, so queries and tools read the same everywhere) and says which operation an action
or a set_value is. :class:`deskrig.a11y.scripted.ScriptedReader` is the reader that ships with the
interface: recorded trees, for testing the tools on any OS.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from deskrig.a11y.snapshots import SnapshotStore
from deskrig.a11y.tree import Element, ElementQuery, ElementRef, Snapshot
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

T = TypeVar("T")

#: One element as a native reader hands it over, its children under ``"children"``.
NativeNode = Mapping[str, Any]
#: Action names that mean "activate this" across toolkits and platforms (GTK "click", Qt "Press").
ACTIVATE_ALIASES = ("click", "press", "activate")
#: How long a native accessibility call may take (as AT-SPI's calls on Linux).
NATIVE_TIMEOUT_S = 10.0
#: Most elements a native snapshot maps when the caller sets no limit (a runaway table).
NATIVE_MAX_ELEMENTS = 5000


class AccessibilitySource(Protocol):
    """An app's accessibility tree, and actions on its elements, on one platform."""

    #: The platform's accessibility API, as evidence names it: "AT-SPI", "the AX API" ...
    name: str
    #: Where snapshots are kept for ``{snapshot_id, index}`` targets (the owner's store).
    snapshots: SnapshotStore

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
        """The app's tree, stored in :attr:`snapshots` (unless not ``store``: a reader that names no
        element by it afterwards, the recorder, so it never evicts a client's); with ``query``, only
        the matches."""
        ...

    async def current_elements(self, pid: int) -> list[Element]:
        """The app's elements now, stored as no snapshot (the PII masker's read)."""
        ...

    def events_version(self) -> tuple[int, int] | None:
        """Changes whenever a tree may have changed; None when the source cannot tell."""
        ...

    async def focused_element(self, pid: int) -> Element | None:
        """The element with the keyboard focus, if any."""
        ...

    async def read_element(self, element: Element) -> Element:
        """The element as it is now; ELEMENT_NOT_FOUND when it is gone."""
        ...

    async def text_extents(self, element: Element, spans: list[tuple[int, int]]) -> list[Bounds | None]:
        """Screen boxes of character spans of the element's text; None where unknown."""
        ...

    async def element_action(self, element: Element, action_name: str = "click") -> str:
        """Perform the element's action; the name of the action performed."""
        ...

    async def set_text(self, element: Element, text: str) -> str:
        """Replace the element's text (``EditableText`` interface); how it was done."""
        ...

    async def set_value(self, element: Element, value: float) -> None:
        """Set the element's number within its range (``Value`` interface)."""
        ...

    async def close(self) -> None: ...


def deepest_focused(elements: list[Element]) -> Element | None:
    """The element that takes keyboard input: the deepest focused one, preferring focusable ones
    (Qt also marks a focused scroll area's viewport, a filler, as focused)."""
    focused = [e for e in elements if e.has_state("focused")]
    focused = [e for e in focused if e.has_state("focusable")] or focused
    return max(focused, key=lambda e: e.depth) if focused else None


def check_limits(max_depth: int | None, max_elements: int | None) -> None:
    """INVALID_ARGUMENT for a negative depth or an element limit under one."""
    if max_depth is not None and max_depth < 0:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            "max_depth must be 0 or more",
            details={"argument": "max_depth", "value": max_depth},
        )
    if max_elements is not None and max_elements < 1:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            "max_elements must be at least 1",
            details={"argument": "max_elements", "value": max_elements},
        )


class NativeReader(Protocol):
    """The blocking native half of a platform's accessibility (one thread calls it)."""

    def tree(self, pid: int) -> NativeNode:
        """The application ``pid``'s tree; APP_NOT_RUNNING, A11Y_UNAVAILABLE or PERMISSION_DENIED."""
        ...

    def perform(
        self, pid: int, address: Sequence[int], operation: str, value: str | float | None = None
    ) -> None:
        """The platform's ``operation`` (``NativePlatform.operation`` / ``value_operation`` chose
        it) on the live element at ``address`` (``NativePlatform.address``); ELEMENT_NOT_FOUND
        when it is gone."""
        ...


class NativePlatform(Protocol):
    """A platform's mapping of its readers' dicts to the element model (pure: tested anywhere)."""

    #: The accessibility API, as evidence names it (the source's :attr:`AccessibilitySource.name`).
    name: str
    #: An element's ``ref.bus_name`` is ``f"{prefix}:{pid}"``.
    prefix: str
    #: True when a reference is the element's position (AX: child indices), which another
    #: element takes once the tree changes; False for an identity (UIA's runtime id).
    positional_refs: bool

    def elements(
        self, root: NativeNode, pid: int, *, max_depth: int | None, max_elements: int | None
    ) -> tuple[list[Element], bool]:
        """The tree under ``root`` as depth-first elements, and whether the limits cut it."""
        ...

    def address(self, ref: ElementRef) -> list[int]:
        """Where the reader finds the live element again (AX: child indices from the application;
        UIA: the runtime id)."""
        ...

    def operation(self, element: Element, action: str) -> str:
        """The native operation performing deskrig's ``action``; INVALID_ARGUMENT when none does."""
        ...

    def value_operation(self, element: Element, value: str | float) -> tuple[str, str | float]:
        """The native operation and value writing ``value``; INVALID_ARGUMENT, nothing written,
        when the element cannot take it."""
        ...


class NativeTreeSource:
    """:class:`AccessibilitySource` over a :class:`NativeReader` and its :class:`NativePlatform`.

    No event feed: every read asks the app for its whole tree (``source="fetch"``). The reader is
    made and called on one thread of its own, as COM (UI Automation) wants its objects used.
    """

    def __init__(
        self,
        platform: NativePlatform,
        open_reader: Callable[[], NativeReader],
        timeout_s: float = NATIVE_TIMEOUT_S,
    ) -> None:
        self.platform = platform
        self.name = platform.name
        self.snapshots = SnapshotStore()
        self._open_reader = open_reader
        self._reader: NativeReader | None = None
        self._timeout_s = timeout_s
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"a11y-{platform.prefix}")

    async def _run(self, fn: Callable[[NativeReader], T]) -> T:
        """``fn`` on the reader's thread, within the timeout: a hung app is A11Y_UNAVAILABLE, as on
        Linux (the call it hangs in keeps the thread until the platform's own timeout ends it)."""

        def on_thread() -> T:
            if self._reader is None:
                self._reader = self._open_reader()
            return fn(self._reader)

        try:
            async with asyncio.timeout(self._timeout_s):
                return await asyncio.get_running_loop().run_in_executor(self._thread, on_thread)
        except TimeoutError as exc:
            raise DeskrigError(
                ErrorCode.A11Y_UNAVAILABLE,
                f"the app did not answer the accessibility request within {self._timeout_s:g} s "
                "(it may be busy or hung)",
                remediation="Retry once the app is idle; use coordinates from a screenshot meanwhile.",
            ) from exc

    async def _elements(
        self, pid: int, max_depth: int | None, max_elements: int | None
    ) -> tuple[list[Element], bool]:
        root = await self._run(lambda reader: reader.tree(pid))
        return self.platform.elements(root, pid, max_depth=max_depth, max_elements=max_elements)

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
        """``include_offscreen_items`` and ``refresh`` change nothing: every item is read, every time."""
        check_limits(max_depth, max_elements)
        started = time.perf_counter()
        elements, truncated = await self._elements(pid, max_depth, max_elements or NATIVE_MAX_ELEMENTS)
        snapshot = Snapshot(
            snapshot_id=uuid.uuid4().hex[:12],
            pid=pid,
            app_name=elements[0].name if elements else "",
            bus_name=f"{self.platform.prefix}:{pid}",
            created_at=datetime.now(UTC),
            fetch_ms=round((time.perf_counter() - started) * 1000, 2),
            source="fetch",
            truncated=truncated,
            elements=elements,
        )
        if store:
            self.snapshots.add(snapshot)
        return snapshot.matching(query) if query is not None else snapshot

    async def current_elements(self, pid: int) -> list[Element]:
        elements, _ = await self._elements(pid, None, NATIVE_MAX_ELEMENTS)
        return elements

    def events_version(self) -> tuple[int, int] | None:
        return None

    async def focused_element(self, pid: int) -> Element | None:
        return deepest_focused(await self.current_elements(pid))

    async def read_element(self, element: Element) -> Element:
        """Read the app's tree again and find the element: by its reference where that is still
        the same element (the same role; for a positional reference, the same path too), else by
        its path (role, name and rank among same-named siblings at every level, as on Linux). It
        keeps its index, parent, depth and path (those of the snapshot it came from) and takes
        its reference now, so an action reaches it where it is."""
        current = await self.current_elements(_pid_of(element.ref))

        def same(candidate: Element) -> bool:
            return candidate.role == element.role and (
                candidate.path == element.path or not self.platform.positional_refs
            )

        fresh = next((e for e in current if e.ref == element.ref and same(e)), None)
        if fresh is None:
            fresh = next((e for e in current if e.path == element.path and e.role == element.role), None)
        if fresh is None:
            raise DeskrigError(
                ErrorCode.ELEMENT_NOT_FOUND,
                f"element {element.index} ({element.role} {element.name!r}) no longer exists in the app "
                "(stale: the UI changed since the snapshot was taken)",
                details={"element": element.ref._asdict(), "reason": "stale"},
                remediation="Call get_app_state again.",
            )
        return fresh.model_copy(
            update={
                "index": element.index,
                "parent": element.parent,
                "depth": element.depth,
                "path": element.path,
            }
        )

    async def text_extents(self, element: Element, spans: list[tuple[int, int]]) -> list[Bounds | None]:
        return [None] * len(spans)  # AX and UIA text ranges are not read (yet): the whole element is masked

    async def element_action(self, element: Element, action_name: str = "click") -> str:
        operation = self.platform.operation(element, action_name)
        await self._perform(element, operation, None)
        return operation

    async def set_text(self, element: Element, text: str) -> str:
        operation, value = self.platform.value_operation(element, text)
        await self._perform(element, operation, value)
        return operation

    async def set_value(self, element: Element, value: float) -> None:
        operation, number = self.platform.value_operation(element, value)
        await self._perform(element, operation, number)

    async def _perform(self, element: Element, operation: str, value: str | float | None) -> None:
        pid, address = _pid_of(element.ref), self.platform.address(element.ref)
        await self._run(lambda reader: reader.perform(pid, address, operation, value))

    async def close(self) -> None:
        self._thread.shutdown(wait=False)


def _pid_of(ref: ElementRef) -> int:
    return int(ref.bus_name.partition(":")[2])
