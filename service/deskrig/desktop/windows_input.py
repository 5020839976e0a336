"""Pointer and keyboard input on Windows through SendInput.

The pointer moves in absolute coordinates over the whole virtual desktop (``windows_events``);
after a move the backend reads where the pointer went and, should Windows' rounding (or a pointer
speed setting it applied) have put it elsewhere, sets it exactly and says so once in the
diagnostics. Keys are virtual keys with their scan codes (``windows_keys``); text is
KEYEVENTF_UNICODE events, so it types the same whatever the keyboard layout, with any modifier
the user holds released around it and pressed again afterwards.

SendInput cannot reach a window of higher integrity (an elevated app, the UAC prompt): Windows
drops the events without an error (UIPI), which is why the README says to run deskrig elevated
for elevated apps.

Windows only: mypy checks this module with ``--platform win32``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from deskrig.desktop import windows_api as api
from deskrig.desktop import windows_structs as w
from deskrig.desktop.base import InputJob
from deskrig.desktop.input_limits import (
    CLICK_INTERVAL_S,
    MAX_CLICKS,
    MAX_DRAG_STEPS,
    MAX_DURATION_MS,
    TYPE_CHUNK,
    ButtonName,
    ScrollDirection,
    check_button,
    check_point,
    check_range,
    check_scroll,
    check_text,
    invalid,
)
from deskrig.desktop.keys import parse_combo, parse_hotkey, parse_modifier
from deskrig.desktop.windows_events import MouseEvent, button_event, input_array, move_event, wheel_events
from deskrig.desktop.windows_keys import KeyEvent, key_event, named_key, plain_key, press_events, text_events
from deskrig.desktop.windows_records import display_infos, virtual_desktop
from deskrig.model import Bounds, Diagnostic, TypeReport

assert sys.platform == "win32"  # the rest of the module is Windows' (mypy skips it elsewhere)

#: How long a pointer move may take to land before it is set with SetCursorPos, and how often
#: the pointer is looked at meanwhile.
_ARRIVAL_S = 0.1
_ARRIVAL_POLL_S = 0.002
#: The modifiers released around typed text: GetAsyncKeyState's left/right virtual key -> key name.
_MODIFIERS = {
    0xA0: "Shift_L",
    0xA1: "Shift_R",
    0xA2: "Control_L",
    0xA3: "Control_R",
    0xA4: "Alt_L",
    0xA5: "Alt_R",
    0x5B: "Super_L",
    0x5C: "Super_R",
}


class WindowsInput:
    """SendInput pointer and keyboard. Not thread-safe: the Desktop facade serialises calls."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []
        self._held: dict[str, KeyEvent] = {}
        self._corrected = False

    # -- pointer ---------------------------------------------------------------------------------

    def _desktop(self) -> Bounds:
        return virtual_desktop(display_infos(api.monitors()))

    def _send(self, events: Sequence[KeyEvent | MouseEvent]) -> None:
        api.send_input(input_array(events))

    def move(self, x: int, y: int) -> None:
        desktop = self._desktop()
        check_point(x, y, desktop)
        self._send([move_event(x, y, desktop)])
        # Windows' input thread applies the move after SendInput returns, usually within a
        # millisecond: wait that long before calling it a miss.
        deadline = time.monotonic() + _ARRIVAL_S
        while api.cursor() != (x, y) and time.monotonic() < deadline:
            time.sleep(_ARRIVAL_POLL_S)
        if api.cursor() != (x, y):
            api.set_cursor(x, y)
            if not self._corrected:
                self._corrected = True
                self.diagnostics.append(
                    Diagnostic(
                        component="input",
                        message="an absolute SendInput move missed its pixel; the pointer is set "
                        "with SetCursorPos after each move",
                    )
                )

    def button(
        self, x: int, y: int, button: ButtonName = "left", count: int = 1, modifiers: Sequence[str] = ()
    ) -> None:
        button = check_button(button)
        check_range("count", count, 1, MAX_CLICKS)
        held = [plain_key(parse_modifier(m), api.vk_scan) for m in modifiers]
        self.move(x, y)
        downs = [key_event(key, True, api.scan_code) for key in held]
        ups = [key_event(key, False, api.scan_code) for key in reversed(held)]
        self._send(downs)
        try:
            for click in range(count):
                if click:
                    time.sleep(CLICK_INTERVAL_S)
                self._send([button_event(button, True), button_event(button, False)])
        finally:
            self._send(ups)

    def drag(
        self,
        from_xy: tuple[int, int],
        to_xy: tuple[int, int],
        button: ButtonName = "left",
        duration_ms: int = 300,
        steps: int = 10,
    ) -> None:
        button = check_button(button)
        check_range("duration_ms", duration_ms, 0, MAX_DURATION_MS)
        check_range("steps", steps, 1, MAX_DRAG_STEPS)
        desktop = self._desktop()
        check_point(*from_xy, desktop)
        check_point(*to_xy, desktop)
        self.move(*from_xy)
        self._send([button_event(button, True)])
        try:
            for step in range(1, steps + 1):
                x = from_xy[0] + (to_xy[0] - from_xy[0]) * step // steps
                y = from_xy[1] + (to_xy[1] - from_xy[1]) * step // steps
                time.sleep(duration_ms / 1000 / steps)
                self._send([move_event(x, y, desktop)])
            self.move(*to_xy)
        finally:
            self._send([button_event(button, False)])

    def scroll(self, x: int | None, y: int | None, direction: ScrollDirection, amount: int) -> None:
        direction = check_scroll(direction, amount, x, y)
        if x is not None and y is not None:
            self.move(x, y)
        self._send(wheel_events(direction, amount))

    def button_down(self, button: ButtonName, x: int | None, y: int | None) -> None:
        if x is not None and y is not None:
            self.move(x, y)
        self._send([button_event(check_button(button), True)])

    def button_up(self, button: ButtonName, x: int | None, y: int | None) -> None:
        if x is not None and y is not None:
            self.move(x, y)
        self._send([button_event(check_button(button), False)])

    # -- keys ------------------------------------------------------------------------------------

    def press_key(self, key: str, modifiers: Sequence[str] = ()) -> None:
        self._send(press_events(parse_combo(key, list(modifiers)).keys, api.vk_scan, api.scan_code))

    def hotkey(self, keys: Sequence[str]) -> None:
        self._send(press_events(parse_hotkey(list(keys)), api.vk_scan, api.scan_code))

    def key_down(self, key: str) -> None:
        down = key_event(plain_key(key, api.vk_scan), True, api.scan_code)
        self._send([down])
        self._held[key] = down

    def key_up(self, key: str) -> None:
        down = self._held.get(key)
        if down is None:
            raise invalid(f"key {key} is not held down", key=key)
        self._send([KeyEvent(down.vk, down.scan, down.flags | w.KEYEVENTF_KEYUP)])
        del self._held[key]

    def type_text(self, text: str, delay_ms: int = 0, job: InputJob | None = None) -> TypeReport:
        """Type ``text`` exactly, whatever the layout (``\\n`` is Return, ``\\t`` is Tab), in chunks,
        checking ``job`` for cancellation between them."""
        check_text(text, delay_ms)
        typed = text_events(text, api.scan_code)
        held = [named_key(name) for vk, name in _MODIFIERS.items() if api.key_is_down(vk)]
        self._send([key_event(key, False, api.scan_code) for key in held])
        try:
            step = 1 if delay_ms else TYPE_CHUNK
            for start in range(0, len(typed), step):
                chunk = typed[start : start + step]
                self._send([event for char in chunk for event in char])
                if delay_ms:
                    time.sleep(delay_ms / 1000)
                if job is not None:
                    job.done = start + len(chunk)
                    job.check(len(typed))
        finally:
            self._send([key_event(key, True, api.scan_code) for key in held])
        return TypeReport(chars=len(typed), path="sendinput")

    def close(self) -> None:
        # The facade has released what was held (HeldInput.release_now); there is no connection.
        self._held.clear()
