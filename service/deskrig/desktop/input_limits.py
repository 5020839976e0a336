"""What every input backend accepts: button and scroll names, the limits on counts, durations and
text, and the INVALID_ARGUMENT they raise, so X11 and Sway refuse the same input the same way."""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from typing import Literal

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

ButtonName = Literal["left", "right", "middle"]
ScrollDirection = Literal["up", "down", "left", "right"]

#: Gap between the clicks of a multi-click: far below any toolkit's double-click time
#: (GTK and Qt 400 ms, Tk 500 ms), and enough for clicks not to share one server timestamp.
CLICK_INTERVAL_S = 0.02
MAX_CLICKS = 10
MAX_SCROLL = 50
MAX_DRAG_STEPS = 1000
MAX_DURATION_MS = 60_000
MAX_TEXT_LENGTH = 100_000
#: type_text hands keystrokes to the display server (and checks for cancellation) this many at a time.
TYPE_CHUNK = 32
MAX_KEY_DELAY_MS = 1000
#: The most a clipboard transfer (set or get) carries: far above any text a test pastes, below
#: what would strain the rig's memory or an MCP response.
MAX_CLIPBOARD_BYTES = 32 * 1024 * 1024
#: How long a clipboard read waits for the selection's owner to answer (it may be a busy app).
CLIPBOARD_TIMEOUT_S = 5.0


def invalid(message: str, **details: object) -> DeskrigError:
    return DeskrigError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def check_range(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid(f"{name} must be an integer from {low} to {high}", **{name: value})
    return value


BUTTON_NAMES: tuple[ButtonName, ...] = ("left", "middle", "right")
SCROLL_DIRECTIONS: tuple[ScrollDirection, ...] = ("up", "down", "left", "right")


def check_button(button: object) -> ButtonName:
    for name in BUTTON_NAMES:
        if button == name:
            return name
    raise invalid(f"unknown mouse button {button!r}", button=button, allowed=list(BUTTON_NAMES))


def check_not_held(button: ButtonName, held: Collection[str]) -> None:
    """A click or drag of a button that mouse_down holds would release it behind its holder's back."""
    if button in held:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"the {button} button is held down (mouse_down)",
            details={"button": button, "held_buttons": sorted(held)},
            remediation="Release it with mouse_up first, or click with another button.",
        )


def check_release(button: ButtonName, x: object, y: object, held: Collection[str]) -> None:
    """A mouse_up: of a button mouse_down holds, at both or neither of x, y."""
    check_point_pair(x, y)
    if button not in held:
        raise invalid(f"the {button} button is not held down", button=button)


def check_point_pair(x: object, y: object) -> None:
    """x and y go together: both or neither."""
    if (x is None) != (y is None):
        raise invalid("give both x and y, or neither", x=x, y=y)


def check_scroll(direction: object, amount: object, x: object, y: object) -> ScrollDirection:
    """The direction of a valid scroll: a known direction, an amount in range, both or neither of x, y."""
    if direction not in SCROLL_DIRECTIONS:
        raise invalid(
            f"unknown scroll direction {direction!r}", direction=direction, allowed=list(SCROLL_DIRECTIONS)
        )
    check_range("amount", amount, 1, MAX_SCROLL)
    check_point_pair(x, y)
    return SCROLL_DIRECTIONS[SCROLL_DIRECTIONS.index(direction)]


def check_text(text: object, delay_ms: object) -> str:
    """The text of a valid type_text call: no control character other than newline, carriage
    return and tab (which type Return and Tab), no lone surrogate; no key types those."""
    if not isinstance(text, str) or len(text) > MAX_TEXT_LENGTH:
        raise invalid(f"text must be a string of at most {MAX_TEXT_LENGTH} characters")
    check_range("delay_ms", delay_ms, 0, MAX_KEY_DELAY_MS)
    bad = [
        {"index": index, "codepoint": f"U+{ord(ch):04X}"}
        for index, ch in enumerate(text)
        if ch not in "\n\r\t" and unicodedata.category(ch) in ("Cc", "Cs")
    ]
    if bad:
        raise invalid("text contains characters no key types", characters=bad[:20])
    return text


def check_point(x: object, y: object, screen: Bounds) -> tuple[int, int]:
    """(x, y) when it is a point on ``screen`` (the union of the displays' bounds)."""
    if (
        isinstance(x, bool)
        or isinstance(y, bool)
        or not isinstance(x, int)
        or not isinstance(y, int)
        or not screen.contains(x, y)
    ):
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"point ({x}, {y}) is not on the {screen.width}x{screen.height} screen",
            details={"x": x, "y": y, "screen": {"width": screen.width, "height": screen.height}},
            remediation="Use coordinates inside the screen (see get_screen_size).",
        )
    return x, y
