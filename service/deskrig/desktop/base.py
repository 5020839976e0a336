"""The platform layer's one interface.

A :class:`DesktopBackend` is a small set of blocking methods implemented once per platform
(``x11.py``, later ``sway.py``, ``macos.py``, ``windows.py``). The :class:`Desktop` facade owns
locking and lifecycle so a backend never has to be thread-safe: every call goes through one lock,
and :meth:`Desktop.close` runs the backend's ``close()`` exactly once.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TypeVar

from PIL import Image

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, CursorPosition, Diagnostic, DisplayInfo, WindowInfo

T = TypeVar("T")


class DesktopBackend(ABC):
    """One platform's implementation. Methods block; the facade serialises them."""

    #: Short name shown in diagnostics and /readyz ("x11", "sway", ...).
    name: str = "abstract"

    def __init__(self) -> None:
        #: Fallbacks taken and degradations noticed, for ``deskrig doctor`` and /readyz.
        self.diagnostics: list[Diagnostic] = []

    def note(self, component: str, message: str) -> None:
        """Record a visible fallback."""
        self.diagnostics.append(Diagnostic(component=component, message=message))

    @abstractmethod
    def displays(self) -> list[DisplayInfo]:
        """One entry per monitor, the primary first."""

    @abstractmethod
    def screen_bounds(self) -> Bounds:
        """The whole virtual screen (union of all monitors)."""

    @abstractmethod
    def windows(self) -> list[WindowInfo]:
        """Top-level, viewable application windows, top-most first (z_order 0)."""

    @abstractmethod
    def capture(self, region: Bounds) -> Image.Image:
        """RGB pixels of ``region`` of the screen, exactly as shown (covered parts included)."""

    @abstractmethod
    def capture_window(self, window_id: int, include_frame: bool) -> Image.Image:
        """RGB pixels of one window's own contents, correct even where other windows cover it.

        Raises DeskrigError(WINDOW_NOT_FOUND) for an unknown id.
        """

    @abstractmethod
    def cursor_position(self) -> CursorPosition:
        """Where the pointer is, in screen pixels."""

    @abstractmethod
    def damage_serial(self) -> int:
        """A counter that changes whenever anything on screen may have changed.

        Lets callers reuse an encoded capture of an unchanged screen. A backend that cannot tell
        returns a new value on every call.
        """

    @abstractmethod
    def close(self) -> None:
        """Release connections. Called once, by the facade."""


class Desktop:
    """Thread-safe facade over a backend: one lock, one close."""

    def __init__(self, backend: DesktopBackend) -> None:
        self._backend = backend
        self._lock = threading.RLock()
        self._closed = False

    @property
    def backend_name(self) -> str:
        return self._backend.name

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return list(self._backend.diagnostics)

    def _call(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self._closed:
                raise DeskrigError(ErrorCode.CAPTURE_FAILED, "the desktop connection is closed")
            return fn()

    def displays(self) -> list[DisplayInfo]:
        return self._call(self._backend.displays)

    def screen_bounds(self) -> Bounds:
        return self._call(self._backend.screen_bounds)

    def windows(self) -> list[WindowInfo]:
        return self._call(self._backend.windows)

    def capture(self, region: Bounds) -> Image.Image:
        return self._call(lambda: self._backend.capture(region))

    def capture_window(self, window_id: int, include_frame: bool = False) -> Image.Image:
        return self._call(lambda: self._backend.capture_window(window_id, include_frame))

    def cursor_position(self) -> CursorPosition:
        return self._call(self._backend.cursor_position)

    def damage_serial(self) -> int:
        return self._call(self._backend.damage_serial)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._backend.close()

    def __enter__(self) -> Desktop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
