"""Key names, independent of any platform.

Callers name keys the way people write them ("ctrl+s", "Return", "shift+Tab", "F5", "é"). This
module turns those into canonical names that every backend understands:

- a named key is spelled as its X keysym name ("Return", "Page_Up", "Control_L", "KP_Enter",
  "XF86AudioMute"), the de-facto standard vocabulary that other backends translate from;
- a printable key is the single character itself ("a", "A", "+", " ", "東").

Names are matched case-insensitively, with common aliases (ctrl, esc, pgup, del, win, cmd ...).
Single characters are case-sensitive: "A" means the shifted key. An unknown name is an
INVALID_ARGUMENT whose details list close matches.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from deskrig.errors import DeskrigError, ErrorCode

#: Canonical names of the modifier keys a combination may hold.
MODIFIER_KEYS: frozenset[str] = frozenset(
    {
        "Control_L",
        "Control_R",
        "Shift_L",
        "Shift_R",
        "Alt_L",
        "Alt_R",
        "Super_L",
        "Super_R",
        "Meta_L",
        "Meta_R",
        "Hyper_L",
        "Hyper_R",
        "ISO_Level3_Shift",
    }
)

_OTHER_NAMED_KEYS = [
    "Return",
    "Tab",
    "ISO_Left_Tab",
    "BackSpace",
    "Delete",
    "Insert",
    "Escape",
    "Home",
    "End",
    "Page_Up",
    "Page_Down",
    "Up",
    "Down",
    "Left",
    "Right",
    "Menu",
    "Print",
    "Pause",
    "Break",
    "Scroll_Lock",
    "Caps_Lock",
    "Num_Lock",
    "Help",
    "KP_Enter",
    "KP_Add",
    "KP_Subtract",
    "KP_Multiply",
    "KP_Divide",
    "KP_Decimal",
    "KP_Separator",
    "KP_Equal",
    "KP_Home",
    "KP_End",
    "KP_Page_Up",
    "KP_Page_Down",
    "KP_Up",
    "KP_Down",
    "KP_Left",
    "KP_Right",
    "KP_Begin",
    "KP_Insert",
    "KP_Delete",
    "XF86AudioMute",
    "XF86AudioLowerVolume",
    "XF86AudioRaiseVolume",
    "XF86AudioPlay",
    "XF86AudioPause",
    "XF86AudioStop",
    "XF86AudioPrev",
    "XF86AudioNext",
    "XF86Back",
    "XF86Forward",
    "XF86Reload",
    "XF86Search",
    "XF86HomePage",
    "XF86Mail",
    "XF86Calculator",
    "XF86MonBrightnessUp",
    "XF86MonBrightnessDown",
]

#: Every canonical multi-character key name.
NAMED_KEYS: frozenset[str] = frozenset(
    [*MODIFIER_KEYS, *_OTHER_NAMED_KEYS] + [f"F{n}" for n in range(1, 25)] + [f"KP_{d}" for d in range(10)]
)

#: Alias (lower case) -> canonical name or character. Canonical names match case-insensitively too.
ALIASES: dict[str, str] = {
    "ctrl": "Control_L",
    "control": "Control_L",
    "lctrl": "Control_L",
    "rctrl": "Control_R",
    "shift": "Shift_L",
    "lshift": "Shift_L",
    "rshift": "Shift_R",
    "alt": "Alt_L",
    "option": "Alt_L",
    "lalt": "Alt_L",
    "ralt": "Alt_R",
    "altgr": "ISO_Level3_Shift",
    "super": "Super_L",
    "win": "Super_L",
    "windows": "Super_L",
    "meta": "Super_L",
    "cmd": "Super_L",
    "command": "Super_L",
    "enter": "Return",
    "esc": "Escape",
    "pgup": "Page_Up",
    "pageup": "Page_Up",
    "prior": "Page_Up",
    "pgdn": "Page_Down",
    "pagedown": "Page_Down",
    "next": "Page_Down",
    "del": "Delete",
    "ins": "Insert",
    "backspace": "BackSpace",
    "bksp": "BackSpace",
    "capslock": "Caps_Lock",
    "numlock": "Num_Lock",
    "scrolllock": "Scroll_Lock",
    "printscreen": "Print",
    "prtsc": "Print",
    "apps": "Menu",
    "space": " ",
    "spacebar": " ",
    "plus": "+",
    "minus": "-",
    "equal": "=",
    "comma": ",",
    "period": ".",
    "slash": "/",
    "backslash": "\\",
    "semicolon": ";",
    "colon": ":",
    "apostrophe": "'",
    "quote": "'",
    "grave": "`",
    "backtick": "`",
    "bracketleft": "[",
    "bracketright": "]",
    "asterisk": "*",
    "underscore": "_",
}

_LOOKUP: dict[str, str] = {name.lower(): name for name in NAMED_KEYS} | ALIASES
#: How each lower-case spelling is shown in suggestions.
_DISPLAY: dict[str, str] = {name.lower(): name for name in NAMED_KEYS} | {a: a for a in ALIASES}
_MODIFIER_SPELLINGS = sorted(
    {"ctrl", "shift", "alt", "super", "altgr"} | {n for n in MODIFIER_KEYS}, key=str.lower
)


@dataclass(frozen=True)
class KeyCombo:
    """Modifiers to hold (canonical names, in press order) around one key."""

    modifiers: tuple[str, ...]
    key: str

    @property
    def keys(self) -> list[str]:
        """Everything to press, in order; release in reverse."""
        return [*self.modifiers, self.key]


def _unknown_key(name: str) -> DeskrigError:
    matches = difflib.get_close_matches(name.lower(), _LOOKUP.keys(), n=5, cutoff=0.6)
    return DeskrigError(
        ErrorCode.INVALID_ARGUMENT,
        f"unknown key name {name!r}",
        details={"key": name, "suggestions": [_DISPLAY[m] for m in matches]},
        remediation="Use a key name such as Return, Tab, Escape, F5, ctrl, shift, alt, super, "
        "a single character, or one of details.suggestions.",
    )


def parse_key(name: str) -> str:
    """One key name -> its canonical name (see the module docstring)."""
    if not isinstance(name, str) or name == "":
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT, "a key name must be a non-empty string", details={"key": name}
        )
    if len(name) == 1:
        if name.isprintable():
            return name
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"{name!r} is a control character, not a key name",
            details={"key": name, "suggestions": ["Return", "Tab", "Escape", "BackSpace"]},
        )
    canonical = _LOOKUP.get(name.strip().lower())
    if canonical is None:
        raise _unknown_key(name)
    return canonical


def parse_modifier(name: str) -> str:
    """A modifier name ("ctrl", "shift", "alt", "super", ...) -> its canonical key name."""
    key = parse_key(name)
    if key not in MODIFIER_KEYS:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"{name!r} is not a modifier",
            details={"modifier": name, "allowed": _MODIFIER_SPELLINGS},
        )
    return key


def _split_combo(spec: str) -> list[str]:
    """Split "ctrl+shift+t" on '+', where a trailing '+' is the plus key itself ("ctrl++")."""
    if spec == "+":
        return ["+"]
    if spec.endswith("++"):
        return [*spec[:-2].split("+"), "+"]
    return spec.split("+")


def parse_combo(spec: str, modifiers: list[str] | tuple[str, ...] = ()) -> KeyCombo:
    """ "ctrl+s", "shift+Tab", "Return", "super" plus extra ``modifiers`` -> a :class:`KeyCombo`.

    Every part but the last must be a modifier. A lone modifier ("super") is a key in its own right.
    """
    if not isinstance(spec, str) or spec == "":
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT, "a key must be a non-empty string", details={"key": spec}
        )
    parts = _split_combo(spec)
    if any(part == "" for part in parts):
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"malformed key combination {spec!r}",
            details={"key": spec},
            remediation="Join key names with '+', e.g. ctrl+shift+t; the plus key is 'plus'.",
        )
    held = [parse_modifier(m) for m in modifiers]
    for part in parts[:-1]:
        modifier = parse_modifier(part)
        if modifier not in held:
            held.append(modifier)
    return KeyCombo(modifiers=tuple(held), key=parse_key(parts[-1]))


def parse_hotkey(keys: list[str] | tuple[str, ...]) -> list[str]:
    """Two or more key names, pressed in order and released in reverse -> canonical names."""
    if not isinstance(keys, list | tuple) or len(keys) < 2:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            "a hotkey needs at least two keys",
            details={"keys": keys},
            remediation="Pass two or more key names, e.g. ['ctrl', 's']; for one key use press_key.",
        )
    return [parse_key(key) for key in keys]
