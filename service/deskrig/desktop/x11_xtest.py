"""The XTEST connection that pointer and keyboard input share (see ``x11_pointer``, ``x11_input``).

Every action validates all its arguments before sending anything, and returns only once the X
server has processed the input (``sync``). Xlib failures become INPUT_FAILED.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from Xlib import X
from Xlib import error as xerror
from Xlib.ext import xtest

from deskrig.desktop.input_limits import check_point
from deskrig.desktop.x11_conn import close_display, open_display
from deskrig.desktop.x11_keymap import Keymap, keysym_for_key
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, Diagnostic

#: The input backend's notes keep the logger name they had before pointer and keyboard were split.
log = logging.getLogger("deskrig.desktop.x11_input")


class XTestConnection:
    """An X connection with XTEST, and the plumbing every input action uses. Not thread-safe."""

    def __init__(self, display: str | None = None) -> None:
        self._display = open_display(display)
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
        self._closed = False
        #: Keys (keycodes) and buttons held across calls by key_down / mouse_down: other actions
        #: leave them down.
        self._held_keycodes: dict[str, int] = {}
        self._held_buttons: set[str] = set()
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
        return check_point(x, y, Bounds(x=0, y=0, width=width, height=height))

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
        """Press keys in order, release them in reverse, whatever happens in between. Keys held by
        key_down are already down and stay down."""
        pressed: list[int] = []
        try:
            held = set(self._held_keycodes.values())
            for keycode in keycodes:
                if keycode not in pressed and keycode not in held:
                    self._key(keycode, True)
                    pressed.append(keycode)
            yield
        finally:
            for keycode in reversed(pressed):
                self._key(keycode, False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        close_display(self._display, "input")
