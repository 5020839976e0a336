"""The Desktop contract: the assertions every backend passes, on the scene of two windows.

A test module imports these tests and provides the ``subject`` fixture (and ``managed_subject``,
the subjects with a click-to-focus window manager) for its backends: tests/desktop/test_contract.py
for the scripted desktop, X11 and Sway, tests/native/test_native_contract.py for the native
macOS (and Windows) backends on a real host. This module imports no backend, so it loads on every
OS. The scene is a green and a red window, apart, each one solid colour (the Tk colour app,
tests/apps/tk_color.py, or GTK's on Linux).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from PIL import Image
from tests.polling import poll

from deskrig.desktop.base import DesktopBackend, InputDevice
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import FIRST_DISPLAY_ID, Bounds, WindowInfo

RGB = tuple[int, int, int]
#: The scene: where the standing windows' client areas go and what colour they paint, by kind.
SCENE = {
    "gtk": ((0, 200, 0), Bounds(x=40, y=60, width=320, height=220)),
    "tk": ((200, 0, 0), Bounds(x=40, y=400, width=320, height=220)),
}
#: Window ids no desktop has: past any X resource id, zero, negative, beyond 32 bits.
UNKNOWN_IDS = [0x1FFFFF00, 0, -1, 1 << 40]


@dataclass
class Subject:
    """One backend under the contract, with its input device and the scene it shows."""

    name: str
    backend: DesktopBackend
    input: InputDevice
    #: The standing windows' colours, by kind ("gtk", "tk").
    colours: dict[str, RGB]
    #: The standing window of a kind, once the backend lists it where the app put it.
    settled: Callable[[str], WindowInfo]
    #: A new input device on the same desktop (for closing one).
    new_input: Callable[[], InputDevice]
    #: The whole screen, as the desktop was set up (or, on a real host, as a toolkit reports it).
    screen: Bounds
    #: Every display's scale; None on a real host, whose displays may be Retina (at least 1).
    scale: float | None = 1.0
    #: How far in from a window's corners its own colour starts: macOS and Windows 11 round them.
    rounded: int = 0
    #: How far a captured channel may be from the colour the app painted: 0 where pixels are
    #: copied as painted; on macOS the window server matches colours to the display's profile.
    tolerance: int = 0

    def all_of(self, colours: set[RGB], kind: str) -> bool:
        """Whether ``colours`` are all (and not none) the colour of the ``kind`` window."""
        want = self.colours[kind]
        return bool(colours) and all(
            all(abs(got - wanted) <= self.tolerance for got, wanted in zip(colour, want, strict=True))
            for colour in colours
        )


def probe_points(area: Bounds, inset: int = 0) -> list[tuple[int, int]]:
    """The four corner pixels of ``area`` (``inset`` pixels in, diagonally) and its centre."""
    return [
        (area.x + inset, area.y + inset),
        (area.right - 1 - inset, area.y + inset),
        (area.x + inset, area.bottom - 1 - inset),
        (area.right - 1 - inset, area.bottom - 1 - inset),
        (area.x + area.width // 2, area.y + area.height // 2),
    ]


def colours_at(image: Image.Image, area: Bounds, inset: int = 0) -> set[RGB]:
    return {image.getpixel(point) for point in probe_points(area, inset)}  # type: ignore[misc]


def own_colours(image: Image.Image, rounded: int) -> set[RGB]:
    """Every colour of a window's image but for ``rounded`` by ``rounded`` squares at its corners
    (painted over with the centre's colour before counting)."""
    width, height = image.size
    if rounded:
        image = image.copy()
        centre = image.getpixel((width // 2, height // 2))
        for x, y in (
            (0, 0),
            (width - rounded, 0),
            (0, height - rounded),
            (width - rounded, height - rounded),
        ):
            image.paste(centre, (x, y, x + rounded, y + rounded))  # type: ignore[arg-type]
    return {colour for _, colour in image.getcolors(width * height) or []}  # type: ignore[misc]


def refused(call: Callable[[], object], code: ErrorCode = ErrorCode.INVALID_ARGUMENT) -> dict[str, Any]:
    with pytest.raises(DeskrigError) as caught:
        call()
    assert caught.value.code is code, caught.value
    assert caught.value.remediation
    return caught.value.details or {}


# -- displays and windows -------------------------------------------------------------------------


def test_displays_are_numbered_from_one_the_primary_first(subject: Subject) -> None:
    displays = subject.backend.displays()
    screen = subject.backend.screen_bounds()

    assert [d.id for d in displays] == list(range(FIRST_DISPLAY_ID, FIRST_DISPLAY_ID + len(displays)))
    assert [d.primary for d in displays] == [True] + [False] * (len(displays) - 1)
    assert all(d.name for d in displays)
    if subject.scale is None:  # the host's own displays: Retina ones have 2 device pixels a point
        assert all(d.scale >= 1.0 for d in displays)
    else:
        assert all(d.scale == subject.scale for d in displays)
    assert (screen.x, screen.y) == (0, 0)
    assert all(screen.intersection(d.bounds) == d.bounds for d in displays)
    assert screen == subject.screen


def test_windows_are_listed_top_most_first_with_their_client_bounds(subject: Subject) -> None:
    for kind, (_, bounds) in SCENE.items():
        window = subject.settled(kind)  # where the app says it is (a window manager may move it)
        assert (window.bounds.width, window.bounds.height) == (bounds.width, bounds.height)
        assert window.frame_bounds is not None
        assert window.frame_bounds.intersection(window.bounds) == window.bounds
        assert not window.minimized

    windows = subject.backend.windows()

    assert [w.z_order for w in windows] == list(range(len(windows)))
    assert sum(w.focused for w in windows) <= 1


# -- capture --------------------------------------------------------------------------------------


def test_screen_capture_shows_each_window_where_it_is_listed(subject: Subject) -> None:
    listed = {kind: subject.settled(kind) for kind in SCENE}

    screen = subject.backend.capture(subject.backend.screen_bounds())

    assert (screen.mode, screen.size) == ("RGB", (subject.screen.width, subject.screen.height))
    for kind, window in listed.items():
        assert subject.all_of(colours_at(screen, window.bounds, subject.rounded), kind), kind


def test_region_capture_is_clipped_to_the_screen_and_refused_outside_it(subject: Subject) -> None:
    area = subject.settled("tk").bounds

    part = subject.backend.capture(Bounds(x=area.x - 5, y=area.y + 10, width=30, height=20))
    screen = subject.screen
    corner = subject.backend.capture(Bounds(x=screen.right - 10, y=screen.bottom - 4, width=50, height=50))
    outside = Bounds(x=screen.right + 5, y=0, width=10, height=10)
    details = refused(lambda: subject.backend.capture(outside), ErrorCode.INVALID_REGION)

    assert part.size == (30, 20)
    assert not subject.all_of({part.getpixel((4, 0))}, "tk")  # type: ignore[arg-type]
    assert subject.all_of({part.getpixel((5, 0))}, "tk")  # type: ignore[arg-type]
    assert corner.size == (10, 4)
    assert details == {"region": outside.model_dump(), "screen": subject.backend.screen_bounds().model_dump()}


def test_window_capture_is_its_own_pixels_with_or_without_the_frame(subject: Subject) -> None:
    window = subject.settled("gtk")
    assert window.frame_bounds is not None

    client = subject.backend.capture_window(window.id, include_frame=False)
    framed = subject.backend.capture_window(window.id, include_frame=True)

    assert client.size == (window.bounds.width, window.bounds.height)
    assert subject.all_of(own_colours(client, subject.rounded), "gtk")
    assert framed.size == (window.frame_bounds.width, window.frame_bounds.height)


def test_captures_show_the_pointer_only_on_a_backend_that_says_so(subject: Subject) -> None:
    area = subject.settled("gtk").bounds
    subject.input.move(area.x + 20, area.y + 20)

    image = subject.backend.capture(area)

    colours = {colour for _, colour in image.getcolors(area.width * area.height) or []}
    says_so = any(d.component == "cursor" for d in subject.backend.diagnostics)
    assert (not subject.all_of(colours, "gtk")) == says_so, colours
    assert subject.backend.captures_show_pointer == says_so  # the recorder draws it where not


@pytest.mark.parametrize("window_id", UNKNOWN_IDS)
def test_unknown_window_ids_are_window_not_found(subject: Subject, window_id: int) -> None:
    for call in (
        lambda: subject.backend.capture_window(window_id, include_frame=False),
        lambda: subject.backend.activate_window(window_id),
    ):
        assert refused(call, ErrorCode.WINDOW_NOT_FOUND) == {"window_id": window_id}


def test_damage_serial_holds_still_on_an_idle_screen(subject: Subject) -> None:
    if any(d.component == "damage" for d in subject.backend.diagnostics):
        # A backend that cannot tell says so, and then no two serials may match (base.py).
        serials = [subject.backend.damage_serial() for _ in range(3)]
        assert len(set(serials)) == len(serials)
        return

    def settled() -> int | None:
        # After a screenshot, as the capture cache reads it: sway's holds still only while captures
        # come (its held frames prove nothing was drawn).
        subject.backend.grab(subject.screen)
        first = subject.backend.damage_serial()
        return first if subject.backend.damage_serial() == first else None

    idle = poll("an idle screen", settled)

    assert subject.backend.damage_serial() == idle


# -- focus, pointer and input ---------------------------------------------------------------------


def focused_kind(subject: Subject, kind: str) -> bool:
    window = subject.settled(kind)
    top = subject.backend.windows()[0]
    return top.id == window.id and top.focused


def test_activate_window_raises_and_focuses_it(subject: Subject) -> None:
    for kind in ("tk", "gtk"):
        subject.backend.activate_window(subject.settled(kind).id)

        poll(f"the {kind} window on top and focused", lambda kind=kind: focused_kind(subject, kind))


def test_pointer_moves_where_it_is_sent(subject: Subject) -> None:
    subject.input.move(700, 30)

    position = subject.backend.cursor_position()

    assert (position.x, position.y, position.display_id) == (700, 30, FIRST_DISPLAY_ID)


def test_a_click_focuses_the_window_under_it_under_a_window_manager(managed_subject: Subject) -> None:
    subject = managed_subject
    for kind in ("tk", "gtk"):
        area = subject.settled(kind).bounds
        subject.input.button(area.x + 10, area.y + 10)

        poll(f"the clicked {kind} window focused", lambda kind=kind: focused_kind(subject, kind))


#: Calls every input device refuses (INVALID_ARGUMENT) before it sends anything, given the screen,
#: and the details it gives.
Refusal = tuple[str, Callable[[InputDevice, Bounds], object], Callable[[Bounds], dict[str, Any]] | None]
REFUSALS: list[Refusal] = [
    (
        "off screen",
        lambda d, s: d.button(s.right + 3000, 10),
        lambda s: {"x": s.right + 3000, "y": 10, "screen": {"width": s.width, "height": s.height}},
    ),
    ("negative", lambda d, s: d.button(10, -1), None),
    ("move to the edge", lambda d, s: d.move(s.right, 0), None),
    ("drag off screen", lambda d, s: d.drag((10, 10), (10, s.bottom + 100)), None),
    (
        "no such button",
        lambda d, s: d.button(10, 10, button="fourth"),  # type: ignore[arg-type]
        lambda s: {"button": "fourth", "allowed": ["left", "middle", "right"]},
    ),
    ("eleven clicks", lambda d, s: d.button(10, 10, count=11), lambda s: {"count": 11}),
    ("not a modifier", lambda d, s: d.button(10, 10, modifiers=["a"]), None),
    ("no drag steps", lambda d, s: d.drag((10, 10), (20, 20), steps=0), lambda s: {"steps": 0}),
    (
        "drag too long",
        lambda d, s: d.drag((10, 10), (20, 20), duration_ms=60_001),
        lambda s: {"duration_ms": 60_001},
    ),
    ("no scroll", lambda d, s: d.scroll(10, 10, "down", 0), lambda s: {"amount": 0}),
    ("too much scroll", lambda d, s: d.scroll(10, 10, "down", 51), lambda s: {"amount": 51}),
    (
        "sideways",
        lambda d, s: d.scroll(10, 10, "sideways", 1),  # type: ignore[arg-type]
        lambda s: {"direction": "sideways", "allowed": ["up", "down", "left", "right"]},
    ),
    ("x without y", lambda d, s: d.scroll(10, None, "down", 1), lambda s: {"x": 10, "y": None}),
    (
        "key typo",
        lambda d, s: d.press_key("Retrun"),
        lambda s: {"key": "Retrun", "suggestions": ["Return"]},
    ),
    ("empty hotkey", lambda d, s: d.hotkey([]), None),
    ("lone modifier", lambda d, s: d.hotkey(["ctrl"]), None),
    (
        "control character",
        lambda d, s: d.type_text("bell\x07"),
        lambda s: {"characters": [{"index": 4, "codepoint": "U+0007"}]},
    ),
    ("slow typing", lambda d, s: d.type_text("x", delay_ms=1001), lambda s: {"delay_ms": 1001}),
    ("too much text", lambda d, s: d.type_text("x" * 100_001), None),
]


@pytest.mark.parametrize(("why", "call", "details"), REFUSALS, ids=[why for why, _, _ in REFUSALS])
def test_bad_input_is_refused_before_anything_is_sent(
    subject: Subject,
    why: str,
    call: Callable[[InputDevice, Bounds], object],
    details: Callable[[Bounds], dict[str, Any]] | None,
) -> None:
    subject.input.move(640, 700)

    given = refused(lambda: call(subject.input, subject.screen))

    if details is not None:
        assert given == details(subject.screen)
    position = subject.backend.cursor_position()
    assert (position.x, position.y) == (640, 700), "a refused call moved the pointer"


def test_a_closed_input_device_fails_structured(subject: Subject) -> None:
    device = subject.new_input()
    device.close()
    device.close()  # closing twice is harmless

    with pytest.raises(DeskrigError) as caught:
        device.move(1, 1)

    assert caught.value.code is ErrorCode.INPUT_FAILED
