"""The platform layer's one interface.

A :class:`DesktopBackend` is a small set of blocking methods implemented once per platform
(``x11.py``, later ``sway.py``, ``macos.py``, ``windows.py``). The :class:`Desktop` facade owns
locking and lifecycle so a backend never has to be thread-safe: every call goes through one lock,
and :meth:`Desktop.close` runs the backend's ``close()`` exactly once.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from PIL import Image

from deskrig.desktop.clipboard import Clipboard, SelectionStore
from deskrig.desktop.held import HeldInput
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.grabs import Grab
from deskrig.model import Bounds, CursorPosition, Diagnostic, DisplayInfo, Point, TypeReport, WindowInfo

T = TypeVar("T")


@dataclass
class InputJob:
    """One input call holding the device: whose it is, how to stop it, how far it got.

    A device checks :meth:`check` between chunks of keystrokes, so setting ``stop`` (the client
    cancelled or went away) ends a long ``type_text`` within a chunk; ``done`` counts what was
    delivered, for progress reports.
    """

    holder: str = ""
    stop: threading.Event = field(default_factory=threading.Event)
    done: int = 0
    started: float = field(default_factory=time.monotonic)

    def check(self, total: int | None = None) -> None:
        if self.stop.is_set():
            raise DeskrigError(
                ErrorCode.CANCELLED,
                "input cancelled" + (f" after {self.done} of {total}" if total is not None else ""),
                details={"delivered": self.done, "total": total},
            )


class InputDevice(Protocol):
    """Synthetic pointer and keyboard input (X11: XTEST). Validates before sending anything."""

    diagnostics: list[Diagnostic]

    def move(self, x: int, y: int) -> None: ...

    def button(
        self,
        x: int,
        y: int,
        button: Literal["left", "right", "middle"] = "left",
        count: int = 1,
        modifiers: Sequence[str] = (),
    ) -> None: ...

    def drag(
        self,
        from_xy: tuple[int, int],
        to_xy: tuple[int, int],
        button: Literal["left", "right", "middle"] = "left",
        duration_ms: int = 300,
        steps: int = 10,
    ) -> None: ...

    def scroll(
        self, x: int | None, y: int | None, direction: Literal["up", "down", "left", "right"], amount: int
    ) -> None: ...

    def press_key(self, key: str, modifiers: Sequence[str] = ()) -> None: ...

    def hotkey(self, keys: Sequence[str]) -> None: ...

    def type_text(self, text: str, delay_ms: int = 0, job: InputJob | None = None) -> TypeReport: ...

    # Halves, for input held across calls (``deskrig.desktop.held`` keeps the books): other actions
    # leave a held key or button down, and a click or drag of a held button is INVALID_ARGUMENT.

    def key_down(self, key: str) -> None:
        """Press one key (a canonical name, ``keys.parse_key``) and leave it down."""
        ...

    def key_up(self, key: str) -> None:
        """Release a key :meth:`key_down` pressed."""
        ...

    def button_down(self, button: Literal["left", "right", "middle"], x: int | None, y: int | None) -> None:
        """Press a button at (x, y), or where the pointer is, and leave it down."""
        ...

    def button_up(self, button: Literal["left", "right", "middle"], x: int | None, y: int | None) -> None:
        """Release a button :meth:`button_down` pressed, after moving to (x, y) if given."""
        ...

    def close(self) -> None: ...


#: How a window capture was obtained (``ScreenshotMetadata.window_capture``):
#: ``composite``: the compositor's copy of the window itself (X11 Composite; the macOS window
#: server's, CGWindowListCreateImage), correct where covered;
#: ``screen``: its area of the screen, which nothing covered (sway), or where whatever covers it
#: shows (X11 without Composite);
#: ``screen_uncovered``: its area of the screen, copied while the windows over it were hidden
#: (sway: floating windows made transparent for that one frame);
#: ``model``: the scripted desktop's own picture of the window;
#: ``print_window``: the window drawn into a bitmap by Windows (PrintWindow with
#: PW_RENDERFULLCONTENT), correct where covered.
WindowCaptureMethod = Literal["composite", "screen", "screen_uncovered", "model", "print_window"]


@dataclass(frozen=True)
class WindowCapture:
    """A window's own pixels, and how they were obtained."""

    grab: Grab
    method: WindowCaptureMethod

    @property
    def image(self) -> Image.Image:
        return self.grab.image()


class DesktopBackend(ABC):
    """One platform's implementation. Methods block; the facade serialises them."""

    #: Short name shown in diagnostics and /readyz ("x11", "sway", ...).
    name: str = "abstract"
    #: Whether every toolkit reports accessibility positions in screen pixels here (X11, macOS,
    #: Windows), so :meth:`a11y_origins` is always empty: an accessibility read then skips asking.
    a11y_in_screen_pixels: bool = False
    #: Whether :meth:`capture` shows the mouse pointer where it is (sway's screencopy draws it in),
    #: so a video of the captures needs none drawn on (``deskrig.recording.pointer``).
    captures_show_pointer: bool = False

    def __init__(self) -> None:
        #: Fallbacks taken and degradations noticed, for ``deskrig doctor`` and /readyz.
        self.diagnostics: list[Diagnostic] = []
        #: How :meth:`capture_window` obtains pixels, for a backend that always does it one way.
        self.window_capture_method: WindowCaptureMethod = "screen"

    def note(self, component: str, message: str) -> None:
        """Record a visible fallback."""
        self.diagnostics.append(Diagnostic(component=component, message=message))

    @abstractmethod
    def displays(self) -> list[DisplayInfo]:
        """One entry per monitor, numbered from :data:`~deskrig.model.FIRST_DISPLAY_ID`, the primary first."""

    @abstractmethod
    def screen_bounds(self) -> Bounds:
        """The whole virtual screen (union of all monitors)."""

    @abstractmethod
    def windows(self) -> list[WindowInfo]:
        """Top-level, viewable application windows, top-most first (z_order 0)."""

    @abstractmethod
    def capture(self, region: Bounds) -> Image.Image:
        """RGB pixels of ``region`` of the screen, exactly as shown (covered parts included)."""

    def grab(self, region: Bounds) -> Grab:
        """:meth:`capture` as a frame, in the layout the platform hands pixels over; a backend
        whose grabs come as BGRX rows overrides this, so encoders skip the RGB conversion."""
        return Grab.of(self.capture(region))

    @abstractmethod
    def capture_window(self, window_id: int, include_frame: bool) -> Image.Image:
        """RGB pixels of one window's own contents, correct even where other windows cover it.

        Raises DeskrigError(WINDOW_NOT_FOUND) for an unknown id.
        """

    def grab_window(self, window_id: int, include_frame: bool) -> WindowCapture:
        """:meth:`capture_window` as a frame (see :meth:`grab`), saying how the pixels were
        obtained; a backend whose method varies from one capture to the next overrides this."""
        return WindowCapture(
            Grab.of(self.capture_window(window_id, include_frame)), self.window_capture_method
        )

    @abstractmethod
    def cursor_position(self) -> CursorPosition:
        """Where the pointer is, in screen pixels."""

    @abstractmethod
    def activate_window(self, window_id: int) -> None:
        """Raise and focus a window (un-minimising it); WINDOW_NOT_FOUND for an unknown id."""

    @abstractmethod
    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]:
        """The windows of ``pid`` whose toolkit reports accessibility positions from somewhere
        other than the screen's origin, each with that point, in screen pixels.

        Adding it to an element's AT-SPI extents gives screen coordinates. None on X11, where
        toolkits know where their windows are (so are Xwayland's clients); a native Wayland
        client reports positions relative to its window, whose content origin is its point.
        Listed in the order the windows were mapped, oldest first (as a toolkit lists its
        top-levels, which tells windows of one title apart).
        """

    def last_press(self) -> Point | None:
        """Where our input last pressed a pointer button, in screen pixels: where a toolkit opens
        a context menu, which matters where it reports the menu relative to something unknown
        (GTK under Wayland, see :mod:`deskrig.a11y.placement`). None (the default) where toolkits
        report popups in screen coordinates."""
        return None

    @abstractmethod
    def damage_serial(self) -> int:
        """A counter that changes whenever anything on screen may have changed.

        Lets callers reuse an encoded capture of an unchanged screen. A backend that cannot tell
        returns a new value on every call.
        """

    def damage_fd(self) -> int | None:
        """A file descriptor that becomes readable when the screen may have changed, so a watcher
        can sleep in ``select`` rather than poll :meth:`damage_serial`; reading it is left to
        :meth:`damage_serial`. None (the default) when the backend has no such notification."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Release connections. Called once, by the facade."""


class Desktop:
    """Thread-safe facade over a backend and its input device: a lock each, one close.

    Input has its own lock so a long ``type_text`` does not hold up screenshots; so has the
    clipboard. Keys and buttons held across calls are booked in :attr:`held`. ``open_input``
    instead of ``input_device`` opens the device on the first input (an X11 one is a connection
    of its own: a server that only takes screenshots never opens it, and its first screenshot
    does not wait for it); an opening that fails raises to that call, and the next one tries again.
    """

    def __init__(
        self,
        backend: DesktopBackend,
        input_device: InputDevice | None = None,
        selections: SelectionStore | None = None,
        *,
        open_input: Callable[[], InputDevice] | None = None,
    ) -> None:
        self._backend = backend
        self._input = input_device
        self._open_input = open_input
        self._clipboard = Clipboard(selections) if selections is not None else None
        self.held = HeldInput(self)
        self._lock = threading.RLock()
        self._input_lock = threading.Lock()
        self._input_job: InputJob | None = None
        self._closed = False

    @property
    def backend_name(self) -> str:
        return self._backend.name

    @property
    def a11y_in_screen_pixels(self) -> bool:
        return self._backend.a11y_in_screen_pixels

    @property
    def captures_show_pointer(self) -> bool:
        return self._backend.captures_show_pointer

    @property
    def diagnostics(self) -> list[Diagnostic]:
        extra = self._input.diagnostics if self._input is not None else []
        return [*self._backend.diagnostics, *extra]

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

    def grab(self, region: Bounds) -> Grab:
        return self._call(lambda: self._backend.grab(region))

    def capture_window(self, window_id: int, include_frame: bool = False) -> Image.Image:
        return self._call(lambda: self._backend.capture_window(window_id, include_frame))

    def grab_window(self, window_id: int, include_frame: bool = False) -> WindowCapture:
        return self._call(lambda: self._backend.grab_window(window_id, include_frame))

    def cursor_position(self) -> CursorPosition:
        return self._call(self._backend.cursor_position)

    def damage_serial(self) -> int:
        return self._call(self._backend.damage_serial)

    def damage_fd(self) -> int | None:
        return self._call(self._backend.damage_fd)

    def activate_window(self, window_id: int) -> None:
        self._call(lambda: self._backend.activate_window(window_id))

    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]:
        return self._call(lambda: self._backend.a11y_origins(pid))

    def last_press(self) -> Point | None:
        return self._call(self._backend.last_press)

    def with_input(
        self, fn: Callable[[InputDevice], T], job: InputJob | None = None, timeout: float | None = None
    ) -> T:
        """Run ``fn`` with the input device, serialised with other input.

        Waits at most ``timeout`` seconds (None: for ever) for another call's input to finish,
        then raises BUSY naming its holder. A ``job`` stopped while waiting never starts.
        """
        if self._input is None and self._open_input is None:
            raise DeskrigError(ErrorCode.INPUT_FAILED, f"the {self.backend_name} backend has no input device")
        job = job or InputJob()
        if not self._input_lock.acquire(timeout=-1 if timeout is None else timeout):
            raise self._busy(timeout or 0.0)
        try:
            if self._closed:
                raise DeskrigError(ErrorCode.INPUT_FAILED, "the desktop connection is closed")
            job.check()
            if self._input is None:
                assert self._open_input is not None
                self._input = self._open_input()
            self._input_job = job
            return fn(self._input)
        finally:
            self._input_job = None
            self._input_lock.release()

    def _busy(self, waited: float) -> DeskrigError:
        holder = self._input_job
        details: dict[str, object] = {"waited_seconds": waited, "retry_after_seconds": 1}
        if holder is not None:
            details["holder"] = holder.holder
            details["held_for_seconds"] = round(time.monotonic() - holder.started, 3)
        return DeskrigError(
            ErrorCode.BUSY,
            f"the keyboard and pointer stayed in use by another call for {waited:g} s"
            + (f" (held by {holder.holder})" if holder is not None and holder.holder else ""),
            details=details,
        )

    def cancel_input(self, holder: str) -> bool:
        """Stop the input ``holder`` is delivering, if any; True when there was some."""
        job = self._input_job
        if job is None or job.holder != holder:
            return False
        job.stop.set()
        return True

    @property
    def clipboard(self) -> Clipboard:
        if self._clipboard is None:
            raise DeskrigError(
                ErrorCode.INPUT_FAILED,
                f"the {self.backend_name} backend has no clipboard",
                remediation="Use a desktop backend with a clipboard (x11 or sway).",
            )
        return self._clipboard

    def close(self) -> None:
        with self._lock, self._input_lock:
            if self._closed:
                return
            self._closed = True
            self.held.close()
            try:
                if self._input is not None:
                    self.held.release_now(self._input)  # no key stays down after the server
                    self._input.close()
                if self._clipboard is not None:
                    self._clipboard.close()
            finally:
                self._backend.close()

    def __enter__(self) -> Desktop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
