"""Where sway's windows are and what their captures show, on a sway of the module's own: a green
GTK window tiled alone, and windows the tests add beside or over it.

A covered window's capture must be its own pixels, never another window's: the floating windows
over it are made transparent for the copy's frame and opaque again after, in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from i3ipc import Connection
from PIL import Image, ImageDraw
from tests.desktop.conftest import SCREEN, FixtureApp, stop_process
from tests.desktop.sway_scene import float_at, launch_color_app, run_commands
from tests.polling import poll
from tests.sway.conftest import window_of
from tests.sway.swayproc import SwaySession, start_sway

from deskrig.desktop import Desktop, open_desktop
from deskrig.desktop.sway import _views, close_ipc, content_bounds
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, CursorPosition, WindowInfo
from deskrig.observation import Observation
from deskrig.security import WindowBlocklist

GREEN, RED, BLUE = (0, 200, 0), (200, 0, 0), (0, 0, 200)
#: Painted over the pointer's picture to leave it out of a colour check; no window shows it.
MASK = (1, 2, 3)
#: The default cursor theme's pointer, with room to spare.
CURSOR_SIZE = 32


@dataclass
class Scene:
    sway: SwaySession
    desktop: Desktop
    under: FixtureApp

    def window(self, app: FixtureApp) -> WindowInfo:
        return window_of(self.desktop, app)


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    sway = start_sway(tmp_path_factory.mktemp("sway-windows"), SCREEN)
    under = launch_color_app(sway, sway.runtime_dir, "gtk", GREEN, (320, 220), title="under")
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in sway.env.items():
                patch.setenv(name, value)
            desktop = open_desktop("sway")
        scene = Scene(sway, desktop, under)
        poll(
            "the green window tiled over the whole screen",
            lambda: scene.window(under).bounds.width == SCREEN[0],
        )
        yield scene
        desktop.close()
    finally:
        stop_process(under.proc)
        sway.stop()


@pytest.fixture
def extra(scene: Scene) -> Iterator[list[FixtureApp]]:
    """Apps a test adds to the scene, stopped when it ends (the green window fills the screen again)."""
    apps: list[FixtureApp] = []
    yield apps
    for app in apps:
        stop_process(app.proc)
    poll("the green window alone again", lambda: scene.window(scene.under).bounds.width == SCREEN[0])


def colours(image: Image.Image, cursor: CursorPosition | None = None) -> set[tuple[int, int, int]]:
    """The colours in ``image``; with ``cursor`` (where the pointer is, in the image's pixels),
    those outside the pointer's picture, which headless sway draws into every frame (README)."""
    if cursor is not None:
        image = image.copy()
        ImageDraw.Draw(image).rectangle(
            (cursor.x - 4, cursor.y - 4, cursor.x + CURSOR_SIZE, cursor.y + CURSOR_SIZE), fill=MASK
        )
    return {colour for _, colour in image.getcolors(image.width * image.height) or []} - {MASK}


def red_floating_window(scene: Scene, extra: list[FixtureApp], title: str, placed: Bounds) -> FixtureApp:
    """A red window floating at ``placed`` over the green one, once sway draws it there."""
    float_at(scene.sway, title, placed)
    app = launch_color_app(
        scene.sway, scene.sway.runtime_dir, "gtk", RED, (placed.width, placed.height), title=title
    )
    extra.append(app)
    poll("the red window floating over the green one", lambda: scene.window(app).bounds == placed)
    poll("the green window under it", lambda: scene.window(scene.under).bounds.width == SCREEN[0])
    corner = Bounds(x=placed.x, y=placed.y, width=1, height=1)
    poll("the red window drawn there", lambda: scene.desktop.capture(corner).getpixel((0, 0)) == RED)
    return app


def test_a_window_under_a_floating_one_captures_its_own_pixels_and_the_floating_one_stays(
    scene: Scene, extra: list[FixtureApp]
) -> None:
    placed = Bounds(x=200, y=150, width=300, height=200)
    over = red_floating_window(scene, extra, "over", placed)
    under = scene.window(scene.under)
    before = scene.desktop.windows()
    # The pointer over the floating window, where the window under it is to be seen through it.
    scene.desktop.with_input(lambda device: device.move(placed.x + 40, placed.y + 40))
    cursor = scene.desktop.cursor_position()  # the green window fills the screen: its pixels are the screen's
    inside = CursorPosition(x=40, y=40)  # in the red window's own pixels

    captured = scene.desktop.grab_window(under.id, include_frame=False)
    pixels = Observation(scene.desktop, WindowBlocklist([])).window_pixels(under)

    assert colours(captured.image, cursor) == {GREEN}
    assert captured.method == "screen_uncovered"
    assert colours(pixels.image, cursor) == {GREEN}
    assert pixels.window_capture == "screen_uncovered"
    # The floating window is back where it was, drawn, and nothing moved or took the focus.
    assert scene.desktop.windows() == before
    again = scene.desktop.capture(scene.desktop.screen_bounds())
    assert colours(again.crop((placed.x, placed.y, placed.right, placed.bottom)), inside) == {RED}
    own = scene.desktop.grab_window(scene.window(over).id, include_frame=False)
    assert (colours(own.image, inside), own.method) == ({RED}, "screen")


def test_a_focused_tiled_window_is_listed_under_the_floating_one_and_recorded_without_it(
    scene: Scene, extra: list[FixtureApp]
) -> None:
    placed = Bounds(x=300, y=200, width=300, height=200)
    cover = red_floating_window(scene, extra, "cover", placed)
    scene.desktop.activate_window(scene.window(scene.under).id)
    poll("the green window focused", lambda: scene.window(scene.under).focused)
    corner = Bounds(x=placed.x, y=placed.y, width=1, height=1)
    poll("the red window still drawn over it", lambda: scene.desktop.capture(corner).getpixel((0, 0)) == RED)
    scene.desktop.with_input(lambda device: device.move(placed.x + 40, placed.y + 40))

    windows = scene.desktop.windows()
    seen = Observation(scene.desktop, WindowBlocklist([])).window_as_seen(scene.window(scene.under))

    assert [w.pid for w in windows] == [cover.pid, scene.under.pid]
    assert colours(seen.image, scene.desktop.cursor_position()) == {GREEN}


def test_a_window_sway_does_not_draw_is_refused_not_shown_as_what_is_there(
    scene: Scene, extra: list[FixtureApp]
) -> None:
    away = launch_color_app(scene.sway, scene.sway.runtime_dir, "gtk", BLUE, (300, 200), title="away")
    extra.append(away)
    window = scene.window(away)
    run_commands(scene.sway, f"[con_id={window.id}] move to workspace 2")
    poll(
        "the green window alone on the shown workspace",
        lambda: scene.window(scene.under).bounds.width == SCREEN[0],
    )

    with pytest.raises(DeskrigError) as caught:
        scene.desktop.capture_window(window.id, include_frame=False)

    assert caught.value.code is ErrorCode.CAPTURE_FAILED
    assert caught.value.remediation


def sway_shows(scene: Scene, app: FixtureApp) -> tuple[Bounds, bool] | None:
    """Where ``app``'s window is and whether it has the focus, as sway itself shows it to a
    connection of the test's own."""
    ipc = Connection(socket_path=scene.sway.env["SWAYSOCK"])
    try:
        tree = ipc.get_tree().ipc_data
    finally:
        close_ipc(ipc)
    view = next((view for view, _ in _views(tree) if view.get("pid") == app.pid), None)
    return None if view is None else (content_bounds(view), bool(view["focused"]))


def drawn_at_its_size(scene: Scene, app: FixtureApp, colour: tuple[int, int, int]) -> bool:
    """Whether ``app``'s window shows ``colour`` in its bottom-right corner where sway shows the
    window: the client has drawn (committed) at the size sway last gave it."""
    shown = sway_shows(scene, app)
    if shown is None:
        return False
    corner = Bounds(x=shown[0].right - 8, y=shown[0].bottom - 8, width=8, height=8)
    cursor = scene.desktop.cursor_position()
    inside = CursorPosition(x=cursor.x - corner.x, y=cursor.y - corner.y)
    return colours(scene.desktop.capture(corner), inside) == {colour}


def test_the_window_list_shows_every_change_sway_has_made_at_once(
    scene: Scene, extra: list[FixtureApp]
) -> None:
    """Whatever sway shows before a listing starts is in it, never a listing from before: sway
    1.7 sends no IPC event for a move, a resize or an output's new mode, so a list kept from its
    events would fail this (one did, at the move). Each change is awaited as sway shows it to a
    connection of the test's own, then the desktop is listed once, without polling.

    The new window is floated and resized only once its client has drawn at the size of its tile:
    a commit at that size arriving after the resize (the client was slow to answer the tile's
    configure, as under load) is taken by sway 1.7 as the floating window's own new size, so sway
    itself would show the resize, then the tile's size again (a listing between is right)."""
    app = launch_color_app(scene.sway, scene.sway.runtime_dir, "gtk", BLUE, (300, 200), title="fresh")
    extra.append(app)

    def listed_once(what: str, shown: Callable[[tuple[Bounds, bool] | None], bool]) -> WindowInfo | None:
        poll(f"sway showing {what}", lambda: shown(sway_shows(scene, app)))
        window = next((w for w in scene.desktop.windows() if w.pid == app.pid), None)
        listed = None if window is None else (window.bounds, window.focused)
        assert shown(listed), f"listed {listed!r} after sway showed {what}"
        return window

    opened = listed_once("the new window", lambda shown: shown is not None)
    assert opened is not None
    poll("the new window drawn at its tile's size", lambda: drawn_at_its_size(scene, app, BLUE))
    placed = Bounds(x=120, y=90, width=360, height=240)
    run_commands(
        scene.sway, f"[con_id={opened.id}] floating enable, resize set {placed.width} {placed.height}"
    )
    listed_once(
        "the window resized",
        lambda shown: (
            shown is not None and (shown[0].width, shown[0].height) == (placed.width, placed.height)
        ),
    )
    run_commands(scene.sway, f"[con_id={opened.id}] move absolute position {placed.x} {placed.y}")
    listed_once("the window moved", lambda shown: shown is not None and shown[0] == placed)
    run_commands(scene.sway, f"[con_id={scene.window(scene.under).id}] focus")
    listed_once("the window unfocused", lambda shown: shown is not None and not shown[1])
    run_commands(scene.sway, f"[con_id={opened.id}] kill")
    listed_once("the window closed", lambda shown: shown is None)
