"""Pointer and keyboard input on X11 through XTEST (python-xlib), with its own connection.

Every action validates all its arguments before sending anything, and returns only once the X
server has processed the input (``sync``). Xlib failures become INPUT_FAILED.

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
from typing import Literal

from Xlib import XK, X
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.ext import xtest

from deskrig.desktop.base import InputJob
from deskrig.desktop.keys import parse_combo, parse_hotkey, parse_modifier
from deskrig.desktop.x11_binding import MAPPING_GRACE_S, ClientSync, KeysymBindings
from deskrig.desktop.x11_conn import close_display
from deskrig.desktop.x11_keymap import Keymap, keysym_for_char, keysym_for_key, untypeable_chars
from deskrig.desktop.x11_mapping_watch import MappingWatch
from deskrig.desktop.x11_pace import AppPacer
from deskrig.desktop.x11_windows import wm_check_window
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Diagnostic, TypeReport

log = logging.getLogger(__name__)

ButtonName = Literal["left", "right", "middle"]
ScrollDirection = Literal["up", "down", "left", "right"]

_BUTTONS: dict[str, int] = {"left": 1, "middle": 2, "right": 3}
_SCROLL_BUTTONS: dict[str, int] = {"up": 4, "down": 5, "left": 6, "right": 7}
#: Gap between the clicks of a multi-click: far below any toolkit's double-click time
#: (GTK and Qt 400 ms, Tk 500 ms), and enough for clicks not to share one server timestamp.
CLICK_INTERVAL_S = 0.02
#: How long a window manager may hold the pointer frozen (passive grab) before replaying a click.
#: openbox takes ~130 ms per keyboard-mapping change to re-grab its keys, and replays clicks after.
POINTER_THAW_TIMEOUT_S = 5.0
#: How long a click waits for a click-to-focus window manager to focus the clicked window.
FOCUS_SETTLE_TIMEOUT_S = 0.25
MAX_TEXT_LENGTH = 100_000
#: type_text hands keystrokes to the X server (and checks for cancellation) this many at a time.
TYPE_CHUNK = 32
MAX_CLICKS = 10
MAX_SCROLL = 50
MAX_DRAG_STEPS = 1000
MAX_DURATION_MS = 60_000
MAX_KEY_DELAY_MS = 1000


def _invalid(message: str, **details: object) -> DeskrigError:
    return DeskrigError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def _check_range(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _invalid(f"{name} must be an integer from {low} to {high}", **{name: value})
    return value


class X11Input:
    """XTEST input on one X display. Not thread-safe: the Desktop facade serialises calls."""

    def __init__(self, display: str | None = None) -> None:
        try:
            self._display = Display(display)
        except (xerror.DisplayError, OSError) as exc:
            raise DeskrigError(
                ErrorCode.DISPLAY_NOT_FOUND,
                f"cannot open X display {display or '$DISPLAY'}: {exc}",
                details={"display": display},
            ) from exc
        if not self._display.has_extension("XTEST"):
            self._display.close()
            raise DeskrigError(
                ErrorCode.INPUT_FAILED,
                "the X server has no XTEST extension",
                remediation="Start the X server with XTEST enabled (Xvfb and Xorg have it by default).",
            )
        self._display_name = display
        self._root = self._display.screen().root
        self._xerrors: list[xerror.XError] = []
        self._display.set_error_handler(lambda err, request: self._xerrors.append(err))
        self._keymap = Keymap(self._display)
        self._watch: MappingWatch | None = None
        self._watch_unavailable = False
        self._pacer: AppPacer | None = None
        self._pacer_unavailable = False
        self._sync = ClientSync(target=None, watch=None, note=self._note)
        self._closed = False
        #: Fallbacks taken, for the backend's diagnostics (see DesktopBackend.note).
        self.diagnostics: list[Diagnostic] = []

    # -- plumbing -------------------------------------------------------------------------------

    def _note(self, message: str) -> None:
        if all(d.message != message for d in self.diagnostics):
            self.diagnostics.append(Diagnostic(component="x11.input", message=message))
            log.info("%s", message)

    @contextmanager
    def _delivering(self, action: str) -> Iterator[None]:
        """Translate Xlib failures into INPUT_FAILED; on success, wait until the server has it all."""
        if self._closed:
            raise DeskrigError(ErrorCode.INPUT_FAILED, "the input connection is closed")
        try:
            yield
            self._display.sync()
        except DeskrigError:
            raise
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            raise DeskrigError(
                ErrorCode.INPUT_FAILED, f"{action}: {exc}", details={"action": action}
            ) from exc
        if self._xerrors:
            first = self._xerrors[0]
            self._xerrors.clear()
            raise DeskrigError(ErrorCode.INPUT_FAILED, f"{action}: {first}", details={"action": action})

    def _screen_size(self) -> tuple[int, int]:
        geometry = self._root.get_geometry()
        return geometry.width, geometry.height

    def _check_point(self, x: object, y: object) -> tuple[int, int]:
        width, height = self._screen_size()
        if (
            isinstance(x, bool)
            or isinstance(y, bool)
            or not isinstance(x, int)
            or not isinstance(y, int)
            or not (0 <= x < width and 0 <= y < height)
        ):
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                f"point ({x}, {y}) is not on the {width}x{height} screen",
                details={"x": x, "y": y, "screen": {"width": width, "height": height}},
                remediation="Use coordinates inside the screen (see get_screen_size).",
            )
        return x, y

    def _refresh_keymap(self) -> None:
        """Re-read the mapping if anyone changed it (we see MappingNotify like every client)."""
        stale = False
        while self._display.pending_events():
            if self._display.next_event().type == X.MappingNotify:
                stale = True
        if stale:
            self._keymap = Keymap(self._display)

    def _key(self, keycode: int, down: bool) -> None:
        xtest.fake_input(self._display, X.KeyPress if down else X.KeyRelease, keycode)

    def _motion(self, x: int, y: int) -> None:
        xtest.fake_input(self._display, X.MotionNotify, x=x, y=y)

    def _modifier_keycodes(self, names: Sequence[str]) -> list[int]:
        keycodes = []
        for name in names:
            stroke = self._keymap.stroke(keysym_for_key(name))
            if stroke is None:
                raise DeskrigError(
                    ErrorCode.INPUT_FAILED,
                    f"the keyboard mapping has no key for modifier {name}",
                    details={"modifier": name},
                )
            keycodes.append(stroke.keycode)
        return keycodes

    @contextmanager
    def _holding(self, keycodes: Sequence[int]) -> Iterator[None]:
        """Press keys in order, release them in reverse, whatever happens in between."""
        pressed: list[int] = []
        try:
            for keycode in keycodes:
                if keycode not in pressed:
                    self._key(keycode, True)
                    pressed.append(keycode)
            yield
        finally:
            for keycode in reversed(pressed):
                self._key(keycode, False)

    # -- pointer ----------------------------------------------------------------------------------

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
        _check_range("count", count, 1, MAX_CLICKS)
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
        _check_range("duration_ms", duration_ms, 0, MAX_DURATION_MS)
        _check_range("steps", steps, 1, MAX_DRAG_STEPS)
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

    def scroll(self, x: int | None, y: int | None, direction: ScrollDirection, amount: int) -> None:
        """``amount`` wheel clicks (buttons 4-7), at (x, y) if given, else where the pointer is."""
        if direction not in _SCROLL_BUTTONS:
            raise _invalid(
                f"unknown scroll direction {direction!r}", direction=direction, allowed=list(_SCROLL_BUTTONS)
            )
        _check_range("amount", amount, 1, MAX_SCROLL)
        if (x is None) != (y is None):
            raise _invalid("give both x and y, or neither", x=x, y=y)
        number = _SCROLL_BUTTONS[direction]
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
        if button not in _BUTTONS:
            raise _invalid(f"unknown mouse button {button!r}", button=button, allowed=list(_BUTTONS))
        return _BUTTONS[button]

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

    def _shift_keycode(self) -> int:
        return self._modifier_keycodes(["Shift_L"])[0]

    def type_text(self, text: str, delay_ms: int = 0, job: InputJob | None = None) -> TypeReport:
        """Type ``text`` exactly, whatever the layout (``\\n`` is Return, ``\\t`` is Tab).

        Keys go out in chunks, each waited for until the focused app has read it (see
        ``x11_pace``). With a ``job``, stops after the chunk during which it was stopped (raising
        CANCELLED, with every key released and the mapping restored) and counts the characters
        typed in it.
        """
        if not isinstance(text, str) or len(text) > MAX_TEXT_LENGTH:
            raise _invalid(f"text must be a string of at most {MAX_TEXT_LENGTH} characters")
        _check_range("delay_ms", delay_ms, 0, MAX_KEY_DELAY_MS)
        if bad := untypeable_chars(text):
            raise _invalid("text contains characters no key types", characters=bad[:20])
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
        self._closed = True
        try:
            if self._watch is not None:
                self._watch.close()
            if self._pacer is not None:
                self._pacer.close()
        finally:
            close_display(self._display, "input")
