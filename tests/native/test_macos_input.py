"""What the macOS input device posts (deskrig.desktop.macos_input), recorded by a stand-in sink:
the Quartz events in order, with their click states, flags and characters; and what it refuses,
before posting anything."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.contract import REFUSALS

from deskrig.desktop.base import InputDevice, InputJob
from deskrig.desktop.macos_input import MacOSInput
from deskrig.desktop.macos_keys import FLAG_COMMAND, FLAG_SHIFT, TEXT_KEY_CODE
from deskrig.desktop.macos_windows import ACCESSIBILITY_PANE
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds

from .recorded import SCREEN, RecordingSink


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
def device(sink: RecordingSink) -> MacOSInput:
    return MacOSInput(sink)


def test_a_double_click_counts_its_clicks_in_the_events(device: MacOSInput, sink: RecordingSink) -> None:
    device.button(100, 200, count=2, modifiers=["cmd"])

    assert sink.events == [
        ("mouse", "move", 100, 200, "left", 0, 0),
        ("mouse", "down", 100, 200, "left", 1, FLAG_COMMAND),
        ("mouse", "up", 100, 200, "left", 1, FLAG_COMMAND),
        ("mouse", "down", 100, 200, "left", 2, FLAG_COMMAND),
        ("mouse", "up", 100, 200, "left", 2, FLAG_COMMAND),
    ]


def test_a_drag_presses_drags_in_steps_and_releases(device: MacOSInput, sink: RecordingSink) -> None:
    device.drag((10, 10), (50, 30), button="right", duration_ms=0, steps=2)

    assert [e[1:5] for e in sink.events] == [
        ("move", 10, 10, "left"),  # a move names no button
        ("down", 10, 10, "right"),
        ("drag", 30, 20, "right"),
        ("drag", 50, 30, "right"),
        ("up", 50, 30, "right"),
    ]


@pytest.mark.parametrize(
    ("direction", "lines"), [("up", (1, 0)), ("down", (-1, 0)), ("left", (0, 1)), ("right", (0, -1))]
)
def test_scrolls_are_wheel_lines(
    device: MacOSInput, sink: RecordingSink, direction: Any, lines: tuple[int, int]
) -> None:
    device.scroll(400, 300, direction, 3)

    assert sink.events == [("mouse", "move", 400, 300, "left", 0, 0)] + [("scroll", *lines)] * 3


def test_a_shortcut_holds_each_modifier_in_the_flags_of_the_keys_after_it(
    device: MacOSInput, sink: RecordingSink
) -> None:
    device.press_key("cmd+shift+s")

    both = FLAG_COMMAND | FLAG_SHIFT
    assert sink.events == [
        ("key", 0x37, True, FLAG_COMMAND, ""),
        ("key", 0x38, True, both, ""),
        ("key", 0x01, True, both, "s"),
        ("key", 0x01, False, both, "s"),
        ("key", 0x38, False, FLAG_COMMAND, ""),
        ("key", 0x37, False, 0, ""),
    ]


def test_a_shifted_character_carries_shift_and_itself(device: MacOSInput, sink: RecordingSink) -> None:
    device.press_key("A")

    assert sink.events == [("key", 0x00, True, FLAG_SHIFT, "A"), ("key", 0x00, False, 0, "A")]


def test_text_rides_on_the_events_whatever_the_layout(device: MacOSInput, sink: RecordingSink) -> None:
    report = device.type_text("héllo 東京\r\nok")

    assert (report.chars, report.path) == (11, "quartz")
    assert sink.events == [
        ("key", TEXT_KEY_CODE, True, 0, "héllo 東京"),
        ("key", TEXT_KEY_CODE, False, 0, "héllo 東京"),
        ("key", 0x24, True, 0, ""),
        ("key", 0x24, False, 0, ""),
        ("key", TEXT_KEY_CODE, True, 0, "ok"),
        ("key", TEXT_KEY_CODE, False, 0, "ok"),
    ]


def test_typing_with_a_delay_sends_each_character_alone(device: MacOSInput, sink: RecordingSink) -> None:
    device.type_text("ab", delay_ms=1)

    assert [e[4] for e in sink.events] == ["a", "a", "b", "b"]


def test_a_cancelled_job_stops_typing_and_says_how_far_it_got(
    device: MacOSInput, sink: RecordingSink
) -> None:
    job = InputJob(holder="test")
    job.stop.set()

    with pytest.raises(DeskrigError) as caught:
        device.type_text("abc", delay_ms=1, job=job)

    assert caught.value.code is ErrorCode.CANCELLED
    assert caught.value.details == {"delivered": 1, "total": 3}
    assert len(sink.events) == 2


def test_held_keys_and_buttons_stay_down_until_released(device: MacOSInput, sink: RecordingSink) -> None:
    device.key_down("cmd")
    device.button_down("left", 10, 20)
    device.button_up("left", 30, 40)
    device.key_up("cmd")

    assert sink.events == [
        ("key", 0x37, True, FLAG_COMMAND, ""),
        ("mouse", "down", 10, 20, "left", 1, FLAG_COMMAND),
        ("mouse", "drag", 30, 40, "left", 1, FLAG_COMMAND),
        ("mouse", "up", 30, 40, "left", 1, FLAG_COMMAND),
        ("key", 0x37, False, 0, ""),
    ]


def test_a_move_while_a_button_is_held_is_a_drag_of_it(device: MacOSInput, sink: RecordingSink) -> None:
    device.button_down("right", None, None)
    device.move(50, 60)

    assert sink.events[-1] == ("mouse", "drag", 50, 60, "right", 1, 0)


def test_a_move_macos_never_reports_is_noted_for_doctor(device: MacOSInput, sink: RecordingSink) -> None:
    sink.cursor = lambda: (0, 0)  # type: ignore[method-assign]

    device.move(5, 5)

    assert [d.component for d in device.diagnostics] == ["pointer"]


def test_releasing_what_is_not_held_is_refused(device: MacOSInput, sink: RecordingSink) -> None:
    for call in (lambda: device.key_up("a"), lambda: device.button_up("left", None, None)):
        with pytest.raises(DeskrigError) as caught:
            call()
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert sink.events == []


@pytest.mark.parametrize(("why", "call", "details"), REFUSALS, ids=[why for why, _, _ in REFUSALS])
def test_the_contracts_bad_input_is_refused_before_any_event(
    device: MacOSInput,
    sink: RecordingSink,
    why: str,
    call: Callable[[InputDevice, Bounds], object],
    details: Callable[[Bounds], dict[str, Any]] | None,
) -> None:
    with pytest.raises(DeskrigError) as caught:
        call(device, SCREEN)

    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    if details is not None:
        assert caught.value.details == details(SCREEN)
    assert sink.events == []


def test_a_chord_with_a_key_off_the_us_layout_is_refused(device: MacOSInput, sink: RecordingSink) -> None:
    with pytest.raises(DeskrigError) as caught:
        device.press_key("cmd+é")

    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert sink.events == []


@pytest.mark.parametrize(
    "call",
    [
        lambda d: d.move(10, 10),
        lambda d: d.button(10, 10),
        lambda d: d.press_key("Return"),
        lambda d: d.type_text("x"),
        lambda d: d.scroll(None, None, "down", 1),
    ],
    ids=["move", "click", "key", "type", "scroll"],
)
def test_without_accessibility_input_is_permission_denied_not_dropped(
    device: MacOSInput, sink: RecordingSink, call: Callable[[MacOSInput], object]
) -> None:
    sink.allowed = False

    with pytest.raises(DeskrigError) as caught:
        call(device)

    assert caught.value.code is ErrorCode.PERMISSION_DENIED
    assert caught.value.remediation is not None and ACCESSIBILITY_PANE in caught.value.remediation
    assert sink.events == []


def test_a_closed_device_fails_structured_and_closes_its_sink_once(
    device: MacOSInput, sink: RecordingSink
) -> None:
    device.close()
    device.close()

    with pytest.raises(DeskrigError) as caught:
        device.move(1, 1)

    assert caught.value.code is ErrorCode.INPUT_FAILED
    assert sink.closed == 1
