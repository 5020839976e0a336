"""Pointer and keyboard input on X11 through XTEST (python-xlib), with its own connection: the
pointer is ``x11_pointer``'s, the keyboard is here; ``x11_xtest`` holds what they share.

Typing any Unicode text whatever the layout: a character whose keysym is on level 1 or 2 of some
keycode is typed with that key (plus Shift for level 2). The others are bound, a few at a time,
to spare keycodes (keycodes with no keysyms), typed, and the mapping is restored afterwards. A
client reads keysyms through its own copy of the mapping, so before re-binding or restoring we
wait until the focused client has caught up; ``x11_mapping_watch`` explains how that is observed
without fixed sleeps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from Xlib import XK, X
from Xlib import error as xerror

from deskrig.desktop.base import InputJob
from deskrig.desktop.input_limits import TYPE_CHUNK, check_text, invalid
from deskrig.desktop.keys import parse_combo, parse_hotkey
from deskrig.desktop.x11_binding import MAPPING_GRACE_S, ClientSync, KeysymBindings
from deskrig.desktop.x11_keymap import keysym_for_char, keysym_for_key
from deskrig.desktop.x11_mapping_watch import MappingWatch
from deskrig.desktop.x11_pace import AppPacer
from deskrig.desktop.x11_pointer import X11Pointer
from deskrig.model import TypeReport

log = logging.getLogger(__name__)


class X11Input(X11Pointer):
    """XTEST pointer and keyboard input on one X display. Not thread-safe: the Desktop facade
    serialises calls."""

    def __init__(self, display: str | None = None) -> None:
        super().__init__(display)
        self._watch: MappingWatch | None = None
        self._watch_unavailable = False
        self._pacer: AppPacer | None = None
        self._pacer_unavailable = False
        self._sync = ClientSync(target=None, watch=None, note=self._note)

    # -- keys -----------------------------------------------------------------------------------

    def press_key(self, key: str, modifiers: Sequence[str] = ()) -> None:
        """One key ("Return", "F5", "a") or combination ("ctrl+s"), plus extra held ``modifiers``."""
        self._chord(parse_combo(key, list(modifiers)).keys)

    def hotkey(self, keys: Sequence[str]) -> None:
        """Two or more keys: pressed in order, released in reverse."""
        self._chord(parse_hotkey(list(keys)))

    def _chord(self, names: list[str]) -> None:
        keysyms = [keysym_for_key(name) for name in names]
        with self._delivering("key press"):
            self._refresh_keymap()
            shift = self._shift_keycode()
            with self._bindings() as bindings:
                strokes = bindings.bind(keysyms)
                chord: list[int] = []
                for keysym in keysyms:
                    stroke = strokes[keysym]
                    if stroke.shift:
                        chord.append(shift)
                    chord.append(stroke.keycode)
                with self._holding(chord):
                    pass

    def key_down(self, key: str) -> None:
        """Press a key of the layout and leave it down (a character needing Shift is refused:
        hold shift and its key instead, as a person would)."""
        with self._delivering("key_down"):
            self._refresh_keymap()
            keycode = self._plain_keycode(key)
            self._key(keycode, True)
        self._held_keycodes[key] = keycode

    def key_up(self, key: str) -> None:
        keycode = self._held_keycodes.get(key)
        if keycode is None:
            raise invalid(f"key {key} is not held down", key=key)
        with self._delivering("key_up"):
            self._key(keycode, False)
        del self._held_keycodes[key]

    def _plain_keycode(self, key: str) -> int:
        stroke = self._keymap.stroke(keysym_for_key(key))
        if stroke is None or stroke.shift:
            raise invalid(
                f"key {key} is not a key of the keyboard layout"
                + (" (it is the shifted level of one)" if stroke is not None else ""),
                key=key,
                hint="hold shift and the unshifted key, or type it with type_text",
            )
        return stroke.keycode

    def _shift_keycode(self) -> int:
        return self._modifier_keycodes(["Shift_L"])[0]

    def type_text(self, text: str, delay_ms: int = 0, job: InputJob | None = None) -> TypeReport:
        """Type ``text`` exactly, whatever the layout (``\\n`` is Return, ``\\t`` is Tab).

        Keys go out in chunks, each waited for until the focused app has read it (see
        ``x11_pace``). With a ``job``, stops after the chunk during which it was stopped (raising
        CANCELLED, with every key released and the mapping restored) and counts the characters
        typed in it.
        """
        check_text(text, delay_ms)
        text = text.replace("\r\n", "\n")
        keysyms = [keysym_for_char(ch) for ch in text]
        with self._delivering("type_text"):
            self._refresh_keymap()
            shift = self._shift_keycode()
            with self._neutral_modifiers(), self._bindings() as bindings:
                typed = 0
                pace = self._pace_target()
                for segment in bindings.segments(keysyms):
                    strokes = bindings.bind(segment)
                    for keysym in segment:
                        stroke = strokes[keysym]
                        with self._holding([shift] if stroke.shift else []):
                            self._key(stroke.keycode, True)
                            self._key(stroke.keycode, False)
                        typed += 1
                        if delay_ms:
                            self._display.flush()
                            time.sleep(delay_ms / 1000)
                        if typed % TYPE_CHUNK == 0 or delay_ms:
                            pace = self._paced(job, typed, len(keysyms), pace)
        return TypeReport(chars=len(text), remapped_keysyms=len(bindings.remapped), path="xtest")

    def _paced(self, job: InputJob | None, typed: int, total: int, pace: int | None) -> int | None:
        """Hand what was typed so far to the X server (python-xlib only sends on a flush), wait
        until the focused app has read it (``x11_pace``), count it, and stop here if the job was
        cancelled. Returns the window to pace by next time (None once it stops answering)."""
        self._display.sync()
        if pace is not None and self._pacer is not None and not self._pacer.wait(pace):
            self._note(f"window 0x{pace:x} did not answer _NET_WM_PING: typing without waiting for the app")
            pace = None
        if job is not None:
            job.done = typed
            job.check(total)
        return pace

    def _pace_target(self) -> int | None:
        """The focused window that answers pings, connecting the pacer on first use."""
        if self._pacer is None and not self._pacer_unavailable:
            try:
                self._pacer = AppPacer(self._display_name)
            except (xerror.XError, xerror.DisplayError, OSError) as exc:
                self._pacer_unavailable = True
                self._note(f"cannot pace typing by the app ({exc}): long texts may run ahead of it")
        focus = self._display.get_input_focus().focus
        if self._pacer is None or isinstance(focus, int):
            return None
        return self._pacer.target(focus.id)

    @contextmanager
    def _neutral_modifiers(self) -> Iterator[None]:
        """Type with no modifier held and Caps Lock off; put the user's state back afterwards."""
        pressed = self._display.query_keymap()
        held = [kc for kc in sorted(self._keymap.modifier_keycodes()) if pressed[kc // 8] & (1 << (kc % 8))]
        caps = self._keymap.stroke(XK.XK_Caps_Lock)
        caps_on = caps is not None and bool(self._root.query_pointer().mask & X.LockMask)
        for keycode in reversed(held):
            self._key(keycode, False)
        if caps_on and caps is not None:
            self._key(caps.keycode, True)
            self._key(caps.keycode, False)
        try:
            yield
        finally:
            if caps_on and caps is not None:
                self._key(caps.keycode, True)
                self._key(caps.keycode, False)
            for keycode in held:
                self._key(keycode, True)

    # -- binding keysyms the layout lacks ----------------------------------------------------------

    def _bindings(self) -> KeysymBindings:
        """Temporary bindings for one call, kept in step with whoever has the keyboard focus."""
        target = self._focused_client()
        watch = self._mapping_watch() if target is not None else self._watch
        if watch is not None and target is not None:
            watch.follow(target)
        self._sync.target, self._sync.watch = target, watch
        return KeysymBindings(self._display, self._keymap, self._sync)

    def _focused_client(self) -> int | None:
        """The resource-id base of the client owning the focus window (who translates our keys)."""
        focus = self._display.get_input_focus().focus
        window = focus if isinstance(focus, int) else focus.id
        if window == X.PointerRoot:
            child = self._root.query_pointer().child
            window = child if isinstance(child, int) else child.id
        info = self._display.display.info
        base = window & ~info.resource_id_mask
        if window in (X.NONE, X.PointerRoot) or base in (0, info.resource_id_base):
            return None
        return int(base)

    def _mapping_watch(self) -> MappingWatch | None:
        if self._watch is None and not self._watch_unavailable:
            try:
                self._watch = MappingWatch(self._display_name, self._display.display.info.resource_id_base)
            except (RuntimeError, xerror.XError, xerror.DisplayError, OSError) as exc:
                self._watch_unavailable = True
                self._note(
                    f"cannot watch keyboard-mapping reads ({exc}); allowing {MAPPING_GRACE_S * 1000:.0f} ms "
                    "for the focused app after typing characters the layout lacks"
                )
        return self._watch

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self._watch is not None:
                self._watch.close()
            if self._pacer is not None:
                self._pacer.close()
        finally:
            super().close()
