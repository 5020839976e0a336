"""One Wayland client connection to the compositor, and screen capture over it (wlr-screencopy).

Each user of the compositor (the backend's capture, the input device) opens its own
:class:`WaylandConnection`: libwayland proxies are not to be shared between threads, and the
Desktop facade runs capture and input under different locks.

Capture copies an output (or a region of it) into a shared-memory buffer the connection keeps
and reuses while the size stays the same: one request, one round trip, no process spawned. The
pixels leave that buffer as a BGRX :class:`~deskrig.grabs.Grab`, as X11's grabs do, so the
encoders read them without an RGB conversion first (a third of a PNG's CPU at 1280x800).
"""

from __future__ import annotations

import mmap
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pywayland.client.display import Display
from pywayland.protocol.wayland import WlOutput, WlSeat, WlShm

from deskrig.desktop.sway_protocols import (
    ZwlrScreencopyFrameV1Proxy,
    ZwlrScreencopyManagerV1,
    ZwlrVirtualPointerManagerV1,
    ZwpVirtualKeyboardManagerV1,
)
from deskrig.errors import BackendError, DeskrigError, ErrorCode
from deskrig.grabs import BGRX_PIXEL, Grab
from deskrig.model import Bounds


def memfd(name: str) -> int:
    """A new anonymous shared-memory file (close-on-exec): how Wayland hands over buffers and keymaps.

    Linux's memfd; the check also keeps `mypy --platform darwin/win32` from looking for it there."""
    if sys.platform != "linux":
        raise BackendError(
            ErrorCode.DISPLAY_NOT_FOUND, f"Wayland shared memory needs Linux, not {sys.platform}"
        )
    return os.memfd_create(name, os.MFD_CLOEXEC)


def nonblocking_pipe() -> tuple[int, int]:
    """A close-on-exec, non-blocking pipe: Linux's pipe2, checked for like :func:`memfd`."""
    if sys.platform != "linux":
        raise BackendError(ErrorCode.DISPLAY_NOT_FOUND, f"the sway backend needs Linux, not {sys.platform}")
    return os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)


#: wl_shm formats sway's pixman and GLES renderers offer for screencopy: 32-bit words,
#: little-endian, so the bytes are B, G, R, then alpha or padding (a screen's alpha is opaque:
#: read as padding, as the RGB conversion always did).
_SHM_FORMATS = {0, 1}  # WL_SHM_FORMAT_ARGB8888, WL_SHM_FORMAT_XRGB8888
#: zwlr_screencopy_frame_v1.flags: the copy is upside down.
_Y_INVERT = 1


def display_not_found(message: str, socket: str) -> DeskrigError:
    return BackendError(
        ErrorCode.DISPLAY_NOT_FOUND,
        f"{message}: the Wayland compositor at {socket!r} is not reachable",
        details={"wayland_display": socket},
        remediation="Check that sway is running and WAYLAND_DISPLAY (and XDG_RUNTIME_DIR) name its socket.",
    )


@dataclass
class _Output:
    proxy: Any
    name: str = ""
    position: tuple[int, int] = (0, 0)


@dataclass
class ShmBuffer:
    """A wl_buffer over a memfd, kept for the next capture of the same shape."""

    shape: tuple[int, int, int, int]  # format, width, height, stride
    memory: mmap.mmap
    pool: Any
    buffer: Any

    def release(self) -> None:
        self.buffer.destroy()
        self.pool.destroy()
        self.memory.close()


@dataclass
class _FrameState:
    shape: tuple[int, int, int, int] | None = None
    flags: int = 0
    done: bool = False
    failed: bool = False
    copied: bool = False
    handlers: dict[str, Callable[..., None]] = field(default_factory=dict)


class WaylandConnection:
    """A connection with the globals the backend uses bound; ``socket`` as in WAYLAND_DISPLAY."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self._display = Display(socket)
        try:
            self._display.connect()
        except (ValueError, RuntimeError, OSError) as exc:
            raise display_not_found("cannot connect", socket) from exc
        self._globals: dict[str, tuple[int, int]] = {}
        self._outputs: dict[int, _Output] = {}
        self.shm: Any = None
        self.seat: Any = None
        self._screencopy: Any = None
        self._buffer: ShmBuffer | None = None
        registry = self._display.get_registry()
        registry.dispatcher["global"] = self._on_global
        self._registry = registry
        self.roundtrip()
        self.roundtrip()  # the outputs' name and geometry events arrive after they are bound

    def _on_global(self, registry: Any, name: int, interface: str, version: int) -> None:
        self._globals[interface] = (name, version)
        if interface == "wl_output":
            proxy = registry.bind(name, WlOutput, min(version, 4))
            output = _Output(proxy)
            proxy.dispatcher["geometry"] = lambda _p, x, y, *_rest: setattr(output, "position", (x, y))
            proxy.dispatcher["name"] = lambda _p, value: setattr(output, "name", value)
            self._outputs[name] = output
        elif interface == "wl_shm":
            self.shm = registry.bind(name, WlShm, 1)
        elif interface == "wl_seat" and self.seat is None:
            self.seat = registry.bind(name, WlSeat, 1)

    def bind(self, interface: Any, version: int = 1) -> Any:
        """Bind a wlroots global at ``version``, or raise a clear error naming the missing protocol
        (or the version the compositor lacks)."""
        found = self._globals.get(interface.name)
        if found is None:
            raise BackendError(
                ErrorCode.DISPLAY_NOT_FOUND,
                f"the compositor does not offer {interface.name}",
                details={"protocol": interface.name},
                remediation="Use sway (wlroots) >= 1.5, which offers screencopy and virtual input.",
            )
        if found[1] < version:
            raise BackendError(
                ErrorCode.DISPLAY_NOT_FOUND,
                f"the compositor offers {interface.name} version {found[1]}, not {version}",
                details={"protocol": interface.name, "version": found[1], "needed": version},
                remediation="Use sway 1.7 (wlroots 0.15) or later.",
            )
        return self._registry.bind(found[0], interface, version)

    def fileno(self) -> int:
        """The connection's socket, readable when the compositor has sent events."""
        fd: int = self._display.get_fd()
        return fd

    def dispatch_pending(self) -> None:
        """Send what is queued and handle the events already read, without waiting."""
        self._display.flush()
        self._display.dispatch(block=False)

    def read_events(self) -> None:
        """Read what the socket holds (call when :meth:`fileno` is readable), then handle it."""
        try:
            self._display.read()
        except RuntimeError as exc:
            raise display_not_found("lost the connection", self.socket) from exc
        self._display.dispatch(block=False)

    def outputs(self) -> dict[str, Any]:
        """The outputs that have told their name, by name (their ``wl_output`` proxies)."""
        return {o.name: o.proxy for o in self._outputs.values() if o.name}

    def sync(self, done: Callable[[], None]) -> Any:
        """Ask the compositor for a marker: ``done`` runs when its answer arrives, after every event
        the compositor sent before it handled the requests sent so far. Keep the returned proxy
        until then."""
        marker = self._display.sync()
        marker.dispatcher["done"] = lambda _callback, _data: done()
        return marker

    def roundtrip(self) -> None:
        if self._display.roundtrip() < 0:
            raise display_not_found("lost the connection", self.socket)

    def _dispatch(self) -> None:
        """Send what is queued, then wait for and handle the compositor's next events."""
        try:
            self._display.dispatch(block=True)
        except RuntimeError as exc:  # pywayland's report of wl_display_dispatch's -1
            raise display_not_found("lost the connection", self.socket) from exc

    def virtual_pointer_manager(self) -> Any:
        return self.bind(ZwlrVirtualPointerManagerV1)

    def virtual_keyboard_manager(self) -> Any:
        return self.bind(ZwpVirtualKeyboardManagerV1)

    # -- capture ---------------------------------------------------------------------------------

    def grab(self, output_name: str, region: Bounds) -> Grab:
        """``region`` (in the output's own coordinates) of the output named ``output_name``, copied
        into the buffer at sway's next commit, then taken out of it."""
        output = next((o for o in self._outputs.values() if o.name == output_name), None)
        if output is None:
            raise BackendError(
                ErrorCode.CAPTURE_FAILED,
                f"no Wayland output named {output_name!r}",
                details={"output": output_name, "outputs": [o.name for o in self._outputs.values()]},
            )
        if self._screencopy is None:
            self._screencopy = self.bind(ZwlrScreencopyManagerV1)
        frame: ZwlrScreencopyFrameV1Proxy = self._screencopy.capture_output_region(
            0, output.proxy, region.x, region.y, region.width, region.height
        )
        state = _FrameState()
        frame.dispatcher["buffer"] = lambda _f, fmt, w, h, stride: setattr(
            state, "shape", (fmt, w, h, stride)
        )
        frame.dispatcher["flags"] = lambda _f, flags: setattr(state, "flags", flags)
        frame.dispatcher["ready"] = lambda _f, *_time: setattr(state, "done", True)
        frame.dispatcher["failed"] = lambda _f: setattr(state, "failed", True)
        try:
            # Block on the socket for the compositor's events rather than poll it with round
            # trips: the copy waits for sway's next frame (up to a refresh interval), and polling
            # spent that wait on the CPU the encoder needs.
            while not (state.done or state.failed):
                if state.shape is not None and not state.copied:
                    frame.copy(self._buffer_for(state.shape).buffer)
                    state.copied = True
                self._dispatch()
        finally:
            frame.destroy()
        if state.failed or state.shape is None or self._buffer is None:
            raise BackendError(ErrorCode.CAPTURE_FAILED, "the compositor failed the screen copy")
        return _bgrx_frame(self._buffer, bool(state.flags & _Y_INVERT))

    def _buffer_for(self, shape: tuple[int, int, int, int]) -> ShmBuffer:
        if self._buffer is not None and self._buffer.shape == shape:
            return self._buffer
        if self._buffer is not None:
            self._buffer.release()
            self._buffer = None
        self._buffer = self.new_buffer(shape)
        return self._buffer

    def new_buffer(self, shape: tuple[int, int, int, int]) -> ShmBuffer:
        """A shared-memory buffer of ``shape`` (format, width, height, stride), as a frame's
        ``buffer`` event asks for; the caller releases it."""
        fmt, width, height, stride = shape
        if fmt not in _SHM_FORMATS:
            raise BackendError(
                ErrorCode.CAPTURE_FAILED, f"the compositor offers an unsupported pixel format {fmt:#x}"
            )
        size = stride * height
        fd = memfd("deskrig-screencopy")
        try:
            os.ftruncate(fd, size)
            memory = mmap.mmap(fd, size)
            pool = self.shm.create_pool(fd, size)
        finally:
            os.close(fd)  # the pool holds its own reference, sent over the socket
        buffer = pool.create_buffer(0, width, height, stride, fmt)
        return ShmBuffer(shape, memory, pool, buffer)

    def close(self) -> None:
        if self._buffer is not None:
            self._buffer.release()
            self._buffer = None
        self._display.disconnect()


def _bgrx_frame(buffer: ShmBuffer, inverted: bool) -> Grab:
    """The whole buffer as a frame (see :func:`bgrx_part`)."""
    _fmt, width, height, _stride = buffer.shape
    return bgrx_part(buffer, inverted, Bounds(x=0, y=0, width=width, height=height))


def bgrx_part(buffer: ShmBuffer, inverted: bool, part: Bounds) -> Grab:
    """``part`` of the buffer's pixels (in its own coordinates, inside it) copied out as gapless
    BGRX rows, top row first, so the frame owns them and the buffer is free for the next copy.
    One copy of the whole buffer when the part is all of it, its rows have no padding and come
    the right way up (sway's usual case), else one per row."""
    _fmt, width, height, stride = buffer.shape
    row = part.width * BGRX_PIXEL
    if part == Bounds(x=0, y=0, width=width, height=height) and stride == row and not inverted:
        return Grab.from_bgrx(buffer.memory[: row * height], width, height)
    tops = range(part.y, part.bottom)
    order = [height - 1 - top for top in tops] if inverted else tops
    left = part.x * BGRX_PIXEL
    with memoryview(buffer.memory) as pixels:
        rows = b"".join(pixels[r * stride + left : r * stride + left + row] for r in order)
    return Grab.from_bgrx(rows, part.width, part.height)
