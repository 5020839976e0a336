"""Client-side bindings of the three wlroots protocols the sway backend speaks, for pywayland.

pywayland ships the standard protocols but not wlroots' own. Its scanner would generate these
from the protocol XML; the few requests and events used here are declared by hand instead, in
the scanner's shape (the order of declaration is the opcode, so it follows the protocols):

- ``zwlr_screencopy_manager_v1`` / ``zwlr_screencopy_frame_v1`` (version 2): copy an output, or a
  region of one, into a client's shared-memory buffer; ``copy_with_damage`` (version 2) waits until
  the output has damage since this client's last copy of it;
- ``zwlr_virtual_pointer_manager_v1`` / ``zwlr_virtual_pointer_v1`` (version 1): a pointer
  device of our own, so the seat has a pointer even with no input hardware;
- ``zwp_virtual_keyboard_manager_v1`` / ``zwp_virtual_keyboard_v1`` (version 1): a keyboard
  whose keymap we choose, so any Unicode character can be typed whatever the layout.
"""

from __future__ import annotations

from pywayland.protocol.wayland import WlBuffer, WlOutput, WlSeat
from pywayland.protocol_core.argument import Argument
from pywayland.protocol_core.interface import Interface
from pywayland.protocol_core.proxy import Proxy
from pywayland.scanner.argument import ArgumentType

U = Argument(ArgumentType.Uint)
I = Argument(ArgumentType.Int)  # noqa: E741 - the scanner's own spelling
F = Argument(ArgumentType.Fixed)


def _event(interface: type[Interface], name: str, *arguments: Argument) -> None:
    """Declare an event (the client only receives it, through the proxy's dispatcher)."""

    def receive() -> None:
        """Declaration only."""

    receive.__name__ = name
    interface.event(*arguments)(receive)


class ZwlrScreencopyFrameV1(Interface):
    name = "zwlr_screencopy_frame_v1"
    version = 2


class ZwlrScreencopyManagerV1(Interface):
    name = "zwlr_screencopy_manager_v1"
    version = 2


class ZwlrScreencopyFrameV1Proxy(Proxy[ZwlrScreencopyFrameV1]):
    interface = ZwlrScreencopyFrameV1

    @ZwlrScreencopyFrameV1.request(Argument(ArgumentType.Object, interface=WlBuffer))
    def copy(self, buffer: object) -> None:
        self._marshal(0, buffer)

    @ZwlrScreencopyFrameV1.request()
    def destroy(self) -> None:
        self._marshal(1)
        self._destroy()

    @ZwlrScreencopyFrameV1.request(Argument(ArgumentType.Object, interface=WlBuffer))
    def copy_with_damage(self, buffer: object) -> None:
        self._marshal(2, buffer)


# buffer(format, width, height, stride), flags(flags), ready(tv_sec_hi, tv_sec_lo, tv_nsec), failed(),
# and since version 2 damage(x, y, width, height), sent before ready by copy_with_damage
_event(ZwlrScreencopyFrameV1, "buffer", U, U, U, U)
_event(ZwlrScreencopyFrameV1, "flags", U)
_event(ZwlrScreencopyFrameV1, "ready", U, U, U)
_event(ZwlrScreencopyFrameV1, "failed")
_event(ZwlrScreencopyFrameV1, "damage", U, U, U, U)


class ZwlrScreencopyManagerV1Proxy(Proxy[ZwlrScreencopyManagerV1]):
    interface = ZwlrScreencopyManagerV1

    @ZwlrScreencopyManagerV1.request(
        Argument(ArgumentType.NewId, interface=ZwlrScreencopyFrameV1),
        I,
        Argument(ArgumentType.Object, interface=WlOutput),
    )
    def capture_output(self, overlay_cursor: int, output: object) -> ZwlrScreencopyFrameV1Proxy:
        frame: ZwlrScreencopyFrameV1Proxy = self._marshal_constructor(
            0, ZwlrScreencopyFrameV1, overlay_cursor, output
        )
        return frame

    @ZwlrScreencopyManagerV1.request(
        Argument(ArgumentType.NewId, interface=ZwlrScreencopyFrameV1),
        I,
        Argument(ArgumentType.Object, interface=WlOutput),
        I,
        I,
        I,
        I,
    )
    def capture_output_region(
        self, overlay_cursor: int, output: object, x: int, y: int, width: int, height: int
    ) -> ZwlrScreencopyFrameV1Proxy:
        frame: ZwlrScreencopyFrameV1Proxy = self._marshal_constructor(
            1, ZwlrScreencopyFrameV1, overlay_cursor, output, x, y, width, height
        )
        return frame

    @ZwlrScreencopyManagerV1.request()
    def destroy(self) -> None:
        self._marshal(2)
        self._destroy()


class ZwlrVirtualPointerV1(Interface):
    name = "zwlr_virtual_pointer_v1"
    version = 1


class ZwlrVirtualPointerManagerV1(Interface):
    name = "zwlr_virtual_pointer_manager_v1"
    version = 1


class ZwlrVirtualPointerV1Proxy(Proxy[ZwlrVirtualPointerV1]):
    interface = ZwlrVirtualPointerV1

    @ZwlrVirtualPointerV1.request(U, F, F)
    def motion(self, time: int, dx: float, dy: float) -> None:
        self._marshal(0, time, dx, dy)

    @ZwlrVirtualPointerV1.request(U, U, U, U, U)
    def motion_absolute(self, time: int, x: int, y: int, x_extent: int, y_extent: int) -> None:
        self._marshal(1, time, x, y, x_extent, y_extent)

    @ZwlrVirtualPointerV1.request(U, U, U)
    def button(self, time: int, button: int, state: int) -> None:
        self._marshal(2, time, button, state)

    @ZwlrVirtualPointerV1.request(U, U, F)
    def axis(self, time: int, axis: int, value: float) -> None:
        self._marshal(3, time, axis, value)

    @ZwlrVirtualPointerV1.request()
    def frame(self) -> None:
        self._marshal(4)

    @ZwlrVirtualPointerV1.request(U)
    def axis_source(self, axis_source: int) -> None:
        self._marshal(5, axis_source)

    @ZwlrVirtualPointerV1.request(U, U)
    def axis_stop(self, time: int, axis: int) -> None:
        self._marshal(6, time, axis)

    @ZwlrVirtualPointerV1.request(U, U, F, I)
    def axis_discrete(self, time: int, axis: int, value: float, discrete: int) -> None:
        self._marshal(7, time, axis, value, discrete)

    @ZwlrVirtualPointerV1.request()
    def destroy(self) -> None:
        self._marshal(8)
        self._destroy()


class ZwlrVirtualPointerManagerV1Proxy(Proxy[ZwlrVirtualPointerManagerV1]):
    interface = ZwlrVirtualPointerManagerV1

    @ZwlrVirtualPointerManagerV1.request(
        Argument(ArgumentType.Object, nullable=True, interface=WlSeat),
        Argument(ArgumentType.NewId, interface=ZwlrVirtualPointerV1),
    )
    def create_virtual_pointer(self, seat: object) -> ZwlrVirtualPointerV1Proxy:
        pointer: ZwlrVirtualPointerV1Proxy = self._marshal_constructor(0, ZwlrVirtualPointerV1, seat)
        return pointer

    @ZwlrVirtualPointerManagerV1.request()
    def destroy(self) -> None:
        self._marshal(1)
        self._destroy()


class ZwpVirtualKeyboardV1(Interface):
    name = "zwp_virtual_keyboard_v1"
    version = 1


class ZwpVirtualKeyboardManagerV1(Interface):
    name = "zwp_virtual_keyboard_manager_v1"
    version = 1


class ZwpVirtualKeyboardV1Proxy(Proxy[ZwpVirtualKeyboardV1]):
    interface = ZwpVirtualKeyboardV1

    @ZwpVirtualKeyboardV1.request(U, Argument(ArgumentType.FileDescriptor), U)
    def keymap(self, format: int, fd: int, size: int) -> None:
        self._marshal(0, format, fd, size)

    @ZwpVirtualKeyboardV1.request(U, U, U)
    def key(self, time: int, key: int, state: int) -> None:
        self._marshal(1, time, key, state)

    @ZwpVirtualKeyboardV1.request(U, U, U, U)
    def modifiers(self, mods_depressed: int, mods_latched: int, mods_locked: int, group: int) -> None:
        self._marshal(2, mods_depressed, mods_latched, mods_locked, group)

    @ZwpVirtualKeyboardV1.request()
    def destroy(self) -> None:
        self._marshal(3)
        self._destroy()


class ZwpVirtualKeyboardManagerV1Proxy(Proxy[ZwpVirtualKeyboardManagerV1]):
    interface = ZwpVirtualKeyboardManagerV1

    @ZwpVirtualKeyboardManagerV1.request(
        Argument(ArgumentType.Object, interface=WlSeat),
        Argument(ArgumentType.NewId, interface=ZwpVirtualKeyboardV1),
    )
    def create_virtual_keyboard(self, seat: object) -> ZwpVirtualKeyboardV1Proxy:
        keyboard: ZwpVirtualKeyboardV1Proxy = self._marshal_constructor(0, ZwpVirtualKeyboardV1, seat)
        return keyboard


for _interface, _proxy in (
    (ZwlrScreencopyFrameV1, ZwlrScreencopyFrameV1Proxy),
    (ZwlrScreencopyManagerV1, ZwlrScreencopyManagerV1Proxy),
    (ZwlrVirtualPointerV1, ZwlrVirtualPointerV1Proxy),
    (ZwlrVirtualPointerManagerV1, ZwlrVirtualPointerManagerV1Proxy),
    (ZwpVirtualKeyboardV1, ZwpVirtualKeyboardV1Proxy),
    (ZwpVirtualKeyboardManagerV1, ZwpVirtualKeyboardManagerV1Proxy),
):
    _interface._gen_c()
    _interface.proxy_class = _proxy
