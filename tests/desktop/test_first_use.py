"""What a desktop connects only when first used: the input device and, on X11, the clipboard
reader (each a connection of its own, which a server's first screenshot need not wait for)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from deskrig.desktop import open_desktop, x11_clipboard, x11_input
from deskrig.desktop.base import Desktop, InputDevice
from deskrig.desktop.scripted import ScriptedBackend, ScriptedDesktop
from deskrig.desktop.scripted_input import ScriptedInput
from deskrig.errors import DeskrigError, ErrorCode

from .conftest import SCREEN, start_xvfb, stop_process


def test_x11_input_and_clipboard_reader_connect_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: Counter[str] = Counter()

    class CountedInput(x11_input.X11Input):
        def __init__(self, display: str | None = None) -> None:
            opened["input"] += 1
            super().__init__(display)

    class CountedReader(x11_clipboard.SelectionReader):
        def __init__(self, display_name: str | None) -> None:
            opened["clipboard reader"] += 1
            super().__init__(display_name)

    monkeypatch.setattr(x11_input, "X11Input", CountedInput)
    monkeypatch.setattr(x11_clipboard, "SelectionReader", CountedReader)
    xvfb, display = start_xvfb(tmp_path)
    try:
        with open_desktop("x11", display) as desktop:
            assert desktop.grab(desktop.screen_bounds()).size == SCREEN
            assert opened == Counter()  # a screenshot needs neither
            for x in (5, 6):
                desktop.with_input(lambda device, x=x: device.move(x, 7))
                assert desktop.clipboard.get("clipboard").available == ()  # nobody owns it
            assert (desktop.cursor_position().x, desktop.cursor_position().y) == (6, 7)
            assert opened == Counter({"input": 1, "clipboard reader": 1})
    finally:
        stop_process(xvfb)


def test_an_input_device_that_fails_to_open_fails_that_call_and_the_next_one_tries_again() -> None:
    world = ScriptedDesktop()
    attempts: list[ScriptedInput | None] = []

    def open_input() -> InputDevice:
        device = ScriptedInput(world) if attempts else None  # the first attempt finds no display
        attempts.append(device)
        if device is None:
            raise DeskrigError(ErrorCode.DISPLAY_NOT_FOUND, "no display yet")
        return device

    desktop = Desktop(ScriptedBackend(world), open_input=open_input)
    with pytest.raises(DeskrigError) as caught:
        desktop.with_input(lambda device: device.move(3, 4))
    assert caught.value.code == ErrorCode.DISPLAY_NOT_FOUND
    assert world.pointer != (3, 4)
    desktop.with_input(lambda device: device.move(3, 4))
    desktop.with_input(lambda device: device.move(5, 4))
    assert world.pointer == (5, 4)
    assert len(attempts) == 2  # opened once it could be, then kept
    desktop.close()
    opened = attempts[-1]
    assert opened is not None
    with pytest.raises(DeskrigError) as caught:
        opened.move(1, 1)  # the desktop closed the device it opened
    assert caught.value.code == ErrorCode.INPUT_FAILED
