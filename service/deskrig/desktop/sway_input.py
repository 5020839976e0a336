"""Pointer and keyboard input on sway through wlroots' virtual devices, in-process.

One Wayland connection holds a virtual pointer (``zwlr_virtual_pointer_v1``) and a virtual
keyboard (``zwp_virtual_keyboard_v1``) for the life of the device: no process per event. Each
action validates its arguments first, and returns once sway has processed it (a round trip).

The keyboard carries a keymap we write ourselves: every key we need (a named key such as
``Return`` or a character such as ``é`` or ``東``) is given a keycode of its own on level 1, so
any Unicode text is typed the same whatever the user's layout, and no Shift is ever involved in
typing text. The keymap grows as new keys are needed and is sent again only when it changed;
when it is full it starts afresh with the keys at hand. Modifiers of a chord (``ctrl+s``) are
their own keys plus the modifier state a client reads them by.
"""

from __future__ import annotations

import logging
import mmap
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from i3ipc import Connection
from Xlib.error import DisplayError

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
    check_not_held,
    check_point,
    check_point_pair,
    check_range,
    check_release,
    check_scroll,
    check_text,
    invalid,
)
from deskrig.desktop.keys import parse_combo, parse_hotkey, parse_modifier
from deskrig.desktop.sway import LayoutReader, PointerState, SwaySockets, close_ipc, layout_bounds, view_at
from deskrig.desktop.sway_wayland import WaylandConnection, memfd
from deskrig.desktop.sway_xfocus import XwaylandFocus
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, Diagnostic, Point, TypeReport

log = logging.getLogger(__name__)

#: Linux input event codes (linux/input-event-codes.h) of the buttons.
_BUTTONS = {"left": 0x110, "right": 0x111, "middle": 0x112}
#: (axis, sign) per direction: wl_pointer axis 0 is vertical, 1 horizontal; positive is down/right.
_SCROLL = {"up": (0, -1), "down": (0, 1), "left": (1, -1), "right": (1, 1)}
#: One wheel click, in the units libinput reports for a mouse wheel.
_WHEEL_STEP = 15.0
_AXIS_SOURCE_WHEEL = 0
_PRESSED, _RELEASED = 1, 0
_KEYMAP_FORMAT_XKB_V1 = 1
#: Real modifier bits (xkb's core modifiers) each modifier key sets.
_MODIFIER_MASKS = {
    "Shift_L": 1, "Shift_R": 1,
    "Control_L": 4, "Control_R": 4,
    "Alt_L": 8, "Alt_R": 8, "Meta_L": 8, "Meta_R": 8,
    "Super_L": 64, "Super_R": 64, "Hyper_L": 64, "Hyper_R": 64,
    "ISO_Level3_Shift": 128,
}  # fmt: skip
#: xkb keycodes run from 8; X11 clients (Xwayland) cannot see keycodes above 255.
_FIRST_KEYCODE, _LAST_KEYCODE = 8, 255
#: A keycode with no key on it, above every real key. GTK 3 finds the keys of its key bindings
#: (ctrl+v, BackSpace, ...) by symbol, over the keycodes from the keymap's lowest up to but not
#: including its highest (gdkkeys-wayland.c, gdk_wayland_keymap_get_entries_for_keyval), and
#: xkbcommon takes the highest keycode defined as the keymap's maximum: without this, the newest
#: key, which sits on the highest keycode, reaches GTK's text input but none of its bindings (a
#: ctrl+v sent as the first use of v pasted nothing into a GTK entry).
_TOP_KEYCODE = _LAST_KEYCODE
#: How many keys the keymap holds: the keycodes from 9 up to, not including, the top one.
_MAX_KEYS = _TOP_KEYCODE - _FIRST_KEYCODE - 1
_TEXT_KEYS = {"\n": "Return", "\r": "Return", "\t": "Tab"}
_SHIFT_MASK = _MODIFIER_MASKS["Shift_L"]


def _opens_context_menu(key: str, mask: int) -> bool:
    """Whether ``key`` pressed with the modifiers of ``mask`` is one toolkits bind to open a
    context menu at the keyboard focus: the Menu key, Shift+F10 (GTK's "popup-menu" key bindings,
    Qt's keyboard context menu event). Other modifiers with Shift are counted too: no toolkit
    needs them, and a popup placed from a stale press would be wrong rather than unknown."""
    return key == "Menu" or (key == "F10" and bool(mask & _SHIFT_MASK))


def _with_shift_level(symbol: str) -> str:
    """A key's symbols: its own, and what Shift makes of it where X11's US layout has a second
    level (``shift+Tab`` is ISO_Left_Tab, ``shift+a`` is A), so chords read the same as on X11."""
    if symbol == "Tab":
        return "Tab, ISO_Left_Tab"
    if symbol.startswith("U") and len(symbol) > 1:
        char = chr(int(symbol[1:], 16))
        upper = char.upper()
        if len(upper) == 1 and upper != char:
            return f"{symbol}, {xkb_symbol(upper)}"
    return symbol


def xkb_symbol(key: str) -> str:
    """A canonical key name (keys.py) as an xkb symbol: named keys keep their name, a character
    is its Unicode keysym (xkbcommon maps U0061 to the Latin-1 keysym ``a`` itself)."""
    return f"U{ord(key):04X}" if len(key) == 1 else key


class _Keymap:
    """The keys our keyboard has: symbol -> evdev key code (xkb keycode - 8)."""

    def __init__(self) -> None:
        self.symbols: list[str] = []
        self.sent = False

    def ensure(self, symbols: Sequence[str]) -> dict[str, int]:
        wanted = list(dict.fromkeys(symbols))
        missing = [s for s in wanted if s not in self.symbols]
        if missing:
            if len(self.symbols) + len(missing) > _MAX_KEYS:
                self.symbols = [s for s in self.symbols if s in wanted]
            self.symbols += missing
            self.sent = False
        return {s: self.symbols.index(s) + 1 for s in wanted}

    def text(self) -> str:
        codes = "\n".join(
            [
                *(f"<K{i}> = {i + _FIRST_KEYCODE};" for i in range(1, len(self.symbols) + 1)),
                f"<TOP> = {_TOP_KEYCODE};",
            ]
        )
        keys = "\n".join(
            f"key <K{i}> {{ [ {_with_shift_level(s)} ] }};" for i, s in enumerate(self.symbols, start=1)
        )
        return (
            "xkb_keymap {\n"
            f'xkb_keycodes "deskrig" {{ minimum = {_FIRST_KEYCODE}; maximum = {_LAST_KEYCODE};\n{codes}\n}};\n'
            'xkb_types "deskrig" { include "complete" };\n'
            'xkb_compatibility "deskrig" { include "complete" };\n'
            f'xkb_symbols "deskrig" {{\n{keys}\n}};\n'
            "};\n"
        )


class SwayInput:
    """Virtual pointer and keyboard on one sway. Not thread-safe: the Desktop facade serialises."""

    def __init__(self, sockets: SwaySockets, pointer: PointerState) -> None:
        self.diagnostics: list[Diagnostic] = []
        self._pointer_state = pointer
        self._x11 = sockets.x11
        self._xwayland_focus: XwaylandFocus | None = None
        self._x11_failed = False
        self._wayland = WaylandConnection(sockets.wayland)
        try:
            self._ipc = Connection(socket_path=sockets.ipc)
            self._layout_reader = LayoutReader(sockets.ipc)
            self._pointer: Any = self._wayland.virtual_pointer_manager().create_virtual_pointer(
                self._wayland.seat
            )
            self._keyboard: Any = self._wayland.virtual_keyboard_manager().create_virtual_keyboard(
                self._wayland.seat
            )
            self._keymap = _Keymap()
            #: Keys held across calls by key_down (name -> key code), the modifier state they set,
            #: and buttons held by mouse_down: other actions leave them down.
            self._held_keys: dict[str, int] = {}
            self._held_mask = 0
            self._held_buttons: set[str] = set()
            self._closed = False
            #: This action changed what sway draws (see PointerState.drawn_change_at).
            self._drew = False
            # The seat had no pointer until now; put it where Xvfb's starts: mid-screen.
            layout = self._layout()
            with self._delivering("move"):
                self._motion(layout, layout.x + layout.width // 2, layout.y + layout.height // 2)
        except (DeskrigError, OSError):
            self._close_ipc()
            self._wayland.close()
            raise

    # -- plumbing -------------------------------------------------------------------------------

    @staticmethod
    def _now() -> int:
        return int(time.monotonic() * 1000) & 0xFFFFFFFF

    @contextmanager
    def _delivering(self, action: str) -> Iterator[None]:
        """Lost connections become INPUT_FAILED; on success, wait until sway has it all."""
        if self._closed:
            raise DeskrigError(ErrorCode.INPUT_FAILED, "the input connection is closed")
        try:
            yield
            self._wayland.roundtrip()
        except DeskrigError:
            raise
        except (OSError, RuntimeError) as exc:
            raise DeskrigError(
                ErrorCode.INPUT_FAILED, f"{action}: {exc}", details={"action": action}
            ) from exc
        finally:
            # After the round trip: sway has drawn nothing of it yet, so a frame drawn after this
            # time shows it (a failed action may have changed the screen half-way: marked too).
            if self._drew:
                self._pointer_state.drawn_change_at = time.monotonic()
                self._drew = False

    def _tree(self) -> dict[str, Any]:
        """sway's layout now: its outputs and views, in one IPC request (:class:`LayoutReader`)."""
        try:
            return self._layout_reader.tree()
        except OSError as exc:
            raise DeskrigError(ErrorCode.DISPLAY_NOT_FOUND, f"cannot read sway's layout: {exc}") from exc

    def _close_ipc(self) -> None:
        """Close the IPC sockets opened so far (construction may have stopped half-way)."""
        if hasattr(self, "_layout_reader"):
            self._layout_reader.close()
        if hasattr(self, "_ipc"):
            close_ipc(self._ipc)

    def _layout(self) -> Bounds:
        """The outputs' box, for an action that only moves the pointer."""
        return layout_bounds(self._tree())

    def _motion(self, layout: Bounds, x: int, y: int) -> None:
        """Move to layout point (x, y); ``layout``: the outputs' box, read once per action (each
        read is a request to sway's IPC)."""
        self._pointer.motion_absolute(self._now(), x - layout.x, y - layout.y, layout.width, layout.height)
        self._pointer.frame()
        self._drew |= (x, y) != (self._pointer_state.x, self._pointer_state.y)
        self._pointer_state.x, self._pointer_state.y = x, y

    def _point_at(self, tree: dict[str, Any], layout: Bounds, x: int, y: int) -> None:
        """Put the pointer on (x, y) and focus the window there, ready for a button press.

        Over an X window the pointer arrives from the neighbouring pixel: Xwayland tells an X
        client the pointer entered its window only when it moves inside it, so a pointer that
        left an X window and comes back to the very point it left gets no Enter, and the click
        after it is lost. A Wayland client is told of every surface the pointer enters, so the
        pointer goes straight there: one motion, none at all on screen when it is there already
        (a moved cursor is a new frame, which the next screen copy would wait for). ``tree``: the
        layout read for this action, whose outputs' box is ``layout``.
        """
        view = view_at(tree, x, y)
        xwayland = view is not None and view.get("shell") == "xwayland"
        if xwayland:
            self._motion(layout, x + (1 if x == layout.x else -1), y)
        if view is not None and not view.get("focused"):
            self._focus(view, xwayland)
        self._motion(layout, x, y)

    def _focus(self, view: dict[str, Any], xwayland: bool) -> None:
        """Focus the window under the pointer before a button goes down there, as a
        click-to-focus window manager does. sway would focus it on the press itself, but an X
        client under Xwayland takes the X focus only after sway's X window manager offers it
        (WM_TAKE_FOCUS), and a click that lands first is undone by it (Tk moves its focus back
        to the widget it had): the click waits for the X focus (sway_xfocus)."""
        command = f"[con_id={view['id']}] focus"
        self._drew = True
        x_focus = self._x_focus() if xwayland and view.get("window") else None
        if x_focus is None:
            self._ipc.command(command)
        elif not x_focus.focus(view["window"], lambda: self._ipc.command(command)):
            log.info("X window %#x did not take the focus in time; clicking anyway", view["window"])

    def _x_focus(self) -> XwaylandFocus | None:
        """The X connection watching Xwayland's focus, opened on first use; None (noted in the
        diagnostics) when Xwayland cannot be reached, and clicks on X windows do not wait."""
        if self._xwayland_focus is None and self._x11 and not self._x11_failed:
            try:
                self._xwayland_focus = XwaylandFocus(self._x11)
            except (DisplayError, OSError) as exc:
                self._x11_failed = True
                self.diagnostics.append(
                    Diagnostic(
                        component="input",
                        message=f"cannot watch Xwayland's focus on {self._x11} ({exc}): "
                        "a click on an X window that was not focused may be undone by its focus change",
                    )
                )
        return self._xwayland_focus

    def _button(self, code: int, state: int) -> None:
        self._pointer.button(self._now(), code, state)
        self._pointer.frame()
        if state == _PRESSED:
            self._pointer_state.pressed_at = Point(x=self._pointer_state.x, y=self._pointer_state.y)

    def _codes(self, keys: Sequence[str]) -> list[int]:
        """Key codes for canonical key names, re-sending the keymap if it had to grow (held keys
        keep theirs)."""
        codes = self._keymap.ensure([xkb_symbol(k) for k in [*self._held_keys, *keys]])
        if not self._keymap.sent:
            self._send_keymap()
        return [codes[xkb_symbol(k)] for k in keys]

    def _send_keymap(self) -> None:
        data = self._keymap.text().encode() + b"\0"
        fd = memfd("deskrig-keymap")
        try:
            os.ftruncate(fd, len(data))
            with mmap.mmap(fd, len(data)) as memory:
                memory.write(data)
            self._keyboard.keymap(_KEYMAP_FORMAT_XKB_V1, fd, len(data))
            self._wayland.roundtrip()  # the fd is sent with the request; closing it after is safe
        finally:
            os.close(fd)
        self._keymap.sent = True
        if self._held_mask:
            self._keyboard.modifiers(self._held_mask, 0, 0, 0)

    def _key_down(self, key: str, code: int, mask: int) -> None:
        """Press ``key`` (its ``code``) with the modifiers of ``mask`` down. A key that opens a
        context menu at the keyboard focus means the last button press no longer says where a
        popup opened; any other key leaves it (a menu the press opened stays where it was: keys
        move its highlight, open a submenu, which placement tells apart, or close it)."""
        self._keyboard.key(self._now(), code, _PRESSED)
        if _opens_context_menu(key, mask):
            self._pointer_state.pressed_at = None

    @contextmanager
    def _holding(self, keys: Sequence[str]) -> Iterator[None]:
        """Press keys in order (modifiers also set their state bit), release in reverse. Keys held
        by key_down are already down and stay down."""
        keys = [key for key in keys if key not in self._held_keys]
        codes = self._codes(keys)
        pressed: list[tuple[int, int]] = []
        mask = self._held_mask
        try:
            for key, code in zip(keys, codes, strict=True):
                self._key_down(key, code, mask)
                mask |= _MODIFIER_MASKS.get(key, 0)
                pressed.append((code, mask))
                self._keyboard.modifiers(mask, 0, 0, 0)
            yield
        finally:
            for index in range(len(pressed) - 1, -1, -1):
                self._keyboard.key(self._now(), pressed[index][0], _RELEASED)
                self._keyboard.modifiers(pressed[index - 1][1] if index else self._held_mask, 0, 0, 0)

    # -- pointer ----------------------------------------------------------------------------------

    def move(self, x: int, y: int) -> None:
        with self._delivering("move"):
            layout = self._layout()
            self._motion(layout, *check_point(x, y, layout))

    def button(
        self, x: int, y: int, button: ButtonName = "left", count: int = 1, modifiers: Sequence[str] = ()
    ) -> None:
        """Click ``count`` times at (x, y) (2 = a double click) while holding ``modifiers``."""
        code = self._button_code(button)
        check_not_held(button, self._held_buttons)
        check_range("count", count, 1, MAX_CLICKS)
        held = [parse_modifier(m) for m in modifiers]
        with self._delivering("click"):
            tree = self._tree()
            layout = layout_bounds(tree)
            self._point_at(tree, layout, *check_point(x, y, layout))
            with self._holding(held):
                for click in range(count):
                    if click:
                        self._wayland.roundtrip()
                        time.sleep(CLICK_INTERVAL_S)
                    self._button(code, _PRESSED)
                    self._button(code, _RELEASED)

    def drag(
        self,
        from_xy: tuple[int, int],
        to_xy: tuple[int, int],
        button: ButtonName = "left",
        duration_ms: int = 300,
        steps: int = 10,
    ) -> None:
        """Press at ``from_xy``, move in ``steps`` even steps over ``duration_ms``, release at ``to_xy``."""
        code = self._button_code(button)
        check_not_held(button, self._held_buttons)
        check_range("duration_ms", duration_ms, 0, MAX_DURATION_MS)
        check_range("steps", steps, 1, MAX_DRAG_STEPS)
        with self._delivering("drag"):
            tree = self._tree()
            layout = layout_bounds(tree)
            x0, y0 = check_point(*from_xy, layout)
            x1, y1 = check_point(*to_xy, layout)
            self._point_at(tree, layout, x0, y0)
            self._button(code, _PRESSED)
            try:
                for step in range(1, steps + 1):
                    # Real time between motions: toolkits tell drags from flicks by speed.
                    self._wayland.roundtrip()
                    time.sleep(duration_ms / steps / 1000)
                    self._motion(
                        layout, round(x0 + (x1 - x0) * step / steps), round(y0 + (y1 - y0) * step / steps)
                    )
            finally:
                self._button(code, _RELEASED)

    def button_down(self, button: ButtonName, x: int | None, y: int | None) -> None:
        """Press ``button`` at (x, y) (focusing the window there, as a click does), or where the
        pointer is, and leave it down."""
        code = self._button_code(button)
        check_not_held(button, self._held_buttons)
        check_point_pair(x, y)
        with self._delivering("mouse_down"):
            if x is not None:
                tree = self._tree()
                layout = layout_bounds(tree)
                self._point_at(tree, layout, *check_point(x, y, layout))
            self._button(code, _PRESSED)
        self._held_buttons.add(button)

    def button_up(self, button: ButtonName, x: int | None, y: int | None) -> None:
        """Release ``button``, moving to (x, y) first if given."""
        code = self._button_code(button)
        check_release(button, x, y, self._held_buttons)
        with self._delivering("mouse_up"):
            if x is not None:
                layout = self._layout()
                self._motion(layout, *check_point(x, y, layout))
            self._held_buttons.discard(button)
            self._button(code, _RELEASED)

    def scroll(self, x: int | None, y: int | None, direction: ScrollDirection, amount: int) -> None:
        """``amount`` wheel clicks, at (x, y) if given, else where the pointer is."""
        axis, sign = _SCROLL[check_scroll(direction, amount, x, y)]
        with self._delivering("scroll"):
            if x is not None:
                layout = self._layout()
                self._motion(layout, *check_point(x, y, layout))
            for _ in range(amount):
                self._pointer.axis_source(_AXIS_SOURCE_WHEEL)
                self._pointer.axis_discrete(self._now(), axis, sign * _WHEEL_STEP, sign)
                self._pointer.frame()

    @staticmethod
    def _button_code(button: str) -> int:
        return _BUTTONS[check_button(button)]

    # -- keyboard ---------------------------------------------------------------------------------

    def press_key(self, key: str, modifiers: Sequence[str] = ()) -> None:
        """One key ("Return", "F5", "a") or combination ("ctrl+s"), plus extra held ``modifiers``."""
        keys = parse_combo(key, list(modifiers)).keys
        with self._delivering("key press"), self._holding(keys):
            pass

    def hotkey(self, keys: Sequence[str]) -> None:
        """Two or more keys: pressed in order, released in reverse."""
        names = parse_hotkey(list(keys))
        with self._delivering("key press"), self._holding(names):
            pass

    def key_down(self, key: str) -> None:
        """Press one key and leave it down (a modifier also sets its state bit)."""
        with self._delivering("key_down"):
            code = self._codes([key])[0]
            self._key_down(key, code, self._held_mask)
            self._held_keys[key] = code
            self._held_mask |= _MODIFIER_MASKS.get(key, 0)
            self._keyboard.modifiers(self._held_mask, 0, 0, 0)

    def key_up(self, key: str) -> None:
        code = self._held_keys.get(key)
        if code is None:
            raise invalid(f"key {key} is not held down", key=key)
        with self._delivering("key_up"):
            del self._held_keys[key]
            self._held_mask = 0
            for name in self._held_keys:
                self._held_mask |= _MODIFIER_MASKS.get(name, 0)
            self._keyboard.key(self._now(), code, _RELEASED)
            self._keyboard.modifiers(self._held_mask, 0, 0, 0)

    def type_text(self, text: str, delay_ms: int = 0, job: InputJob | None = None) -> TypeReport:
        """Type ``text`` exactly, whatever the layout (``\\n`` is Return, ``\\t`` is Tab).

        Sent in chunks of TYPE_CHUNK characters, each through a round trip; a stopped ``job``
        ends the typing after the chunk it was stopped in (CANCELLED, counting what was typed).
        """
        check_text(text, delay_ms)
        keys = [_TEXT_KEYS.get(ch, ch) for ch in text.replace("\r\n", "\n")]
        job = job or InputJob()
        with self._delivering("type_text"):
            for start in range(0, len(keys), TYPE_CHUNK):
                chunk = keys[start : start + TYPE_CHUNK]
                codes = self._codes(chunk)
                if start == 0:
                    # After _codes: sway ends the connection for a modifier state sent before the
                    # keyboard's first keymap (typing as the first key event of a rig did that).
                    self._keyboard.modifiers(0, 0, 0, 0)
                for key, code in zip(chunk, codes, strict=True):
                    self._key_down(key, code, 0)
                    self._keyboard.key(self._now(), code, _RELEASED)
                    if delay_ms:
                        self._wayland.roundtrip()
                        time.sleep(delay_ms / 1000)
                self._wayland.roundtrip()
                job.done += len(chunk)
                job.check(len(keys))
            if self._held_mask:  # text is typed with no modifier; a held one applies again after
                self._keyboard.modifiers(self._held_mask, 0, 0, 0)
        return TypeReport(
            chars=len(keys), remapped_keysyms=len(self._keymap.symbols), path="virtual-keyboard"
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._keyboard.destroy()
            self._pointer.destroy()
            self._wayland.roundtrip()
        except (DeskrigError, OSError, RuntimeError):
            pass  # the compositor is gone: nothing left to release there
        finally:
            self._close_ipc()
            self._wayland.close()
            if self._xwayland_focus is not None:
                self._xwayland_focus.close()
