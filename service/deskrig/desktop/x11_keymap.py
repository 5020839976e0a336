"""The X keyboard mapping as the input layer needs it: which keycode (and Shift or not) yields
a keysym, and which keycodes are free to borrow for keysyms the layout lacks.

Only the first two columns of the core mapping are used (group 1, levels 1 and 2), because those
are the ones a plain key press and Shift+key reach whatever the layout. A keysym found only
further right (AltGr levels, other groups) is treated as missing and gets a spare keycode.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from Xlib import XK, X
from Xlib.display import Display

from deskrig.errors import DeskrigError, ErrorCode

XK.load_keysym_group("xf86")
XK.load_keysym_group("xkb")

KEYSYM_RETURN: int = XK.XK_Return
KEYSYM_TAB: int = XK.XK_Tab
#: Unicode keysyms are 0x1000000 + code point (X11 keysym encoding, appendix A).
UNICODE_KEYSYM_OFFSET = 0x1000000

_TEXT_CONTROLS = {"\n": KEYSYM_RETURN, "\r": KEYSYM_RETURN, "\t": KEYSYM_TAB}


@dataclass(frozen=True)
class Stroke:
    """How to produce one keysym: press ``keycode``, with Shift held if ``shift``."""

    keycode: int
    shift: bool = False


def keysym_for_char(ch: str) -> int:
    """The keysym that types ``ch``: Latin-1 keysyms equal the code point, others are Unicode."""
    if ch in _TEXT_CONTROLS:
        return _TEXT_CONTROLS[ch]
    code = ord(ch)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    return UNICODE_KEYSYM_OFFSET + code


def keysym_for_key(name: str) -> int:
    """A canonical key name from :mod:`deskrig.desktop.keys` (a keysym name or one character)."""
    if len(name) == 1:
        return keysym_for_char(name)
    # python-xlib spells the XFree86 vendor keysyms "XF86_AudioMute" instead of "XF86AudioMute".
    lookup = "XF86_" + name[4:] if name.startswith("XF86") else name
    keysym = int(XK.string_to_keysym(lookup))
    if keysym == X.NoSymbol:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT, f"key {name!r} has no X11 keysym", details={"key": name}
        )
    return keysym


@dataclass(frozen=True)
class RemapSlots:
    """Spare keycodes: a ``block`` of contiguous keycodes without keysyms, bound with one request
    (so one notification to every client), and a ``sentinel``, another empty keycode whose
    no-op change tells when a client has caught up (see x11_binding)."""

    block: tuple[int, ...]
    sentinel: int | None
    borrowed: bool

    @property
    def capacity(self) -> int:
        """Keysyms bindable at once: two per keycode (plain and Shift)."""
        return 2 * len(self.block)


class Keymap:
    """A snapshot of the core keyboard and modifier mappings."""

    def __init__(self, display: Display) -> None:
        info = display.display.info
        self.min_keycode: int = info.min_keycode
        self.max_keycode: int = info.max_keycode
        count = self.max_keycode - self.min_keycode + 1
        self.rows: list[list[int]] = [list(r) for r in display.get_keyboard_mapping(self.min_keycode, count)]
        modmap = display.get_modifier_mapping()
        #: Modifier index (X.ShiftMapIndex ...) -> keycodes bound to it.
        self.modifiers: list[list[int]] = [[kc for kc in group if kc] for group in modmap]
        self._strokes: dict[int, Stroke] = {}
        for level in (0, 1):
            for offset, row in enumerate(self.rows):
                if len(row) > level and row[level] != X.NoSymbol:
                    self._strokes.setdefault(row[level], Stroke(self.min_keycode + offset, level == 1))

    def row(self, keycode: int) -> list[int]:
        return self.rows[keycode - self.min_keycode]

    def stroke(self, keysym: int) -> Stroke | None:
        return self._strokes.get(keysym)

    def modifier_keycodes(self, *, include_lock: bool = False) -> set[int]:
        return {
            kc
            for index, group in enumerate(self.modifiers)
            if include_lock or index != X.LockMapIndex
            for kc in group
        }

    def remap_slots(self) -> RemapSlots:
        """The longest run of keycodes without keysyms, and the highest other one as sentinel.

        Every mapping change makes every client re-read the mapping (a window manager also
        re-grabs its keys, ~100 ms for openbox), so one run bound per request beats more
        keycodes bound with more requests. With no empty keycode at all, the highest
        non-modifier keycode is borrowed (its mapping is restored afterwards, though XKB
        details such as key actions may be simplified)."""
        empty = [self.min_keycode + offset for offset, row in enumerate(self.rows) if not any(row)]
        if not empty:
            modifiers = self.modifier_keycodes(include_lock=True)
            highest = next(
                kc for kc in range(self.max_keycode, self.min_keycode - 1, -1) if kc not in modifiers
            )
            return RemapSlots(block=(highest,), sentinel=None, borrowed=True)
        runs = [
            tuple(kc for _, kc in group)
            for _, group in groupby(enumerate(empty), key=lambda pair: pair[1] - pair[0])
        ]
        block = max(reversed(runs), key=len)
        others = [kc for kc in empty if kc not in block]
        return RemapSlots(block=block, sentinel=others[-1] if others else None, borrowed=False)
