"""Keys and mouse buttons held down across calls (key_down, mouse_down), and who holds them.

The desktop has one keyboard and one pointer, so a key or button is down once, owned by the client
that pressed it (its identity plus MCP session: ``deskrig.identity.ClientRef.key``). Only that
client lifts it again; a key_up of a key it does not hold is INVALID_ARGUMENT and changes nothing.

A stuck modifier must never outlive its client, so everything a client holds is released when:

- its connection closes (stdio EOF, an HTTP session's DELETE or expiry: ``recording.watch``
  registers :meth:`HeldInput.release` there and marks the client :meth:`watched <HeldInput.watch>`);
- it stays idle for ``held_input_idle_timeout`` seconds, for clients whose connection cannot be
  watched (the stateless 2026-07-28 protocol, where a connection lasts one request);
- the desktop closes (the server stops), so a server attached to someone's desktop leaves no key down.

Every change goes through the input lock (``Desktop.with_input``), so the books and the device
never disagree with another call's input in between.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deskrig.desktop.input_limits import ButtonName, check_button, check_point_pair
from deskrig.desktop.keys import parse_key
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.idle import IdleExpiry

if TYPE_CHECKING:
    from deskrig.desktop.base import Desktop, InputDevice

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeldState:
    """What one client holds down, in the order it pressed them."""

    keys: tuple[str, ...] = ()
    buttons: tuple[ButtonName, ...] = ()


class HeldInput:
    """The books of held keys and buttons, over the desktop's input device. Thread-safe."""

    def __init__(self, desktop: Desktop) -> None:
        self._desktop = desktop
        self._lock = threading.Lock()
        #: canonical key name -> holder, in press order.
        self._keys: dict[str, str] = {}
        self._buttons: dict[ButtonName, str] = {}
        #: Holders whose connection's close releases their input: idleness leaves them be.
        self._watched: set[str] = set()
        #: Each unwatched holder holding something, by its last call; releases those left idle.
        self._idle = IdleExpiry(0.0, self._release_idle, "deskrig-held-input-idle")

    @property
    def idle_timeout(self) -> float:
        """Seconds without a call after which an unwatched holder's input is released (0: never)."""
        return self._idle.timeout

    @idle_timeout.setter
    def idle_timeout(self, seconds: float) -> None:
        self._idle.timeout = seconds

    # -- what holders do ----------------------------------------------------------------------------

    def key_down(self, holder: str, key: str, timeout: float | None = None) -> HeldState:
        """Press ``key`` and keep it down for ``holder``; pressing a key it already holds does nothing."""
        name = parse_key(key)

        def press(device: InputDevice) -> None:
            owner = self._keys.get(name)
            if owner == holder:
                return
            if owner is not None:
                raise self._taken("key", name)
            device.key_down(name)
            with self._lock:
                self._keys[name] = holder

        return self._change(holder, press, timeout)

    def key_up(self, holder: str, key: str, timeout: float | None = None) -> HeldState:
        """Release ``key``, which ``holder`` must hold (else INVALID_ARGUMENT, nothing sent)."""
        name = parse_key(key)

        def release(device: InputDevice) -> None:
            if self._keys.get(name) != holder:
                raise self._not_held("key", name, key, holder)
            device.key_up(name)
            with self._lock:
                del self._keys[name]

        return self._change(holder, release, timeout)

    def mouse_down(
        self, holder: str, button: str, x: int | None, y: int | None, timeout: float | None = None
    ) -> HeldState:
        """Press ``button`` (at (x, y) if given, else where the pointer is) and keep it down."""
        name = check_button(button)
        check_point_pair(x, y)

        def press(device: InputDevice) -> None:
            owner = self._buttons.get(name)
            if owner is not None:
                raise self._taken("button", name) if owner != holder else self._already(name)
            device.button_down(name, x, y)
            with self._lock:
                self._buttons[name] = holder

        return self._change(holder, press, timeout)

    def mouse_up(
        self, holder: str, button: str, x: int | None, y: int | None, timeout: float | None = None
    ) -> HeldState:
        """Release ``button`` (after moving to (x, y) if given), which ``holder`` must hold."""
        name = check_button(button)
        check_point_pair(x, y)

        def release(device: InputDevice) -> None:
            if self._buttons.get(name) != holder:
                raise self._not_held("button", name, button, holder)
            device.button_up(name, x, y)
            with self._lock:
                del self._buttons[name]

        return self._change(holder, release, timeout)

    def state(self, holder: str) -> HeldState:
        with self._lock:
            return HeldState(
                keys=tuple(k for k, h in self._keys.items() if h == holder),
                buttons=tuple(b for b, h in self._buttons.items() if h == holder),
            )

    def touch(self, holder: str) -> None:
        """``holder`` made a call: what it holds is not idle."""
        self._idle.touch(holder)

    def watch(self, holder: str) -> None:
        """``holder``'s connection is watched: its close (not idleness) releases what it holds."""
        with self._lock:
            self._watched.add(holder)
        self._idle.forget(holder)

    def release(self, holder: str) -> HeldState:
        """Lift everything ``holder`` holds (buttons first, then keys in reverse order); what was held.

        Blocking: waits for other input to finish. A device that fails (the display is gone) is
        logged, and the books are cleared all the same."""
        with self._lock:
            self._watched.discard(holder)
        if not self.state(holder).keys and not self.state(holder).buttons:
            return HeldState()
        try:
            return self._desktop.with_input(lambda device: self.release_now(device, holder))
        except DeskrigError as exc:
            log.warning("releasing the input held by %s failed: %s", holder, exc.message)
            return self._forget(holder)

    def release_now(self, device: InputDevice, holder: str | None = None) -> HeldState:
        """With the input lock held: lift what ``holder`` (None: everyone) holds on ``device``."""
        held = self._forget(holder)
        for button in reversed(held.buttons):
            self._quietly(device.button_up, button, None, None)
        for key in reversed(held.keys):
            self._quietly(device.key_up, key)
        if held.keys or held.buttons:
            log.info("released %s held by %s", [*held.buttons, *held.keys], holder or "every client")
        return held

    def close(self) -> None:
        self._idle.close()

    # -- plumbing -----------------------------------------------------------------------------------

    def _change(self, holder: str, change: Callable[[InputDevice], None], timeout: float | None) -> HeldState:
        self._desktop.with_input(change, timeout=timeout)
        with self._lock:
            holding = any(h == holder for h in [*self._keys.values(), *self._buttons.values()])
            watched = holder in self._watched
        if holding and not watched:
            self._idle.used(holder)
        else:
            self._idle.forget(holder)
        return self.state(holder)

    def _forget(self, holder: str | None) -> HeldState:
        with self._lock:
            keys = tuple(k for k, h in self._keys.items() if holder is None or h == holder)
            buttons = tuple(b for b, h in self._buttons.items() if holder is None or h == holder)
            for key in keys:
                del self._keys[key]
            for button in buttons:
                del self._buttons[button]
        self._idle.forget(holder)
        return HeldState(keys=keys, buttons=buttons)

    @staticmethod
    def _quietly(lift: Callable[..., None], *args: object) -> None:
        try:
            lift(*args)
        except DeskrigError as exc:
            log.warning("could not release held input: %s", exc.message)

    def _release_idle(self, holder: str) -> None:
        """Release what ``holder`` holds: it made no call for ``idle_timeout``."""
        log.warning(
            "%s made no call for %g s: releasing the keys and buttons it held", holder, self.idle_timeout
        )
        self.release(holder)

    @staticmethod
    def _taken(kind: str, name: str) -> DeskrigError:
        return DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"{kind} {name} is held down by another client",
            details={kind: name},
            remediation="Wait until the other client releases it, or use another key or button.",
        )

    @staticmethod
    def _already(button: str) -> DeskrigError:
        return DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"the {button} button is already held down by you",
            details={"button": button},
            remediation="Release it with mouse_up before pressing it again.",
        )

    def _not_held(self, kind: str, name: str, given: str, holder: str) -> DeskrigError:
        state = self.state(holder)
        return DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"{kind} {given!r} is not held down by you",
            details={kind: name, "held_keys": list(state.keys), "held_buttons": list(state.buttons)},
            remediation=f"Release only what you pressed with {'key_down' if kind == 'key' else 'mouse_down'} "
            "(details list what you hold).",
        )
