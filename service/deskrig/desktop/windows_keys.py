"""The project's key names (``deskrig.desktop.keys``) as Windows virtual keys, and the SendInput
keyboard events of a chord or a text.

Pure logic: the one thing that depends on the user's keyboard layout, which key types a character
(``VkKeyScanW``), comes in as a function, so the tables and the event order are unit-tested on
any platform. Text never depends on the layout: it is sent as ``KEYEVENTF_UNICODE`` events (one
UTF-16 code unit each), which Windows turns into the characters themselves, except newline and
tab, which are the Return and Tab keys as on every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from deskrig.desktop import windows_structs as w
from deskrig.desktop.input_limits import invalid

#: ``VkKeyScanW``: a character -> the virtual key in the low byte and the shift state in the high
#: byte (1 Shift, 2 Ctrl, 4 Alt), or -1 when no key of the layout types it.
VkScan = Callable[[str], int]
#: ``MapVirtualKeyW(vk, MAPVK_VK_TO_VSC)``: the scan code of a virtual key on this keyboard.
ScanOf = Callable[[int], int]

VK_SHIFT, VK_CONTROL, VK_MENU = 0x10, 0x11, 0x12
VK_RETURN, VK_TAB = 0x0D, 0x09
#: VkKeyScanW's shift-state bits, and the modifier each asks for.
_SHIFT_STATE_MODIFIERS = ((1, "Shift_L"), (2, "Control_L"), (4, "Alt_L"))


@dataclass(frozen=True)
class VirtualKey:
    """A key as SendInput presses it."""

    vk: int
    #: Sent with KEYEVENTF_EXTENDEDKEY: the right-hand Ctrl and Alt, the navigation block's arrows,
    #: Home, End..., numpad Enter and Divide, the Windows and media keys.
    extended: bool = False
    #: The scan code where the virtual key alone does not tell the key (right Shift); else None,
    #: and the keyboard's own (``MapVirtualKeyW``) is used.
    scan: int | None = None


def _vk(vk: int, extended: bool = False, scan: int | None = None) -> VirtualKey:
    return VirtualKey(vk, extended, scan)


#: Canonical key name -> virtual key (winuser.h's VK_ codes).
NAMED_VIRTUAL_KEYS: dict[str, VirtualKey] = {
    "Shift_L": _vk(VK_SHIFT, scan=0x2A),
    "Shift_R": _vk(VK_SHIFT, scan=0x36),
    "Control_L": _vk(VK_CONTROL),
    "Control_R": _vk(VK_CONTROL, extended=True),
    "Alt_L": _vk(VK_MENU),
    "Alt_R": _vk(VK_MENU, extended=True),
    # AltGr is the right Alt key; layouts with AltGr have Windows add the left Ctrl itself.
    "ISO_Level3_Shift": _vk(VK_MENU, extended=True),
    "Super_L": _vk(0x5B, extended=True),
    "Super_R": _vk(0x5C, extended=True),
    "Meta_L": _vk(0x5B, extended=True),
    "Meta_R": _vk(0x5C, extended=True),
    "Return": _vk(VK_RETURN),
    "Tab": _vk(VK_TAB),
    "BackSpace": _vk(0x08),
    "Escape": _vk(0x1B),
    "Delete": _vk(0x2E, extended=True),
    "Insert": _vk(0x2D, extended=True),
    "Home": _vk(0x24, extended=True),
    "End": _vk(0x23, extended=True),
    "Page_Up": _vk(0x21, extended=True),
    "Page_Down": _vk(0x22, extended=True),
    "Left": _vk(0x25, extended=True),
    "Up": _vk(0x26, extended=True),
    "Right": _vk(0x27, extended=True),
    "Down": _vk(0x28, extended=True),
    "Menu": _vk(0x5D, extended=True),
    "Print": _vk(0x2C, extended=True),
    "Pause": _vk(0x13),
    "Break": _vk(0x03, extended=True),
    "Scroll_Lock": _vk(0x91),
    "Caps_Lock": _vk(0x14),
    "Num_Lock": _vk(0x90, extended=True),
    "Help": _vk(0x2F),
    "KP_Enter": _vk(VK_RETURN, extended=True),
    "KP_Add": _vk(0x6B),
    "KP_Subtract": _vk(0x6D),
    "KP_Multiply": _vk(0x6A),
    "KP_Divide": _vk(0x6F, extended=True),
    "KP_Decimal": _vk(0x6E),
    "KP_Separator": _vk(0x6C),
    # The numpad's navigation keys (Num Lock off) are the same virtual keys as the navigation
    # block's, without the extended flag; KP_Begin (numpad 5) is VK_CLEAR.
    "KP_Home": _vk(0x24),
    "KP_End": _vk(0x23),
    "KP_Page_Up": _vk(0x21),
    "KP_Page_Down": _vk(0x22),
    "KP_Left": _vk(0x25),
    "KP_Up": _vk(0x26),
    "KP_Right": _vk(0x27),
    "KP_Down": _vk(0x28),
    "KP_Begin": _vk(0x0C),
    "KP_Insert": _vk(0x2D),
    "KP_Delete": _vk(0x2E),
    "XF86AudioMute": _vk(0xAD, extended=True),
    "XF86AudioLowerVolume": _vk(0xAE, extended=True),
    "XF86AudioRaiseVolume": _vk(0xAF, extended=True),
    "XF86AudioNext": _vk(0xB0, extended=True),
    "XF86AudioPrev": _vk(0xB1, extended=True),
    "XF86AudioStop": _vk(0xB2, extended=True),
    # Windows has one play/pause key.
    "XF86AudioPlay": _vk(0xB3, extended=True),
    "XF86AudioPause": _vk(0xB3, extended=True),
    "XF86Back": _vk(0xA6, extended=True),
    "XF86Forward": _vk(0xA7, extended=True),
    "XF86Reload": _vk(0xA8, extended=True),
    "XF86Search": _vk(0xAA, extended=True),
    "XF86HomePage": _vk(0xAC, extended=True),
    "XF86Mail": _vk(0xB4, extended=True),
    "XF86Calculator": _vk(0xB7, extended=True),
    **{f"F{n}": _vk(0x70 + n - 1) for n in range(1, 25)},
    **{f"KP_{d}": _vk(0x60 + d) for d in range(10)},
}

#: Canonical names with no Windows virtual key, and what to do instead. With NAMED_VIRTUAL_KEYS,
#: every name of ``keys.NAMED_KEYS`` (the tests check the union).
UNSUPPORTED_KEYS: dict[str, str] = {
    "Hyper_L": "Windows keyboards have no Hyper key",
    "Hyper_R": "Windows keyboards have no Hyper key",
    "KP_Equal": "Windows has no virtual key for the numpad's '=' (type '=' instead)",
    "XF86MonBrightnessUp": "Windows sends no key for display brightness",
    "XF86MonBrightnessDown": "Windows sends no key for display brightness",
    # X's Shift+Tab keysym: press shift+Tab.
    "ISO_Left_Tab": "it is Shift+Tab on Windows: press shift+Tab",
}


@dataclass(frozen=True)
class KeyEvent:
    """One KEYBDINPUT: a virtual key (0 for a Unicode unit), its scan code (or the UTF-16 unit),
    and KEYEVENTF_ flags."""

    vk: int
    scan: int
    flags: int

    @property
    def down(self) -> bool:
        return not self.flags & w.KEYEVENTF_KEYUP


def named_key(name: str) -> VirtualKey:
    """The virtual key of a canonical multi-character name (INVALID_ARGUMENT if Windows has none)."""
    key = NAMED_VIRTUAL_KEYS.get(name)
    if key is None:
        raise invalid(
            f"key {name} cannot be pressed on Windows: {UNSUPPORTED_KEYS.get(name, 'unknown key')}", key=name
        )
    return key


def character_key(char: str, vk_scan: VkScan) -> tuple[VirtualKey, tuple[str, ...]] | None:
    """The key of the layout that types ``char``, with the modifiers it needs; None when no key does
    (as for every character beyond the BMP: VkKeyScanW takes one UTF-16 unit)."""
    if ord(char) > 0xFFFF:
        return None
    code = vk_scan(char)
    if code == -1 or code & 0xFF == 0xFF:
        return None
    needs = tuple(name for bit, name in _SHIFT_STATE_MODIFIERS if (code >> 8) & bit)
    return VirtualKey(code & 0xFF), needs


def key_event(key: VirtualKey, down: bool, scan_of: ScanOf) -> KeyEvent:
    flags = (0 if down else w.KEYEVENTF_KEYUP) | (w.KEYEVENTF_EXTENDEDKEY if key.extended else 0)
    return KeyEvent(key.vk, key.scan if key.scan is not None else scan_of(key.vk), flags)


def unicode_events(char: str) -> list[KeyEvent]:
    """A press and release of each UTF-16 code unit of ``char`` (two for a character beyond the BMP)."""
    encoded = char.encode("utf-16-le")
    units = [int.from_bytes(encoded[i : i + 2], "little") for i in range(0, len(encoded), 2)]
    return [KeyEvent(0, unit, w.KEYEVENTF_UNICODE | up) for unit in units for up in (0, w.KEYEVENTF_KEYUP)]


def chord_keys(names: Sequence[str], vk_scan: VkScan) -> list[VirtualKey] | None:
    """The keys to press in order (release in reverse) for canonical ``names``, modifiers first.

    A character key adds the modifiers the layout needs for it ("ctrl+A" holds Shift too), once.
    None when the last name is a character no key of the layout types (it can then only be typed,
    and only without modifiers: :func:`press_events`).
    """
    *held, last = names
    if len(last) > 1:
        return [named_key(name) for name in names]
    found = character_key(last, vk_scan)
    if found is None:
        return None
    key, needs = found
    modifiers = [*held, *(name for name in needs if name not in held)]
    return [*(named_key(name) for name in modifiers), key]


def press_events(names: Sequence[str], vk_scan: VkScan, scan_of: ScanOf) -> list[KeyEvent]:
    """The events of one chord: each key down in order, then up in reverse order."""
    keys = chord_keys(names, vk_scan)
    if keys is None:
        if len(names) > 1:
            raise invalid(
                f"no key of the keyboard layout types {names[-1]!r}, so it cannot be pressed with modifiers",
                key=names[-1],
                hint="switch to a layout that has the key, or type the character with type_text",
            )
        return unicode_events(names[-1])
    downs = [key_event(key, True, scan_of) for key in keys]
    ups = [key_event(key, False, scan_of) for key in reversed(keys)]
    return downs + ups


def plain_key(name: str, vk_scan: VkScan) -> VirtualKey:
    """The key ``key_down`` holds for ``name``: a named key, or a character's key on its own level
    (a character needing Shift or AltGr is refused: hold shift and its key, as a person would)."""
    if len(name) > 1:
        return named_key(name)
    found = character_key(name, vk_scan)
    if found is None or found[1]:
        raise invalid(
            f"key {name} is not a key of the keyboard layout"
            + (" (it is the shifted level of one)" if found is not None else ""),
            key=name,
            hint="hold shift and the unshifted key, or type it with type_text",
        )
    return found[0]


def text_events(text: str, scan_of: ScanOf) -> list[list[KeyEvent]]:
    """The events typing ``text``, one list per character: newline (CR LF, or a lone CR) is the
    Return key and tab the Tab key; everything else is its own UTF-16 units."""
    typed: list[list[KeyEvent]] = []
    for char in text.replace("\r\n", "\n").replace("\r", "\n"):
        if char in "\n\t":
            key = VirtualKey(VK_RETURN if char == "\n" else VK_TAB)
            typed.append([key_event(key, True, scan_of), key_event(key, False, scan_of)])
        else:
            typed.append(unicode_events(char))
    return typed
