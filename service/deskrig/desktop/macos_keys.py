"""deskrig's key names (``keys.py``) as macOS virtual key codes and Quartz event flags; text as the
Unicode strings Quartz keyboard events carry.

Virtual key codes are positions on an ANSI keyboard (Carbon's ``kVK_*`` in HIToolbox/Events.h):
the layout decides what they type. So text is never typed by key code: each keyboard event carries
its characters (``CGEventKeyboardSetUnicodeString``), which apps read whatever the layout. A
printable key pressed on its own or in a shortcut ("cmd+s") goes out as its ANSI key with the
character attached, as the US layout would type it.

Pure data and functions (no pyobjc), tested on Linux.
"""

from __future__ import annotations

from dataclasses import dataclass

from deskrig.desktop.keys import NAMED_KEYS
from deskrig.errors import DeskrigError, ErrorCode

# CGEventFlags (CGEventTypes.h).
FLAG_SHIFT = 0x00020000
FLAG_CONTROL = 0x00040000
FLAG_OPTION = 0x00080000  # kCGEventFlagMaskAlternate
FLAG_COMMAND = 0x00100000

#: Named keys (canonical names) -> virtual key code.
VIRTUAL_KEYS: dict[str, int] = {
    "Return": 0x24,
    "Tab": 0x30,
    "ISO_Left_Tab": 0x30,  # shift+Tab: the modifier is in the flags
    "BackSpace": 0x33,  # kVK_Delete: the key labelled delete, left of the keypad
    "Delete": 0x75,  # kVK_ForwardDelete
    "Insert": 0x72,  # kVK_Help: where Apple's extended keyboard has Insert
    "Help": 0x72,
    "Escape": 0x35,
    "Home": 0x73,
    "End": 0x77,
    "Page_Up": 0x74,
    "Page_Down": 0x79,
    "Left": 0x7B,
    "Right": 0x7C,
    "Down": 0x7D,
    "Up": 0x7E,
    "Caps_Lock": 0x39,
    "Num_Lock": 0x47,  # kVK_ANSI_KeypadClear, the key in Num Lock's place
    "Print": 0x69,  # F13, F14, F15: what PC keyboards' Print Screen, Scroll Lock, Pause send on a Mac
    "Scroll_Lock": 0x6B,
    "Pause": 0x71,
    "Control_L": 0x3B,
    "Control_R": 0x3E,
    "Shift_L": 0x38,
    "Shift_R": 0x3C,
    "Alt_L": 0x3A,  # Option
    "Alt_R": 0x3D,
    "ISO_Level3_Shift": 0x3D,  # right Option types the third level, as AltGr does
    "Super_L": 0x37,  # Command
    "Super_R": 0x36,
    "Meta_L": 0x37,
    "Meta_R": 0x36,
    "KP_Enter": 0x4C,
    "KP_Add": 0x45,
    "KP_Subtract": 0x4E,
    "KP_Multiply": 0x43,
    "KP_Divide": 0x4B,
    "KP_Decimal": 0x41,
    "KP_Equal": 0x51,
    "KP_0": 0x52,
    "KP_1": 0x53,
    "KP_2": 0x54,
    "KP_3": 0x55,
    "KP_4": 0x56,
    "KP_5": 0x57,
    "KP_6": 0x58,
    "KP_7": 0x59,
    "KP_8": 0x5B,
    "KP_9": 0x5C,
    "XF86AudioMute": 0x4A,
    "XF86AudioLowerVolume": 0x49,
    "XF86AudioRaiseVolume": 0x48,
    "F1": 0x7A,
    "F2": 0x78,
    "F3": 0x63,
    "F4": 0x76,
    "F5": 0x60,
    "F6": 0x61,
    "F7": 0x62,
    "F8": 0x64,
    "F9": 0x65,
    "F10": 0x6D,
    "F11": 0x67,
    "F12": 0x6F,
    "F13": 0x69,
    "F14": 0x6B,
    "F15": 0x71,
    "F16": 0x6A,
    "F17": 0x40,
    "F18": 0x4F,
    "F19": 0x50,
    "F20": 0x5A,
}

#: Named keys a Mac keyboard lacks (media and navigation keys macOS delivers as system-defined
#: events, not key codes; F21-F24; keypad navigation of a Num Lock that macOS does not have).
UNSUPPORTED_KEYS: frozenset[str] = NAMED_KEYS - VIRTUAL_KEYS.keys()

#: Modifier key -> the flag events carry while it is held.
MODIFIER_FLAGS: dict[str, int] = {
    "Control_L": FLAG_CONTROL,
    "Control_R": FLAG_CONTROL,
    "Shift_L": FLAG_SHIFT,
    "Shift_R": FLAG_SHIFT,
    "Alt_L": FLAG_OPTION,
    "Alt_R": FLAG_OPTION,
    "ISO_Level3_Shift": FLAG_OPTION,
    "Super_L": FLAG_COMMAND,
    "Super_R": FLAG_COMMAND,
    "Meta_L": FLAG_COMMAND,
    "Meta_R": FLAG_COMMAND,
}

_ANSI_ROWS = {
    # unshifted, shifted, key codes: the US layout's printable keys.
    "a": ("A", 0x00),
    "s": ("S", 0x01),
    "d": ("D", 0x02),
    "f": ("F", 0x03),
    "h": ("H", 0x04),
    "g": ("G", 0x05),
    "z": ("Z", 0x06),
    "x": ("X", 0x07),
    "c": ("C", 0x08),
    "v": ("V", 0x09),
    "b": ("B", 0x0B),
    "q": ("Q", 0x0C),
    "w": ("W", 0x0D),
    "e": ("E", 0x0E),
    "r": ("R", 0x0F),
    "y": ("Y", 0x10),
    "t": ("T", 0x11),
    "1": ("!", 0x12),
    "2": ("@", 0x13),
    "3": ("#", 0x14),
    "4": ("$", 0x15),
    "6": ("^", 0x16),
    "5": ("%", 0x17),
    "=": ("+", 0x18),
    "9": ("(", 0x19),
    "7": ("&", 0x1A),
    "-": ("_", 0x1B),
    "8": ("*", 0x1C),
    "0": (")", 0x1D),
    "]": ("}", 0x1E),
    "o": ("O", 0x1F),
    "u": ("U", 0x20),
    "[": ("{", 0x21),
    "i": ("I", 0x22),
    "p": ("P", 0x23),
    "l": ("L", 0x25),
    "j": ("J", 0x26),
    "'": ('"', 0x27),
    "k": ("K", 0x28),
    ";": (":", 0x29),
    "\\": ("|", 0x2A),
    ",": ("<", 0x2B),
    "/": ("?", 0x2C),
    "n": ("N", 0x2D),
    "m": ("M", 0x2E),
    ".": (">", 0x2F),
    "`": ("~", 0x32),
    " ": (" ", 0x31),
}

#: Printable character -> (virtual key code, needs Shift) on the US layout.
CHARACTER_KEYS: dict[str, tuple[int, bool]] = {
    **{plain: (code, False) for plain, (_, code) in _ANSI_ROWS.items()},
    **{shifted: (code, True) for plain, (shifted, code) in _ANSI_ROWS.items() if shifted != plain},
}

#: Quartz takes at most this many UTF-16 code units per keyboard event (longer strings are cut).
MAX_EVENT_UNITS = 20
#: The key code a text-carrying event is sent with (kVK_ANSI_A). Toolkits take a printable key's
#: characters from the event, but treat a function key's code as that key whatever it carries
#: (Tk does), so the code must be a printable one. Typing holds no modifier, so it is no shortcut.
TEXT_KEY_CODE = 0x00


@dataclass(frozen=True)
class MacKey:
    """One key to press: its virtual key code, the flags it needs (Shift for "A"), the characters
    it carries ("" for a named key)."""

    code: int
    flags: int = 0
    text: str = ""


@dataclass(frozen=True)
class TextStroke:
    """One press-and-release of :data:`TEXT_KEY_CODE` carrying ``text`` (at most
    :data:`MAX_EVENT_UNITS` UTF-16 units), or of a named key's ``code`` (Return, Tab)."""

    code: int
    text: str = ""


def mac_key(name: str, in_chord: bool = False) -> MacKey:
    """A canonical key name (``keys.parse_key``) as the key to press on macOS.

    A character the US layout has is its ANSI key; another goes as characters alone, which a
    text field accepts but a shortcut (``in_chord``) cannot use: INVALID_ARGUMENT then."""
    if name in VIRTUAL_KEYS:
        return MacKey(VIRTUAL_KEYS[name], MODIFIER_FLAGS.get(name, 0))
    if name in UNSUPPORTED_KEYS:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"key {name} has no macOS key code",
            details={"key": name},
            remediation="Use a key a Mac keyboard has (F1-F20, arrows, Return, Escape, cmd, option ...).",
        )
    if name in CHARACTER_KEYS:
        code, shift = CHARACTER_KEYS[name]
        return MacKey(code, FLAG_SHIFT if shift else 0, name)
    if in_chord:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"{name!r} is not on a key of the US layout, so it cannot be part of a shortcut",
            details={"key": name},
            remediation="Type it with type_text, or use the key it is on.",
        )
    return MacKey(TEXT_KEY_CODE, 0, name)


def chord_flags(names: list[str]) -> int:
    """The flags of the modifiers among ``names``."""
    flags = 0
    for name in names:
        flags |= MODIFIER_FLAGS.get(name, 0)
    return flags


def _utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def text_strokes(text: str) -> list[TextStroke]:
    """``text`` as keyboard events: runs of characters in events of at most
    :data:`MAX_EVENT_UNITS` UTF-16 units (a surrogate pair is never split), newline and carriage
    return as Return, tab as Tab (a CR LF pair is one Return)."""
    strokes: list[TextStroke] = []
    run = ""
    for ch in text.replace("\r\n", "\n"):
        if ch in "\n\r\t":
            if run:
                strokes.append(TextStroke(TEXT_KEY_CODE, run))
                run = ""
            strokes.append(TextStroke(VIRTUAL_KEYS["Tab" if ch == "\t" else "Return"]))
            continue
        if _utf16_units(run + ch) > MAX_EVENT_UNITS:
            strokes.append(TextStroke(TEXT_KEY_CODE, run))
            run = ""
        run += ch
    if run:
        strokes.append(TextStroke(TEXT_KEY_CODE, run))
    return strokes
