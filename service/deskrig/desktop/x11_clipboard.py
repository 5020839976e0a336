"""The X11 clipboard and primary selection, in-process with python-xlib, as ICCCM describes them.

Owning (set_clipboard): a thread with a connection and an unmapped window of its own owns the
selections it was given and answers other clients' conversion requests (``TARGETS``,
``TIMESTAMP`` and each offered type) for as long as it owns them, well after the call returned;
another client taking a selection (``SelectionClear``) ends that offer. Data larger than one X
request goes by ``INCR``: the property announces the size, then one chunk per deletion of the
property by the requestor, ending with an empty chunk.

Reading (get_clipboard): a second connection, used in the caller's thread, asks the owner to
convert the selection into a property of its own window and reads it back, following ``INCR``.
Two connections, so a read of the selection this process owns is answered like anyone else's.
"""

from __future__ import annotations

import logging
import os
import queue
import select
import threading
import time
from dataclasses import dataclass
from typing import Any

from Xlib import X, Xatom
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.protocol import event as xevent

from deskrig.desktop.clipboard import Selection
from deskrig.desktop.input_limits import CLIPBOARD_TIMEOUT_S, MAX_CLIPBOARD_BYTES
from deskrig.desktop.x11_conn import close_display, open_display
from deskrig.errors import DeskrigError, ErrorCode

log = logging.getLogger(__name__)

#: Targets about the selection rather than of its content: not listed as available types.
_META_TARGETS = frozenset(
    {"TARGETS", "TIMESTAMP", "MULTIPLE", "SAVE_TARGETS", "DELETE", "INSERT_SELECTION", "INSERT_PROPERTY"}
)
_SELECTION_ATOMS: dict[Selection, str] = {"clipboard": "CLIPBOARD", "primary": "PRIMARY"}
#: The reader's property that owners write conversions into.
_PROPERTY = "DESKRIG_SELECTION"
#: get_property's length argument is in 32-bit units: enough for any property we accept.
_LONG_LENGTH = MAX_CLIPBOARD_BYTES // 4 + 1


def _hidden_window(display: Display) -> Any:
    root = display.screen().root
    return root.create_window(
        -10, -10, 1, 1, 0, X.CopyFromParent, X.InputOnly, X.CopyFromParent, event_mask=X.PropertyChangeMask
    )


def _next_event(display: Display, deadline: float) -> Any | None:
    """The next event, or None once ``deadline`` (monotonic) has passed."""
    while not display.pending_events():
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        select.select([display.fileno()], [], [], left)
    return display.next_event()


def _clipboard_failed(action: str, exc: Exception) -> DeskrigError:
    return DeskrigError(ErrorCode.INPUT_FAILED, f"clipboard {action}: {exc}", details={"action": action})


@dataclass
class _Offer:
    data: bytes
    types: list[int]
    timestamp: int


@dataclass
class _Transfer:
    """An INCR transfer in progress to one requestor's property."""

    requestor: Any
    property: int
    target: int
    data: bytes
    offset: int = 0


class SelectionOwner:
    """The thread that owns selections and serves them. All X calls happen on that thread."""

    def __init__(self, display_name: str | None) -> None:
        self._display = open_display(display_name, " for the clipboard")
        self._display.set_error_handler(self._x_error)
        self._window = _hidden_window(self._display)
        self._atom = self._display.intern_atom
        info = self._display.display.info
        #: The largest chunk one ChangeProperty request carries (the header takes 24 bytes).
        self._chunk = min(256 * 1024, info.max_request_length * 4 - 1024)
        self._offers: dict[int, _Offer] = {}
        self._transfers: dict[tuple[int, int], _Transfer] = {}
        self._commands: queue.Queue[tuple[Selection, bytes, list[str], queue.Queue[Exception | None]]] = (
            queue.Queue()
        )
        self._wake_read, self._wake_write = os.pipe()
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name="deskrig-x11-selections", daemon=True)
        self._thread.start()

    def offer(self, selection: Selection, data: bytes, types: list[str]) -> None:
        """Own ``selection`` with ``data`` (blocking until the X server says we own it)."""
        answer: queue.Queue[Exception | None] = queue.Queue()
        self._commands.put((selection, data, types, answer))
        os.write(self._wake_write, b"!")
        try:
            failure = answer.get(timeout=CLIPBOARD_TIMEOUT_S)
        except queue.Empty:
            raise DeskrigError(
                ErrorCode.TIMEOUT,
                f"taking the {selection} selection did not finish in {CLIPBOARD_TIMEOUT_S:g} s",
            ) from None
        if failure is not None:
            raise failure

    def close(self) -> None:
        self._closing = True
        os.write(self._wake_write, b"!")
        self._thread.join(timeout=5)
        os.close(self._wake_read)
        os.close(self._wake_write)

    # -- the serving thread ---------------------------------------------------------------------------

    def _serve(self) -> None:
        try:
            while not self._closing:
                self._take_commands()
                while self._display.pending_events():
                    self._handle(self._display.next_event())
                self._display.flush()
                ready, _, _ = select.select([self._display.fileno(), self._wake_read], [], [], 1.0)
                if self._wake_read in ready:
                    os.read(self._wake_read, 64)
        except (xerror.ConnectionClosedError, OSError) as exc:
            log.warning("the clipboard owner lost its X connection: %s", exc)
        finally:
            self._fail_commands()
            close_display(self._display, "clipboard owner")

    def _take_commands(self) -> None:
        while True:
            try:
                selection, data, types, answer = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                self._own(selection, data, types)
                answer.put(None)
            except DeskrigError as exc:
                answer.put(exc)
            except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
                answer.put(_clipboard_failed("set", exc))
                raise

    def _fail_commands(self) -> None:
        while True:
            try:
                *_, answer = self._commands.get_nowait()
            except queue.Empty:
                return
            answer.put(DeskrigError(ErrorCode.INPUT_FAILED, "the clipboard connection is closed"))

    def _own(self, selection: Selection, data: bytes, types: list[str]) -> None:
        atom = self._atom(_SELECTION_ATOMS[selection])
        timestamp = self._server_time()
        self._window.set_selection_owner(atom, timestamp)
        owner = self._display.get_selection_owner(atom)
        if getattr(owner, "id", owner) != self._window.id:
            raise DeskrigError(
                ErrorCode.INPUT_FAILED, f"the X server did not give us the {selection} selection"
            )
        self._offers[atom] = _Offer(data, [self._atom(t) for t in types], timestamp)

    def _server_time(self) -> int:
        """A real server timestamp (ICCCM forbids CurrentTime for SetSelectionOwner): the time of a
        zero-length append to a property of our window, handling other events meanwhile."""
        stamp = self._atom("DESKRIG_TIMESTAMP")
        self._window.change_property(stamp, Xatom.STRING, 8, b"", mode=X.PropModeAppend)
        deadline = time.monotonic() + CLIPBOARD_TIMEOUT_S
        while (event := _next_event(self._display, deadline)) is not None:
            if event.type == X.PropertyNotify and event.window.id == self._window.id and event.atom == stamp:
                return int(event.time)
            self._handle(event)
        raise DeskrigError(ErrorCode.TIMEOUT, "the X server sent no timestamp for taking the selection")

    def _handle(self, event: Any) -> None:
        if event.type == X.SelectionRequest:
            self._answer(event)
        elif event.type == X.SelectionClear:
            offer = self._offers.get(event.atom)
            if offer is not None and event.time >= offer.timestamp:
                del self._offers[event.atom]
        elif event.type == X.PropertyNotify and event.state == X.PropertyDelete:
            transfer = self._transfers.get((event.window.id, event.atom))
            if transfer is not None:
                self._next_chunk(transfer)

    def _answer(self, request: Any) -> None:
        offer = self._offers.get(request.selection)
        prop = request.property if request.property != X.NONE else request.target  # pre-ICCCM clients
        requestor, target = request.requestor, request.target
        answered = offer is not None
        if offer is None:
            pass
        elif target == self._atom("TARGETS"):
            targets = [self._atom("TARGETS"), self._atom("TIMESTAMP"), *offer.types]
            requestor.change_property(prop, Xatom.ATOM, 32, targets)
        elif target == self._atom("TIMESTAMP"):
            requestor.change_property(prop, Xatom.INTEGER, 32, [offer.timestamp])
        elif target in offer.types and len(offer.data) > self._chunk:
            requestor.change_attributes(event_mask=X.PropertyChangeMask)
            requestor.change_property(prop, self._atom("INCR"), 32, [len(offer.data)])
            self._transfers[(requestor.id, prop)] = _Transfer(requestor, prop, target, offer.data)
        elif target in offer.types:
            requestor.change_property(prop, target, 8, offer.data)
        else:
            answered = False
        notify = xevent.SelectionNotify(
            time=request.time,
            requestor=requestor,
            selection=request.selection,
            target=target,
            property=prop if answered else X.NONE,
        )
        requestor.send_event(notify)

    def _next_chunk(self, transfer: _Transfer) -> None:
        chunk = transfer.data[transfer.offset : transfer.offset + self._chunk]
        transfer.requestor.change_property(transfer.property, transfer.target, 8, chunk)
        transfer.offset += len(chunk)
        if not chunk:  # the empty chunk ends the transfer
            del self._transfers[(transfer.requestor.id, transfer.property)]
            transfer.requestor.change_attributes(event_mask=X.NoEventMask)

    def _x_error(self, error: xerror.XError, request: object) -> None:
        """A requestor that went away mid-transfer (BadWindow): forget its transfers."""
        log.debug("clipboard owner: X error %s", error)
        gone = getattr(error, "resource_id", None)
        for key in [k for k in self._transfers if k[0] == gone]:
            del self._transfers[key]


class SelectionReader:
    """Reads selections through conversion requests, on its own connection. Not thread-safe."""

    def __init__(self, display_name: str | None) -> None:
        self._display = open_display(display_name, " for the clipboard")
        self._window = _hidden_window(self._display)
        self._property = self._display.intern_atom(_PROPERTY)
        self._names: dict[int, str] = {}

    def types(self, selection: Selection) -> list[str]:
        atom = self._display.intern_atom(_SELECTION_ATOMS[selection])
        if self._display.get_selection_owner(atom) == X.NONE:
            return []
        converted = self._convert(selection, "TARGETS")
        if converted is None:
            return []
        names = [self._name(int(a)) for a in converted[1]]
        return [n for n in dict.fromkeys(names) if n and n not in _META_TARGETS]

    def fetch(self, selection: Selection, mime: str) -> bytes:
        converted = self._convert(selection, mime)
        if converted is None:
            raise DeskrigError(
                ErrorCode.UNSUPPORTED_FORMAT,
                f"the {selection} selection's owner refused to give it as {mime}",
                details={"mime": mime},
                remediation="Call get_clipboard again: the owner may have changed.",
            )
        value = converted[1]
        return value if isinstance(value, bytes) else bytes(value)

    def _name(self, atom: int) -> str:
        if atom not in self._names:
            try:
                self._names[atom] = self._display.get_atom_name(atom)
            except xerror.XError:
                self._names[atom] = ""
        return self._names[atom]

    def _convert(self, selection: Selection, target: str) -> tuple[int, Any] | None:
        """(type, value) of the selection converted to ``target``; None when the owner refuses."""
        try:
            return self._converted(selection, target)
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            raise _clipboard_failed("get", exc) from exc

    def _converted(self, selection: Selection, target: str) -> tuple[int, Any] | None:
        deadline = time.monotonic() + CLIPBOARD_TIMEOUT_S
        self._window.delete_property(self._property)
        self._window.convert_selection(
            self._display.intern_atom(_SELECTION_ATOMS[selection]),
            self._display.intern_atom(target),
            self._property,
            X.CurrentTime,
        )
        self._display.flush()
        notify = self._wait(
            deadline, lambda e: e.type == X.SelectionNotify, f"the {selection} owner to answer"
        )
        if notify.property == X.NONE:
            return None
        reply = self._window.get_property(self._property, X.AnyPropertyType, 0, _LONG_LENGTH, True)
        if reply is None:
            return None
        if reply.property_type != self._display.intern_atom("INCR"):
            return reply.property_type, reply.value
        return reply.property_type, self._incremental(deadline, selection)

    def _incremental(self, deadline: float, selection: Selection) -> bytes:
        """Chunks of an INCR transfer: each arrives as a new value of our property, which we delete
        to ask for the next, until an empty one. Each chunk moves the deadline on."""
        chunks: list[bytes] = []
        size = 0
        while True:
            self._wait(
                deadline,
                lambda e: (
                    e.type == X.PropertyNotify and e.state == X.PropertyNewValue and e.atom == self._property
                ),
                f"the next chunk of the {selection} selection",
            )
            reply = self._window.get_property(self._property, X.AnyPropertyType, 0, _LONG_LENGTH, True)
            chunk = bytes(reply.value) if reply is not None else b""
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_CLIPBOARD_BYTES:
                raise DeskrigError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"the {selection} selection holds over {MAX_CLIPBOARD_BYTES} bytes",
                    details={"max_bytes": MAX_CLIPBOARD_BYTES},
                )
            chunks.append(chunk)
            deadline = time.monotonic() + CLIPBOARD_TIMEOUT_S

    def _wait(self, deadline: float, wanted: Any, what: str) -> Any:
        while (event := _next_event(self._display, deadline)) is not None:
            if wanted(event):
                return event
        raise DeskrigError(
            ErrorCode.TIMEOUT,
            f"gave up waiting for {what} after {CLIPBOARD_TIMEOUT_S:g} s",
            remediation="The app owning the selection may be hung; copy again, or retry.",
        )

    def close(self) -> None:
        close_display(self._display, "clipboard reader")


class X11Selections:
    """The X11 :class:`~deskrig.desktop.clipboard.SelectionStore`: a reader connected on the first
    get, and an owner thread started on the first set (a server that never touches the clipboard
    opens neither: its start, up to the first screenshot, is a connection shorter)."""

    def __init__(self, display_name: str | None) -> None:
        self._display_name = display_name
        self._reader: SelectionReader | None = None
        self._owner: SelectionOwner | None = None

    def _reading(self) -> SelectionReader:
        if self._reader is None:
            self._reader = SelectionReader(self._display_name)
        return self._reader

    def types(self, selection: Selection) -> list[str]:
        return self._reading().types(selection)

    def fetch(self, selection: Selection, mime: str) -> bytes:
        return self._reading().fetch(selection, mime)

    def offer(self, selection: Selection, data: bytes, types: list[str]) -> None:
        if self._owner is None:
            self._owner = SelectionOwner(self._display_name)
        self._owner.offer(selection, data, types)

    def close(self) -> None:
        try:
            if self._owner is not None:
                self._owner.close()
        finally:
            if self._reader is not None:
                self._reader.close()
