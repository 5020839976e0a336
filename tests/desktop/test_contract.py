"""The Desktop contract: the same assertions against the scripted fake and the real backends.

Every test here runs on four subjects: the scripted desktop (``deskrig.desktop.scripted``), the
X11 backend on the session's Xvfb desktops of ``conftest.py``, with openbox and without a window
manager, and the sway backend on a headless sway of its own (``sway_scene.py``). Each shows the
same scene, a green GTK window and a red Tk window, apart; the scripted one is decorated like
openbox, sway's are floating (undecorated, as in a rig). A fake that passes here behaves like the real thing where the tool-layer
tests (tests/tools) rely on it, so it cannot drift unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tests.polling import poll

from deskrig.desktop.base import DesktopBackend, InputDevice
from deskrig.desktop.scripted import MANAGED_FRAME, ScriptedBackend, ScriptedDesktop
from deskrig.desktop.scripted_input import ScriptedInput
from deskrig.desktop.sway import PointerState, SwayBackend, SwaySockets
from deskrig.desktop.sway_input import SwayInput
from deskrig.desktop.x11 import X11Backend
from deskrig.desktop.x11_input import X11Input
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import FIRST_DISPLAY_ID, Bounds, WindowInfo

from .conftest import SCREEN, Desktop
from .sway_scene import SwayScene, sway_scene
from .test_x11 import colours_at

RGB = tuple[int, int, int]
#: The scene of conftest.py's desktops: where the standing apps are and what colour they paint.
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


def scripted_subject() -> Subject:
    world = ScriptedDesktop(frame=MANAGED_FRAME)
    windows = {
        kind: world.add_window(f"{kind}-scripted", bounds, colour, app=kind, pid=1000 + n)
        for n, (kind, (colour, bounds)) in enumerate(SCENE.items())
    }
    backend = ScriptedBackend(world)

    def settled(kind: str) -> WindowInfo:
        return next(w for w in backend.windows() if w.id == windows[kind].id)

    return Subject(
        name="scripted",
        backend=backend,
        input=ScriptedInput(world),
        colours={kind: colour for kind, (colour, _) in SCENE.items()},
        settled=settled,
        new_input=lambda: ScriptedInput(world),
    )


@pytest.fixture(scope="module")
def x11_devices() -> Iterator[dict[str, tuple[X11Backend, X11Input]]]:
    """One backend and one input device per X desktop, opened on first use."""
    opened: dict[str, tuple[X11Backend, X11Input]] = {}
    yield opened
    for backend, device in opened.values():
        device.close()
        backend.close()


def x11_subject(desktop: Desktop, devices: dict[str, tuple[X11Backend, X11Input]]) -> Subject:
    if desktop.mode not in devices:
        devices[desktop.mode] = (X11Backend(desktop.display), X11Input(desktop.display))
    backend, device = devices[desktop.mode]
    apps = {app.kind: app for app in desktop.apps}
    return Subject(
        name=desktop.mode,
        backend=backend,
        input=device,
        colours={kind: app.color for kind, app in apps.items()},
        settled=lambda kind: desktop.settled_window(backend, apps[kind]),
        new_input=lambda: X11Input(desktop.display),
    )


@pytest.fixture(scope="module")
def sway_devices(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SwayScene, SwayBackend, SwayInput]]:
    """The scene on a sway of its own, with the backend and input device a server would open."""
    with sway_scene(tmp_path_factory.mktemp("contract-sway"), SCENE) as scene:
        sockets, pointer = SwaySockets.from_environment(scene.sway.env), PointerState()
        backend, device = SwayBackend(sockets, pointer), SwayInput(sockets, pointer)
        yield scene, backend, device
        device.close()
        backend.close()


def sway_subject(scene: SwayScene, backend: SwayBackend, device: SwayInput) -> Subject:
    def settled(kind: str) -> WindowInfo:
        pid, bounds = scene.apps[kind].pid, SCENE[kind][1]
        return poll(
            f"the {kind} window listed where it was placed",
            lambda: next((w for w in backend.windows() if w.pid == pid and w.bounds == bounds), None),
        )

    sockets = SwaySockets.from_environment(scene.sway.env)
    return Subject(
        name="sway",
        backend=backend,
        input=device,
        colours={kind: app.color for kind, app in scene.apps.items()},
        settled=settled,
        new_input=lambda: SwayInput(sockets, PointerState()),
    )


def make_subject(request: pytest.FixtureRequest) -> Subject:
    if request.param == "scripted":
        return scripted_subject()
    if request.param == "sway":
        return sway_subject(*request.getfixturevalue("sway_devices"))
    desktop = request.getfixturevalue("openbox_desktop" if request.param == "openbox" else "bare_desktop")
    return x11_subject(desktop, request.getfixturevalue("x11_devices"))


@pytest.fixture(params=["scripted", "openbox", "no_wm", "sway"])
def subject(request: pytest.FixtureRequest) -> Subject:
    return make_subject(request)


@pytest.fixture(params=["scripted", "openbox", "sway"])
def managed_subject(request: pytest.FixtureRequest) -> Subject:
    """The subjects with a click-to-focus window manager (the scripted desktop acts as one)."""
    return make_subject(request)


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
    assert all(d.scale == 1.0 and d.name for d in displays)
    assert (screen.x, screen.y) == (0, 0)
    assert all(screen.intersection(d.bounds) == d.bounds for d in displays)
    assert screen == Bounds(x=0, y=0, width=SCREEN[0], height=SCREEN[1])


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

    assert (screen.mode, screen.size) == ("RGB", SCREEN)
    for kind, window in listed.items():
        assert colours_at(screen, window.bounds) == {subject.colours[kind]}, kind


def test_region_capture_is_clipped_to_the_screen_and_refused_outside_it(subject: Subject) -> None:
    area = subject.settled("tk").bounds

    part = subject.backend.capture(Bounds(x=area.x - 5, y=area.y + 10, width=30, height=20))
    corner = subject.backend.capture(Bounds(x=SCREEN[0] - 10, y=SCREEN[1] - 4, width=50, height=50))
    outside = Bounds(x=SCREEN[0] + 5, y=0, width=10, height=10)
    details = refused(lambda: subject.backend.capture(outside), ErrorCode.INVALID_REGION)

    assert part.size == (30, 20)
    assert part.getpixel((4, 0)) != subject.colours["tk"] and part.getpixel((5, 0)) == subject.colours["tk"]
    assert corner.size == (10, 4)
    assert details == {"region": outside.model_dump(), "screen": subject.backend.screen_bounds().model_dump()}


def test_window_capture_is_its_own_pixels_with_or_without_the_frame(subject: Subject) -> None:
    window = subject.settled("gtk")
    assert window.frame_bounds is not None

    client = subject.backend.capture_window(window.id, include_frame=False)
    framed = subject.backend.capture_window(window.id, include_frame=True)

    assert client.size == (window.bounds.width, window.bounds.height)
    assert client.getcolors() == [(window.bounds.width * window.bounds.height, subject.colours["gtk"])]
    assert framed.size == (window.frame_bounds.width, window.frame_bounds.height)


def test_captures_show_the_pointer_only_on_a_backend_that_says_so(subject: Subject) -> None:
    area = subject.settled("gtk").bounds
    subject.input.move(area.x + 20, area.y + 20)

    image = subject.backend.capture(area)

    colours = {colour for _, colour in image.getcolors(area.width * area.height) or []}
    says_so = any(d.component == "cursor" for d in subject.backend.diagnostics)
    assert (colours != {subject.colours["gtk"]}) == says_so, colours


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


#: Calls every input device refuses (INVALID_ARGUMENT) before it sends anything, and the details it gives.
REFUSALS: list[tuple[str, Callable[[InputDevice], object], dict[str, Any] | None]] = [
    (
        "off screen",
        lambda d: d.button(5000, 10),
        {"x": 5000, "y": 10, "screen": {"width": 1280, "height": 800}},
    ),
    ("negative", lambda d: d.button(10, -1), None),
    ("move to the edge", lambda d: d.move(SCREEN[0], 0), None),
    ("drag off screen", lambda d: d.drag((10, 10), (10, 900)), None),
    (
        "no such button",
        lambda d: d.button(10, 10, button="fourth"),
        {"button": "fourth", "allowed": ["left", "middle", "right"]},
    ),
    ("eleven clicks", lambda d: d.button(10, 10, count=11), {"count": 11}),
    ("not a modifier", lambda d: d.button(10, 10, modifiers=["a"]), None),
    ("no drag steps", lambda d: d.drag((10, 10), (20, 20), steps=0), {"steps": 0}),
    ("drag too long", lambda d: d.drag((10, 10), (20, 20), duration_ms=60_001), {"duration_ms": 60_001}),
    ("no scroll", lambda d: d.scroll(10, 10, "down", 0), {"amount": 0}),
    ("too much scroll", lambda d: d.scroll(10, 10, "down", 51), {"amount": 51}),
    (
        "sideways",
        lambda d: d.scroll(10, 10, "sideways", 1),
        {"direction": "sideways", "allowed": ["up", "down", "left", "right"]},
    ),
    ("x without y", lambda d: d.scroll(10, None, "down", 1), {"x": 10, "y": None}),
    ("key typo", lambda d: d.press_key("Retrun"), {"key": "Retrun", "suggestions": ["Return"]}),
    ("empty hotkey", lambda d: d.hotkey([]), None),
    ("lone modifier", lambda d: d.hotkey(["ctrl"]), None),
    (
        "control character",
        lambda d: d.type_text("bell\x07"),
        {"characters": [{"index": 4, "codepoint": "U+0007"}]},
    ),
    ("slow typing", lambda d: d.type_text("x", delay_ms=1001), {"delay_ms": 1001}),
    ("too much text", lambda d: d.type_text("x" * 100_001), None),
]


@pytest.mark.parametrize(("why", "call", "details"), REFUSALS, ids=[why for why, _, _ in REFUSALS])
def test_bad_input_is_refused_before_anything_is_sent(
    subject: Subject, why: str, call: Callable[[InputDevice], object], details: dict[str, Any] | None
) -> None:
    subject.input.move(640, 700)

    given = refused(lambda: call(subject.input))

    if details is not None:
        assert given == details
    position = subject.backend.cursor_position()
    assert (position.x, position.y) == (640, 700), "a refused call moved the pointer"


def test_a_closed_input_device_fails_structured(subject: Subject) -> None:
    device = subject.new_input()
    device.close()
    device.close()  # closing twice is harmless

    with pytest.raises(DeskrigError) as caught:
        device.move(1, 1)

    assert caught.value.code is ErrorCode.INPUT_FAILED
