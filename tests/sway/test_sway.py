"""sway-only facts of the sway backend, against a real headless sway with GTK apps under native
Wayland: attaching, the headless output, tiling, capture with the cursor drawn in, the private
session. Input, and accessibility coordinates, run on every backend in tests/desktop."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from tests.desktop.conftest import FixtureApp
from tests.polling import poll
from tests.server.rigproc import DESKRIG
from tests.sway.conftest import COLOR, window_of
from tests.sway.swayproc import SwaySession

from deskrig.desktop import Desktop, choose_backend, open_desktop
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Bounds, Point, WindowInfo


def test_auto_picks_sway_when_its_sockets_are_set_and_x11_otherwise() -> None:
    sway_env = {"WAYLAND_DISPLAY": "wayland-1", "SWAYSOCK": "/run/sway.sock", "DISPLAY": ":0"}
    assert choose_backend("auto", env=sway_env) == "sway"  # Xwayland's DISPLAY is sway's own
    assert choose_backend("auto", env={"WAYLAND_DISPLAY": "wayland-1", "DISPLAY": ":0"}) == "x11"


def test_attach_without_sway_sockets_is_a_structured_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from deskrig.desktop import open_desktop

    monkeypatch.delenv("SWAYSOCK", raising=False)
    with pytest.raises(DeskrigError) as caught:
        open_desktop("sway")
    assert caught.value.code == ErrorCode.DISPLAY_NOT_FOUND


def test_the_headless_output_is_the_one_primary_display(sway_desktop: Desktop) -> None:
    (display,) = sway_desktop.displays()
    assert (display.id, display.name, display.primary, display.scale) == (1, "HEADLESS-1", True, 1.0)
    assert display.bounds == Bounds(x=0, y=0, width=1280, height=800)
    assert sway_desktop.screen_bounds() == display.bounds
    assert sway_desktop.backend_name == "sway"


def test_windows_are_sways_views_with_app_id_pid_and_tiled_bounds(
    sway_desktop: Desktop, color_app: FixtureApp, form_app: FixtureApp
) -> None:
    halves = {Bounds(x=0, y=0, width=640, height=800), Bounds(x=640, y=0, width=640, height=800)}

    def tiled() -> tuple[WindowInfo, WindowInfo] | None:
        # Listed one after the other, the first may be read before sway tiled the second beside it.
        pair = window_of(sway_desktop, color_app), window_of(sway_desktop, form_app)
        return pair if {w.bounds for w in pair} == halves else None

    color, form = poll("the two windows tiled side by side", tiled)
    assert (color.title, color.app) == ("sway-color", "gtk_color.py")
    assert (form.title, form.app) == ("sway-form", "gtk_form.py")
    # Tiled side by side, no borders: the two halves of the screen, and nothing else listed.
    windows = sway_desktop.windows()
    assert sorted(w.z_order for w in windows) == list(range(len(windows)))
    assert [w.focused for w in windows].count(True) == 1
    assert windows[0].focused  # z-order is focus order: the focused window is on top


def test_focus_moves_the_window_to_the_top(
    sway_desktop: Desktop, color_app: FixtureApp, form_app: FixtureApp
) -> None:
    for app in (color_app, form_app):
        window = window_of(sway_desktop, app)
        sway_desktop.activate_window(window.id)
        top = sway_desktop.windows()[0]
        assert (top.id, top.focused, top.z_order) == (window.id, True, 0)
        assert window_of(sway_desktop, app).id == window.id  # ids are stable


def test_screen_and_window_capture_show_the_apps_own_colour(
    sway_desktop: Desktop, color_app: FixtureApp
) -> None:
    window = window_of(sway_desktop, color_app)
    # Headless sway draws its cursor into the output, so copies show it (X11's leave it out). Sway
    # tells no client where the pointer is, so the backend's cursor_position is where it last moved
    # it, and a test before may have moved it elsewhere through another desktop on the same sway:
    # it is moved there again (off and back: a move to where it is believed to be may send nothing).
    believed = sway_desktop.cursor_position()
    for x in (believed.x + 1, believed.x):
        sway_desktop.with_input(lambda device, x=x: device.move(x, believed.y))
    screen = sway_desktop.capture(sway_desktop.screen_bounds())
    assert screen.size == (1280, 800)
    middle = (window.bounds.x + window.bounds.width // 2, window.bounds.y + window.bounds.height // 2)
    assert screen.getpixel(middle) == COLOR
    own = sway_desktop.capture_window(window.id)
    assert own.size == (window.bounds.width, window.bounds.height)
    cursor = sway_desktop.cursor_position()
    near_cursor = Bounds(x=cursor.x - 32, y=cursor.y - 32, width=64, height=64)
    odd = [
        (x, y)
        for x in range(own.width)
        for y in range(own.height)
        if own.getpixel((x, y)) != COLOR
        and not near_cursor.contains(window.bounds.x + x, window.bounds.y + y)
    ]
    assert odd == []
    region = sway_desktop.capture(Bounds(x=middle[0] - 5, y=middle[1] - 5, width=10, height=10))
    assert region.getcolors() == [(100, COLOR)]
    # Tiled, its neighbour does not show in it; floating windows over it are hidden for the copy
    # (test_sway_windows.py), and the diagnostics say how captures are made.
    assert any("floating" in d.message for d in sway_desktop.diagnostics if d.component == "capture")


def test_unknown_windows_and_regions_off_screen_are_refused_with_the_x11_error_codes(
    sway_desktop: Desktop,
) -> None:
    """Refused input is tests/desktop/test_input.py's, on every backend."""
    cases = [
        (lambda: sway_desktop.capture_window(987654), ErrorCode.WINDOW_NOT_FOUND),
        (lambda: sway_desktop.activate_window(987654), ErrorCode.WINDOW_NOT_FOUND),
        (lambda: sway_desktop.capture(Bounds(x=2000, y=2000, width=5, height=5)), ErrorCode.INVALID_REGION),
    ]
    for call, code in cases:
        with pytest.raises(DeskrigError) as caught:
            call()
        assert caught.value.code == code


def test_the_sway_session_is_private_and_not_root(sway: SwaySession) -> None:
    stat = sway.runtime_dir.stat()
    assert stat.st_mode & 0o777 == 0o700
    assert stat.st_uid != 0


def test_doctor_attaches_to_sway_from_its_environment(sway: SwaySession, form_app: FixtureApp) -> None:
    """`--backend auto` with SWAYSOCK and WAYLAND_DISPLAY set (and an X DISPLAY too) picks sway."""
    env = {k: v for k, v in os.environ.items() if k not in ("SWAYSOCK", "WAYLAND_DISPLAY")}
    out = subprocess.run(
        [*DESKRIG, "doctor"],
        env={**env, **sway.env, "DISPLAY": ":999"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["backend"] == "sway"
    assert [d["name"] for d in report["displays"]] == ["HEADLESS-1"]
    assert report["windows"] >= 2


def test_typing_as_the_first_key_event_of_a_connection_lands(
    sway: SwaySession, form_app: FixtureApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh attach whose first keyboard use is type_text (a rig's first `type_text` call): sway
    ended the connection for the modifier reset sent before the keyboard had a keymap."""
    for name, value in sway.env.items():
        monkeypatch.setenv(name, value)
    with open_desktop("sway") as desktop:
        first = desktop.with_input(lambda device: device.type_text("ok"))
        assert first.chars == 2
        desktop.with_input(lambda device: device.press_key("BackSpace"))


#: Keys pressed after a button press (a held key first, then one pressed with it), and whether
#: the press still says where a popup opened.
KEYS_AFTER_A_PRESS = [
    ((), "shift+F10", False),
    ((), "Menu", False),
    (("Shift_L",), "F10", False),
    ((), "shift", True),
    ((), "F10", True),
    ((), "Down", True),
    ((), "Escape", True),
    (("Control_L",), "a", True),
]


@pytest.mark.parametrize(
    ("held", "key", "kept"), KEYS_AFTER_A_PRESS, ids=["+".join([*h, k]) for h, k, _ in KEYS_AFTER_A_PRESS]
)
def test_only_a_key_that_opens_a_context_menu_forgets_the_press(
    sway_desktop: Desktop, color_app: FixtureApp, held: tuple[str, ...], key: str, kept: bool
) -> None:
    """The keyboard opens a context menu at its focus with Shift+F10 or the Menu key: then
    a11y/placement.py must not place it at the press. Any other key leaves the press: a context
    menu it opened is still where it was."""
    window = window_of(sway_desktop, color_app)
    x, y = window.bounds.x + 30, window.bounds.y + 30
    was = sway_desktop.cursor_position()
    try:
        sway_desktop.with_input(lambda device: device.button(x, y))
        assert sway_desktop.last_press() == Point(x=x, y=y)
        for name in held:
            sway_desktop.with_input(lambda device, name=name: device.key_down(name))
        sway_desktop.with_input(lambda device: device.press_key(key))
        assert sway_desktop.last_press() == (Point(x=x, y=y) if kept else None)
    finally:  # sway's captures show the pointer: not left over the colour other tests look at
        for name in reversed(held):
            sway_desktop.with_input(lambda device, name=name: device.key_up(name))
        sway_desktop.with_input(lambda device: device.move(was.x, was.y))
