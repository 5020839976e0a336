"""Pointer input on X11 through XTEST: moves, clicks, drags and wheel scrolls.

A click under a window manager waits until the WM is through with it: a click-to-focus WM
freezes the pointer (a passive grab) and replays the click, then moves the keyboard focus, and
keys sent before then would go to the previously focused window.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from Xlib import X
from Xlib.ext import xtest

from deskrig.desktop.input_limits import (
    CLICK_INTERVAL_S,
    MAX_CLICKS,
    MAX_DRAG_STEPS,
    MAX_DURATION_MS,
    ButtonName,
    ScrollDirection,
    check_button,
    check_not_held,
    check_point_pair,
    check_range,
    check_release,
    check_scroll,
)
from deskrig.desktop.keys import parse_modifier
from deskrig.desktop.x11_windows import wm_check_window
from deskrig.desktop.x11_xtest import XTestConnection

_BUTTONS: dict[str, int] = {"left": 1, "middle": 2, "right": 3}
_SCROLL_BUTTONS: dict[str, int] = {"up": 4, "down": 5, "left": 6, "right": 7}
#: How long a window manager may hold the pointer frozen (passive grab) before replaying a click.
#: openbox takes ~130 ms per keyboard-mapping change to re-grab its keys, and replays clicks after.
POINTER_THAW_TIMEOUT_S = 5.0
#: How long a click waits for a click-to-focus window manager to focus the clicked window. GTK and
#: Qt take the focus themselves when the WM sends WM_TAKE_FOCUS, so on a loaded machine it arrives
#: hundreds of milliseconds after the click (0.25 s was too short under CI load); the wait ends as
#: soon as it has arrived, and windows that never get the focus (override-redirect) are not waited for.
FOCUS_SETTLE_TIMEOUT_S = 1.0


class X11Pointer(XTestConnection):
    """XTEST pointer input on one X display."""

    def move(self, x: int, y: int) -> None:
        with self._delivering("move"):
            self._motion(*self._check_point(x, y))

    def button(
        self,
        x: int,
        y: int,
        button: ButtonName = "left",
        count: int = 1,
        modifiers: Sequence[str] = (),
    ) -> None:
        """Click ``count`` times at (x, y) (2 = a double click) while holding ``modifiers``."""
        number = self._button_number(button)
        check_not_held(button, self._held_buttons)
        check_range("count", count, 1, MAX_CLICKS)
        held = [parse_modifier(m) for m in modifiers]
        with self._delivering("click"):
            point = self._check_point(x, y)
            self._refresh_keymap()
            keycodes = self._modifier_keycodes(held)
            self._motion(*point)
            with self._holding(keycodes):
                for click in range(count):
                    if click:
                        self._display.flush()
                        time.sleep(CLICK_INTERVAL_S)
                    xtest.fake_input(self._display, X.ButtonPress, number)
                    xtest.fake_input(self._display, X.ButtonRelease, number)
                # Modifiers stay down until the click is through a window manager's grab.
                self._await_released(number)
            self._await_focus_settled()

    def drag(
        self,
        from_xy: tuple[int, int],
        to_xy: tuple[int, int],
        button: ButtonName = "left",
        duration_ms: int = 300,
        steps: int = 10,
    ) -> None:
        """Press at ``from_xy``, move in ``steps`` even steps over ``duration_ms``, release at ``to_xy``."""
        number = self._button_number(button)
        check_not_held(button, self._held_buttons)
        check_range("duration_ms", duration_ms, 0, MAX_DURATION_MS)
        check_range("steps", steps, 1, MAX_DRAG_STEPS)
        with self._delivering("drag"):
            x0, y0 = self._check_point(*from_xy)
            x1, y1 = self._check_point(*to_xy)
            self._motion(x0, y0)
            xtest.fake_input(self._display, X.ButtonPress, number)
            try:
                for step in range(1, steps + 1):
                    # Real time between motions: toolkits tell drags from flicks by speed.
                    self._display.flush()
                    time.sleep(duration_ms / steps / 1000)
                    self._motion(round(x0 + (x1 - x0) * step / steps), round(y0 + (y1 - y0) * step / steps))
            finally:
                xtest.fake_input(self._display, X.ButtonRelease, number)
            self._await_released(number)

    def button_down(self, button: ButtonName, x: int | None, y: int | None) -> None:
        """Press ``button`` at (x, y), or where the pointer is, and leave it down."""
        number = self._button_number(button)
        check_not_held(button, self._held_buttons)
        check_point_pair(x, y)
        with self._delivering("mouse_down"):
            if x is not None:
                self._motion(*self._check_point(x, y))
            xtest.fake_input(self._display, X.ButtonPress, number)
        self._held_buttons.add(button)

    def button_up(self, button: ButtonName, x: int | None, y: int | None) -> None:
        """Release ``button`` (moving to (x, y) first if given); waits as a click does for a window
        manager's grab and focus change."""
        number = self._button_number(button)
        check_release(button, x, y, self._held_buttons)
        with self._delivering("mouse_up"):
            if x is not None:
                self._motion(*self._check_point(x, y))
            xtest.fake_input(self._display, X.ButtonRelease, number)
            self._held_buttons.discard(button)
            self._await_released(number)
        self._await_focus_settled()

    def scroll(self, x: int | None, y: int | None, direction: ScrollDirection, amount: int) -> None:
        """``amount`` wheel clicks (buttons 4-7), at (x, y) if given, else where the pointer is."""
        number = _SCROLL_BUTTONS[check_scroll(direction, amount, x, y)]
        with self._delivering("scroll"):
            if x is not None:
                self._motion(*self._check_point(x, y))
            for _ in range(amount):
                xtest.fake_input(self._display, X.ButtonPress, number)
                xtest.fake_input(self._display, X.ButtonRelease, number)
            if number <= 5:  # buttons 6 and 7 have no state bit to read back
                self._await_released(number)

    def _await_released(self, number: int) -> None:
        """Return once the server has processed the release of button ``number``.

        A window manager's click-to-focus grab freezes the pointer until the WM replays the
        click; keys sent meanwhile would overtake it (and go to the previously focused widget)."""
        self._display.sync()
        mask = 1 << (7 + number)
        deadline = time.monotonic() + POINTER_THAW_TIMEOUT_S
        while self._root.query_pointer().mask & mask:
            if time.monotonic() > deadline:
                self._note(
                    f"button {number} still reads as pressed {POINTER_THAW_TIMEOUT_S:.0f} s after "
                    "its release: the pointer is frozen by a grab"
                )
                return
            time.sleep(0.001)

    def _await_focus_settled(self) -> None:
        """After a click on a window under a window manager, wait (briefly) for the keyboard focus
        to move into it: click-to-focus WMs set it after replaying the click, and keys sent
        before then would go to the previously focused window."""
        clicked = self._root.query_pointer().child
        if isinstance(clicked, int) or wm_check_window(self._display) is None:
            return
        if clicked.get_attributes().override_redirect:
            return  # menus and tooltips: no window manager focuses them
        deadline = time.monotonic() + FOCUS_SETTLE_TIMEOUT_S
        while not self._focus_within(clicked.id) and time.monotonic() < deadline:
            time.sleep(0.002)

    def _focus_within(self, toplevel: int) -> bool:
        """Whether the keyboard focus is ``toplevel`` (a child of the root) or inside it."""
        focus = self._display.get_input_focus().focus
        if isinstance(focus, int):
            return bool(focus == X.PointerRoot)  # keys go to whatever is under the pointer
        window = focus
        while window.id not in (toplevel, self._root.id):
            window = window.query_tree().parent
            if isinstance(window, int) or window.id == X.NONE:
                return False
        return bool(window.id == toplevel)

    @staticmethod
    def _button_number(button: str) -> int:
        return _BUTTONS[check_button(button)]
