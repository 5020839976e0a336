"""Input helpers shared by the desktop input tests (test_input, test_x11_input, test_held_input,
test_clipboard, test_sway_focus)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from tests.polling import poll

from deskrig.desktop.base import InputDevice
from deskrig.errors import DeskrigError, ErrorCode

from .forms import Forms

T = TypeVar("T")

UNICODE = "Grüße, Ñandú — 東京 😀\nline 2"
UNICODE_LINE = UNICODE.splitlines()[0]


def send(backend: Forms, action: Callable[[InputDevice], Any]) -> Any:
    return backend.desktop.with_input(action)


def focus_tk_field(backend: Forms, widget: str) -> None:
    """Click into a Tk field and empty it (Tk selects all with ctrl+/)."""
    x, y = backend.center(backend.tk, widget)
    send(backend, lambda d: d.button(x, y))
    # Keys sent before Tk moved its focus would land in the field that had it (CI saw this once).
    backend.tk.wait("focus", lambda e: e["widget"] == widget, f"the Tk {widget} to have the focus")
    send(backend, lambda d: d.press_key("ctrl+slash"))
    send(backend, lambda d: d.press_key("Delete"))
    poll(
        f"Tk {widget} to be empty", lambda: [e["text"] for e in backend.tk.events(widget)][-1:] in ([], [""])
    )


def focus_gtk_entry(backend: Forms) -> None:
    x, y = backend.center(backend.gtk, "entry")
    send(backend, lambda d: d.button(x, y))
    send(backend, lambda d: d.hotkey(["ctrl", "a"]))


def refused(call: Callable[[], object]) -> dict[str, Any]:
    with pytest.raises(DeskrigError) as caught:
        call()
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT, caught.value
    assert caught.value.remediation
    return caught.value.details or {}


def click_and_wait(backend: Forms, x: int, y: int) -> None:
    clicks = len(backend.tk.events("button"))
    send(backend, lambda d: d.button(x, y))
    backend.tk.wait("button", lambda e: e["count"] == clicks + 1)


#: Well past the 1 s X11 typing once gave an app to re-read the keyboard mapping.
STALL_S = 3.0


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The process stalled (SIGSTOP) until the block ends, as a loaded machine can stall an app:
    it reads nothing from its X or Wayland connection meanwhile."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def type_while_stalled(pid: int, type_text: Callable[[], T]) -> T:
    """Call ``type_text`` with the app ``pid`` stopped from the start for STALL_S, or until the
    call returned if it does not wait for the app."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        with stopped(pid):
            typing = pool.submit(type_text)
            wait([typing], timeout=STALL_S)
        return typing.result()
