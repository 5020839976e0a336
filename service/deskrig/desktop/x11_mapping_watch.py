"""Know when the focused client has caught up with a keyboard-mapping change.

Typing a character the layout lacks means binding its keysym to a spare keycode, pressing it, and
restoring the mapping. A client turns keycodes into keysyms with its own copy of the mapping,
which it re-reads after a change. Two races follow, both seen with Tk and GTK on this machine:

- keys sent right after a binding can be translated with the client's old copy (measured: the
  keycodes of a second or third change in a burst came out empty), so the keys wait until the
  client has re-read the bound keycodes;
- Xlib (Tk, Motif, xterm ...) marks its copy stale when it *reads* a notification off the socket,
  not when it handles it, so a restore that arrives while our keys still sit unhandled in its
  queue changes how they translate. The mapping may only change once the client has handled
  every key we sent.

No core request asks a client how far it has got, but the RECORD extension shows every request
a client makes, so the focused client is followed:

- "has re-read keycodes K": a ``GetKeyboardMapping`` or ``XkbGetMap`` covering K after our change;
- "has handled everything": after our keys, a no-op change of a sentinel keycode; once the client
  has re-read that, it has taken in all our keys, and once it then draws (toolkits repaint when
  their event queue is empty: Tk at idle, GTK in the frame clock after dispatch), it has handled
  them.

Measured with Tk and GTK on an idle machine: the re-read comes 1-15 ms after a change and the
repaint 10-40 ms after the sentinel.
"""

from __future__ import annotations

import logging
import struct
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from Xlib import error as xerror
from Xlib.display import Display
from Xlib.ext import record

from deskrig.desktop.x11_conn import close_display

log = logging.getLogger(__name__)

_CHANGE_KEYBOARD_MAPPING = 100
_GET_KEYBOARD_MAPPING = 101
_XKB_GET_MAP = 8
_XKB_KEYSYMS_MASK = 0x2
#: Core drawing requests: ClearArea .. PutImage, PolyText8 .. ImageText16 (not GetImage, 73).
_CORE_DRAWING = frozenset(range(61, 73)) | frozenset(range(74, 78))
#: Extension drawing requests by extension name: minor opcodes that put pixels on a drawable.
_EXTENSION_DRAWING: dict[str, frozenset[int]] = {
    "RENDER": frozenset({8, 10, 11, 12, 13, 23, 24, 25, 26}),  # Composite*, Tri*, Trapezoids, FillRectangles
    "MIT-SHM": frozenset({3}),  # PutImage
    "Present": frozenset({1}),  # Pixmap
}
_HISTORY = 4096
_ALL_REQUESTS: dict[str, Any] = {
    "core_requests": (1, 127),
    "core_replies": (0, 0),
    "ext_requests": (128, 255, 0, 65535),
    "ext_replies": (0, 0, 0, 0),
    "delivered_events": (0, 0),
    "device_events": (0, 0),
    "errors": (0, 0),
    "client_started": False,
    "client_died": False,
}

Kind = Literal["change", "read", "draw"]


@dataclass(frozen=True)
class _Request:
    serial: int
    client_base: int
    kind: Kind
    first: int = 0
    count: int = 0


class MappingWatch:
    """A RECORD context over our own client and the one being followed, read on a thread."""

    def __init__(self, display_name: str | None, own_client_base: int) -> None:
        self._own_base = own_client_base
        self._control = Display(display_name)
        # (Un)registering a client that has just gone is harmless: log instead of printing.
        self._control.set_error_handler(lambda err, request: log.debug("mapping watch: %s", err))
        self._data = Display(display_name)
        info = self._control.display.info
        self._min_keycode: int = info.min_keycode
        self._keycode_count: int = info.max_keycode - info.min_keycode + 1
        try:
            if not self._control.has_extension("RECORD"):
                raise RuntimeError("the X server has no RECORD extension")
            self._xkb_major = self._major("XKEYBOARD")
            self._drawing: dict[int, frozenset[int]] = {
                major: minors for name, minors in _EXTENSION_DRAWING.items() if (major := self._major(name))
            }
            self._context = self._control.record_create_context(0, [own_client_base], [_ALL_REQUESTS])
            self._control.sync()
        except BaseException:
            self._control.close()
            self._data.close()
            raise
        self._followed: int | None = None
        self._cond = threading.Condition()
        self._requests: deque[_Request] = deque(maxlen=_HISTORY)
        self._serial = 0
        self._sent_changes = 0
        self._seen_changes = 0
        #: Our change ordinal -> its serial in the recording (recent ones only).
        self._change_serials: dict[int, int] = {}
        self._enabled = False
        self._thread = threading.Thread(target=self._run, name="deskrig-mapping-watch", daemon=True)
        self._thread.start()
        with self._cond:
            self._cond.wait_for(lambda: self._enabled or not self._thread.is_alive(), timeout=5)
        if not self._enabled:
            self.close()
            raise RuntimeError("the RECORD context did not start")

    def _major(self, extension: str) -> int:
        reply = self._control.query_extension(extension)
        return int(reply.major_opcode) if reply is not None and reply.present else 0

    # -- recording thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._data.record_enable_context(self._context, self._on_data)
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            log.warning("keyboard mapping watch stopped: %s", exc)
        finally:
            with self._cond:
                self._enabled = False
                self._cond.notify_all()

    def _on_data(self, reply: Any) -> None:
        if reply.category == record.StartOfData:
            with self._cond:
                self._enabled = True
                self._cond.notify_all()
            return
        if reply.category != record.FromClient:
            return
        order = "<" if (sys.byteorder == "little") != bool(reply.client_swapped) else ">"
        own = reply.id_base == self._own_base
        found = list(self._classify(bytes(reply.data), order, own))
        if not found:
            return
        with self._cond:
            for kind, first, count in found:
                self._serial += 1
                self._requests.append(_Request(self._serial, reply.id_base, kind, first, count))
                if kind == "change":
                    self._seen_changes += 1
                    self._change_serials[self._seen_changes] = self._serial
                    self._change_serials.pop(self._seen_changes - _HISTORY, None)
            self._cond.notify_all()

    def _classify(self, data: bytes, order: str, own: bool) -> list[tuple[Kind, int, int]]:
        """Split RECORD data into requests and keep the ones that matter here."""
        found: list[tuple[Kind, int, int]] = []
        offset = 0
        while offset + 4 <= len(data):
            opcode, minor = data[offset], data[offset + 1]
            (length,) = struct.unpack_from(order + "H", data, offset + 2)
            if length == 0 and offset + 8 <= len(data):  # BIG-REQUESTS: the real length follows
                (length,) = struct.unpack_from(order + "I", data, offset + 4)
            body = data[offset : offset + 4 * length]
            offset += max(4 * length, 4)
            if own:
                if opcode == _CHANGE_KEYBOARD_MAPPING and len(body) >= 5:
                    found.append(("change", body[4], minor))
            elif opcode == _GET_KEYBOARD_MAPPING and len(body) >= 6:
                found.append(("read", body[4], body[5]))
            elif opcode == self._xkb_major and minor == _XKB_GET_MAP and len(body) >= 14:
                full, partial = struct.unpack_from(order + "HH", body, 6)
                if full & _XKB_KEYSYMS_MASK:
                    found.append(("read", self._min_keycode, self._keycode_count))
                elif partial & _XKB_KEYSYMS_MASK:
                    found.append(("read", body[12], body[13]))
            elif opcode in _CORE_DRAWING or minor in self._drawing.get(opcode, ()):
                found.append(("draw", 0, 0))
        return found

    # -- caller side --------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def follow(self, client_base: int) -> None:
        """Record ``client_base``'s requests from now on (instead of the previous client's)."""
        if client_base == self._followed:
            return
        if self._followed is not None:
            self._control.record_unregister_clients(self._context, [self._followed])
        self._control.record_register_clients(self._context, 0, [client_base], [_ALL_REQUESTS])
        self._control.sync()
        self._followed = client_base

    def note_sent_change(self) -> int:
        """Count a ChangeKeyboardMapping the owner just sent; returns its ordinal for wait_for_read."""
        self._sent_changes += 1
        return self._sent_changes

    def wait_for_read(self, change: int, keycodes: set[int], timeout: float) -> int | None:
        """Wait until the followed client has read, after our change number ``change``, keysyms
        covering every one of ``keycodes``. Returns the serial of the read that completed it."""
        client = self._followed

        def covered() -> int | None:
            after = self._change_serials.get(change)
            if after is None:
                return None
            missing = set(keycodes)
            for req in self._requests:
                if req.serial > after and req.client_base == client and req.kind == "read":
                    missing -= set(range(req.first, req.first + req.count))
                    if not missing:
                        return req.serial
            return None

        with self._cond:
            result: int | None = self._wait(covered, time.monotonic() + timeout)
            return result

    def wait_for_draw(self, after: int, timeout: float) -> bool:
        """Wait until the followed client draws something after recorded request ``after``."""
        client = self._followed

        def drawn() -> bool:
            for req in reversed(self._requests):
                if req.serial <= after:
                    return False
                if req.client_base == client and req.kind == "draw":
                    return True
            return False

        with self._cond:
            return bool(self._wait(drawn, time.monotonic() + timeout))

    def _wait(self, check: Any, deadline: float) -> Any:
        """Under the lock: wait until ``check()`` is truthy or the deadline passes."""
        while not (result := check()):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._thread.is_alive():
                return None
            self._cond.wait(remaining)
        return result

    def close(self) -> None:
        try:
            self._control.record_disable_context(self._context)
            self._control.sync()
            self._thread.join(timeout=2)
            self._control.record_free_context(self._context)
            self._control.sync()
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            log.debug("closing the mapping watch: %s", exc)
        finally:
            close_display(self._control, "mapping watch control")
            close_display(self._data, "mapping watch data")
