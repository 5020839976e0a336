"""Temporarily bind keysyms the keyboard layout lacks to spare keycodes, safely.

The keysyms a call lacks are bound to one block of spare keycodes (two per keycode: plain and
Shift) with a single request; text needing more is split into segments that rebind the block.
Every change makes every client re-read the mapping (and a window manager re-grab its keys), so
a call makes few: per segment one bind and one sentinel, then one restore.

Around the keys, the focused client is kept in step (see ``x11_mapping_watch`` for why and how):
after binding, it must have re-read the mapping before the keys go out; before rebinding or
restoring, it must have handled every key sent.

A client slow to re-read is waited for as long as it takes, up to ``CATCH_UP_TIMEOUT_S``: keys it
translates before it has caught up come out as nothing or as the wrong character, and a client
stalled on a loaded machine re-reads late (Tk stopped for 1.5 s lost every bound character when
the wait was 1 s). A key without keysyms follows every change, so that clients which re-read only
when they next translate a key (Xaw's xedit) re-read at once too. A change not re-read within
``CHANGE_AGAIN_AFTER_S`` is made once more, for a client that missed it (Xlib misses one made while
it loads the map for the first time). A client that has never re-read by the timeout is taken not
to (given a fixed grace from then on); one that has re-read before is hung, and the call fails
(TIMEOUT) rather than type on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from Xlib import X
from Xlib.display import Display
from Xlib.ext import xtest

from deskrig.desktop.x11_keymap import Keymap, Stroke
from deskrig.desktop.x11_mapping_watch import MappingWatch
from deskrig.errors import DeskrigError, ErrorCode

#: How long the focused client may take to re-read a mapping change: a client seen re-reading
#: before is then hung or stopped, and the call fails rather than go on with keys it would
#: translate wrongly; one never seen re-reading is taken not to re-read at all.
CATCH_UP_TIMEOUT_S = 10.0
#: When the focused client has not re-read a change by then, the change is made again: a client can
#: miss one (see ``KeysymBindings._change_and_await``). Tk and GTK re-read 1-15 ms after a change on
#: an idle machine.
CHANGE_AGAIN_AFTER_S = 0.5
#: How long to wait after that read for the client to repaint (it has then handled our keys).
#: Apps that do not repaint on typing cost this much per call that binds keysyms.
REPAINT_TIMEOUT_S = 0.5
#: Without RECORD, or for a client that never re-reads the mapping: time allowed for the client
#: to catch up. Measured: Tk and GTK repaint 10-40 ms after the sentinel on an idle machine.
MAPPING_GRACE_S = 0.1


@dataclass
class ClientSync:
    """Who translates our keys and how we learn they have (kept across calls by X11Input)."""

    target: int | None
    watch: MappingWatch | None
    #: Clients seen re-reading a change of ours.
    reading_clients: set[int] = field(default_factory=set)
    #: Clients never seen re-reading that did not within CATCH_UP_TIMEOUT_S: not waited for.
    deaf_clients: set[int] = field(default_factory=set)
    note: Callable[[str], None] = lambda message: None


class KeysymBindings:
    """One call's temporary bindings. Use as a context manager; the mapping is restored on exit."""

    def __init__(self, display: Display, keymap: Keymap, sync: ClientSync) -> None:
        self._display = display
        self._keymap = keymap
        self._sync = sync
        self._slots = keymap.remap_slots()
        if self._slots.borrowed:
            sync.note("no keycode without keysyms: borrowing one, restored after each use")
        self._block = self._slots.block
        self._bound_rows: list[list[int]] | None = None
        self._keys_unsettled = False
        self.remapped: set[int] = set()

    @property
    def capacity(self) -> int:
        return self._slots.capacity

    def __enter__(self) -> KeysymBindings:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if self._bound_rows is None:
            return
        if exc_type is None and self._keys_unsettled:
            self._settle()
        self._display.change_keyboard_mapping(self._block[0], [self._keymap.row(kc) for kc in self._block])
        self._count_change()
        # A call that failed (TIMEOUT, CANCELLED) skips the sync that ends a call, and python-xlib
        # only sends on a flush: the restore would wait for the next call.
        self._display.sync()

    def segments(self, keysyms: list[int]) -> Iterator[list[int]]:
        """Split into consecutive runs that each need at most ``capacity`` keysyms bound."""
        segment: list[int] = []
        missing: set[int] = set()
        for keysym in keysyms:
            if self._keymap.stroke(keysym) is None and keysym not in missing:
                if len(missing) == self.capacity:
                    yield segment
                    segment, missing = [], set()
                missing.add(keysym)
            segment.append(keysym)
        if segment:
            yield segment

    def bind(self, keysyms: list[int]) -> dict[int, Stroke]:
        """Strokes for every keysym, binding those the layout lacks. Send the keys before the
        next ``bind`` or the exit: both wait for the client to have handled them."""
        strokes = {k: s for k in keysyms if (s := self._keymap.stroke(k)) is not None}
        missing = list(dict.fromkeys(k for k in keysyms if k not in strokes))
        if not missing:
            return strokes
        if len(missing) > self.capacity:
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                f"{len(missing)} keys are missing from the layout; at most {self.capacity} can be bound at once",
                details={"missing": len(missing), "capacity": self.capacity},
            )
        if self._keys_unsettled:
            self._settle()
        rows = []
        for index, keycode in enumerate(self._block):
            pair = missing[2 * index : 2 * index + 2]
            for level, keysym in enumerate(pair):
                strokes[keysym] = Stroke(keycode, shift=level == 1)
            # A lone keysym fills both levels so Shift cannot matter; unused keycodes stay empty.
            rows.append([pair[0], pair[-1]] if pair else [X.NoSymbol, X.NoSymbol])
        self._bound_rows = rows
        # Keys sent before the client has re-read the mapping are translated with its old copy.
        self._change_and_await(self._block[0], rows, set(self._block[: (len(missing) + 1) // 2]))
        self._keys_unsettled = True
        self.remapped.update(missing)
        return strokes

    def _count_change(self) -> int | None:
        watch = self._sync.watch
        return watch.note_sent_change() if watch is not None else None

    def _settle(self) -> None:
        """Return once the focused client has handled every key sent so far: it has read a
        (no-op) change sent after them, then repainted, which toolkits do once idle."""
        self._keys_unsettled = False
        if self._sync.target is None or self._bound_rows is None:  # nobody translates these keys
            return
        sentinel = self._slots.sentinel
        if sentinel is not None:
            first, rows = sentinel, [self._keymap.row(sentinel)]
        else:  # no spare keycode for it: rewrite the block as it is
            first, rows = self._block[0], self._bound_rows
        read = self._change_and_await(first, rows, {first})
        if read is not None and self._sync.watch is not None:
            self._sync.watch.wait_for_draw(read, REPAINT_TIMEOUT_S)

    def _press_sentinel(self) -> None:
        """Press a key without keysyms after a change, for clients that re-read the mapping only
        when they next translate a key."""
        sentinel = self._slots.sentinel
        if sentinel is not None and self._sync.target is not None:
            xtest.fake_input(self._display, X.KeyPress, sentinel)
            xtest.fake_input(self._display, X.KeyRelease, sentinel)

    def _change(self, first: int, rows: list[list[int]]) -> int | None:
        """Bind keycodes ``first`` on to ``rows`` and press the sentinel; the change's ordinal."""
        self._display.change_keyboard_mapping(first, rows)
        self._press_sentinel()
        return self._count_change()

    def _change_and_await(self, first: int, rows: list[list[int]], keycodes: set[int]) -> int | None:
        """Bind keycodes ``first`` on to ``rows`` and wait for the focused client to re-read
        ``keycodes``; the serial of that read."""
        change = self._change(first, rows)
        target, watch = self._sync.target, self._sync.watch
        if target is None:
            return None
        self._display.sync()
        if watch is None or change is None or not watch.alive or target in self._sync.deaf_clients:
            time.sleep(MAPPING_GRACE_S)
            return None
        read = watch.wait_for_read(change, keycodes, CHANGE_AGAIN_AFTER_S)
        if read is None:
            # Xlib asks XKB for map notifications only once its first XkbGetMap is answered, so a
            # change the server makes between the two never reaches the client, and it translates
            # on with the map it got (xedit, whose first key is our sentinel, missed the sentinel
            # change after the typed keys in 12 of 230 calls on a loaded machine). The same change
            # made again reaches it; a client merely slow re-reads once more. A read after either
            # counts.
            self._change(first, rows)
            self._display.sync()
            read = watch.wait_for_read(change, keycodes, CATCH_UP_TIMEOUT_S - CHANGE_AGAIN_AFTER_S)
        if read is not None:
            self._sync.reading_clients.add(target)
            return read
        if target in self._sync.reading_clients:
            raise DeskrigError(
                ErrorCode.TIMEOUT,
                f"the focused app did not re-read the keyboard mapping within {CATCH_UP_TIMEOUT_S:.0f} s "
                "(it is hung or stopped): typing stopped there rather than go on with keys it would "
                "translate with a stale mapping; keys it had not handled yet may be missing from it",
                details={
                    "client": f"{target:#x}",
                    "waited_seconds": CATCH_UP_TIMEOUT_S,
                    "observed": "no GetKeyboardMapping or XkbGetMap from it since the change",
                },
            )
        self._sync.deaf_clients.add(target)
        self._sync.note(
            f"client {target:#x} did not re-read the keyboard mapping within "
            f"{CATCH_UP_TIMEOUT_S:.0f} s; allowing it {MAPPING_GRACE_S * 1000:.0f} ms from now on"
        )
        time.sleep(MAPPING_GRACE_S)
        return None
