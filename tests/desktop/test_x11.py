"""The X11 backend against real Xvfb servers, with and without openbox, and real GTK/Tk apps."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from tests.contract import colours_at
from tests.frames import libjpeg_restart_encode
from tests.polling import poll
from Xlib import X, Xatom
from Xlib.display import Display
from Xlib.ext import randr
from Xlib.protocol import event, rq
from Xlib.protocol.display import Display as XlibConnection

from deskrig import imaging
from deskrig.desktop.base import Desktop as DesktopFacade
from deskrig.desktop.x11 import LAYOUT_MAX_AGE_S, X11Backend
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.grabs import Grab
from deskrig.model import Bounds
from deskrig.observation import Observation
from deskrig.security import WindowBlocklist

from .conftest import SCREEN, Desktop, FixtureApp, start_xvfb, stop_process
from .screen_loops import READERS, change_seen_after_another_reader

BLUE = (0, 0, 220)
YELLOW = (230, 230, 0)


def test_displays_are_the_randr_monitors(x11_backend: X11Backend) -> None:
    displays = x11_backend.displays()

    assert len(displays) == 1
    (only,) = displays
    assert (only.id, only.primary, only.scale) == (1, True, 1.0)  # numbered from 1, as mss does
    assert only.name  # Xvfb names its one monitor "screen"
    assert only.bounds == Bounds(x=0, y=0, width=SCREEN[0], height=SCREEN[1])
    assert x11_backend.screen_bounds() == only.bounds


class SetMonitor(rq.Request):
    """RandR 1.5's SetMonitor, what ``xrandr --setmonitor`` sends (python-xlib's own cannot pack
    its monitor)."""

    _request = rq.Struct(
        rq.Card8("opcode"),
        rq.Opcode(43),
        rq.RequestLength(),
        rq.Window("window"),
        rq.Card32("name"),
        rq.Bool("primary"),
        rq.Bool("automatic"),
        rq.LengthOf("crtcs", 2),
        rq.Int16("x"),
        rq.Int16("y"),
        rq.Card16("width_in_pixels"),
        rq.Card16("height_in_pixels"),
        rq.Card32("width_in_millimeters"),
        rq.Card32("height_in_millimeters"),
        rq.List("crtcs", rq.Card32Obj),
    )


@pytest.fixture
def sent_requests(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the X requests python-xlib sends from the test's thread, in order."""
    caller = threading.get_ident()
    sent: list[str] = []
    send = XlibConnection.send_request

    def counted(self: XlibConnection, request: Any, wait_for_response: bool) -> None:
        if threading.get_ident() == caller:
            sent.append(type(request).__name__)
        send(self, request, wait_for_response)

    monkeypatch.setattr(XlibConnection, "send_request", counted)
    return sent


def test_the_pointer_is_read_in_one_request(x11_backend: X11Backend, sent_requests: list[str]) -> None:
    """The recorder reads the pointer up to 30 times a second: the display layout that places it
    is not read again each time."""
    sent = sent_requests
    reads, started = 20, time.monotonic()
    for _ in range(reads):
        x11_backend.cursor_position()
    elapsed = time.monotonic() - started

    layout_reads = 1 + int(elapsed // LAYOUT_MAX_AGE_S)  # on a slow machine the layout ages
    assert sent.count("QueryPointer") == reads
    assert len(sent) - reads <= layout_reads, sent  # RandR's monitors


def test_the_display_layout_is_one_request(x11_backend: X11Backend, sent_requests: list[str]) -> None:
    """RandR's version and the monitors' names are asked once per connection: each ``displays()``
    after the first is one GetMonitors."""
    first = x11_backend.displays()
    sent_requests.clear()
    for _ in range(3):
        assert x11_backend.displays() == first
    assert sent_requests == ["GetMonitors"] * 3


def test_the_pointer_display_follows_monitors_defined_while_running(tmp_path: Path) -> None:
    """RandR announces no change when monitors are defined (``xrandr --setmonitor``): the pointer's
    display follows within the layout's age, and at once after ``displays()``."""
    xvfb, display = start_xvfb(tmp_path)
    try:
        impl = X11Backend(display)
        xlib = Display(display)
        try:
            root = xlib.screen().root
            root.warp_pointer(900, 100)
            xlib.sync()
            assert impl.cursor_position().display_id == 1  # the one monitor, the whole screen
            SetMonitor(
                display=xlib.display,
                opcode=xlib.display.get_extension_major("RANDR"),
                window=root,
                name=xlib.intern_atom("LEFT"),
                primary=True,
                automatic=False,
                x=0,
                y=0,
                width_in_pixels=SCREEN[0] // 2,
                height_in_pixels=SCREEN[1],
                width_in_millimeters=0,
                height_in_millimeters=0,
                crtcs=[],
            )
            xlib.sync()

            # LEFT is the primary now, so display 1; the whole screen's monitor is display 2.
            poll("the pointer to be on display 2", lambda: impl.cursor_position().display_id == 2)
            assert [d.bounds.width for d in impl.displays()] == [SCREEN[0] // 2, SCREEN[0]]
            root.warp_pointer(100, 100)
            xlib.sync()
            assert impl.cursor_position().display_id == 1
        finally:
            xlib.close()
            impl.close()
    finally:
        stop_process(xvfb)


@pytest.mark.parametrize("kind", ["gtk", "tk"])
def test_window_reports_title_pid_and_client_bounds(
    desktop: Desktop, x11_backend: X11Backend, kind: str
) -> None:
    app = desktop.gtk if kind == "gtk" else desktop.tk

    window = desktop.settled_window(x11_backend, app)

    assert window.title == app.title
    assert window.app == ("Tk" if kind == "tk" else "Gtk_color.py")
    assert window.pid == app.pid
    assert window.frame_bounds is not None
    assert window.frame_bounds.intersection(window.bounds) == window.bounds
    if desktop.managed:
        # openbox's title bar is outside the client bounds, in the frame.
        assert window.frame_bounds.height > window.bounds.height
    else:
        assert window.frame_bounds == window.bounds
    assert not window.minimized


def test_tk_pid_comes_from_x_resource(desktop: Desktop, x11_backend: X11Backend) -> None:
    window = desktop.settled_window(x11_backend, desktop.tk)
    client = desktop.xlib.create_resource_object("window", window.id)

    assert client.get_full_property(desktop.xlib.intern_atom("_NET_WM_PID"), Xatom.CARDINAL) is None
    assert window.pid == desktop.tk.pid


def test_screen_capture_shows_each_app_where_it_says_it_is(desktop: Desktop, x11_backend: X11Backend) -> None:
    for app in desktop.apps:
        desktop.settled_window(x11_backend, app)

    screen = x11_backend.capture(x11_backend.screen_bounds())

    assert screen.mode == "RGB"
    assert screen.size == SCREEN
    for app in desktop.apps:
        assert colours_at(screen, app.geometry()) == {app.color}, app.title
        # The pixel just left of the client area is not the app's (decoration or background).
        outside = app.geometry()
        assert screen.getpixel((outside.x - 1, outside.y + outside.height // 2)) != app.color


def test_region_capture_is_the_requested_part_of_the_screen(
    desktop: Desktop, x11_backend: X11Backend
) -> None:
    area = desktop.settled_window(x11_backend, desktop.tk).bounds
    region = Bounds(x=area.x - 5, y=area.y + 10, width=30, height=20)

    image = x11_backend.capture(region)

    assert image.size == (30, 20)
    assert image.getpixel((4, 0)) != desktop.tk.color
    assert image.getpixel((5, 0)) == desktop.tk.color
    assert image.getpixel((29, 19)) == desktop.tk.color


def test_region_capture_is_clipped_to_the_screen(x11_backend: X11Backend) -> None:
    image = x11_backend.capture(Bounds(x=SCREEN[0] - 10, y=SCREEN[1] - 4, width=50, height=50))

    assert image.size == (10, 4)
    with pytest.raises(DeskrigError) as excinfo:
        x11_backend.capture(Bounds(x=SCREEN[0] + 5, y=0, width=10, height=10))
    assert excinfo.value.code is ErrorCode.INVALID_REGION


def test_a_screen_grab_is_encoded_from_its_bgrx_rows_pixel_for_pixel(
    desktop: Desktop, x11_backend: X11Backend
) -> None:
    """An odd-sized region across the Tk window's edge: the PNG decodes to exactly the grabbed
    pixels, the JPEG to the same picture, and a blocked window is black in both."""
    tk = desktop.settled_window(x11_backend, desktop.tk)
    region = Bounds(x=tk.bounds.x - 7, y=tk.bounds.y + 3, width=37, height=21)
    frame = x11_backend.grab(region)
    assert frame.bgrx is not None, "X11 hands over the grab as it came"
    grabbed = Image.frombytes("RGB", frame.size, bytes(frame.bgrx), "raw", "BGRX")
    assert grabbed.getpixel((7, 0)) == desktop.tk.color

    png = Image.open(io.BytesIO(imaging.encode(frame, "png")))
    assert (png.mode, png.size) == ("RGB", (37, 21))
    assert png.tobytes() == grabbed.tobytes()
    jpeg = Image.open(io.BytesIO(imaging.encode(frame, "jpeg")))
    assert jpeg.size == (37, 21)
    assert max(abs(a - b) for a, b in zip(jpeg.getpixel((30, 15)), desktop.tk.color, strict=True)) < 12

    observation = Observation(DesktopFacade(x11_backend), WindowBlocklist([f"^{desktop.tk.title}$"]))
    redacted = observation.screen(region)
    assert redacted.masked_windows == 1
    hidden = region.intersection(tk.frame_bounds or tk.bounds)
    assert hidden is not None
    expected = grabbed.copy()
    expected.paste(
        (0, 0, 0),
        (hidden.x - region.x, hidden.y - region.y, hidden.right - region.x, hidden.bottom - region.y),
    )
    masked_png = Image.open(io.BytesIO(imaging.encode(redacted.frame, "png")))
    assert masked_png.tobytes() == expected.tobytes()
    assert x11_backend.grab(region).image().tobytes() == grabbed.tobytes(), "the grab itself is untouched"


def test_a_changed_screen_is_encoded_exactly_from_the_bands_kept_and_the_bands_changed(
    desktop: Desktop, x11_backend: X11Backend, extra_apps: Callable[..., FixtureApp]
) -> None:
    """Full-screen grabs before and after a window opens: the second JPEG, mostly stitched from
    bands kept from the first, is libjpeg's own restart-interval JPEG of the second grab, and the
    second PNG decodes to every pixel of it."""
    screen = Bounds(x=0, y=0, width=SCREEN[0], height=SCREEN[1])
    before = x11_backend.grab(screen)
    for fmt in ("jpeg", "png"):
        imaging.encode(before, fmt)
    extra_apps("tk", f"bands-{desktop.mode}", YELLOW, (700, 300), (120, 60))

    def changed() -> Grab | None:
        grab = x11_backend.grab(screen)
        return grab if grab.bgrx != before.bgrx else None

    after = poll("the new window to show", changed)
    assert after.bgrx is not None
    assert imaging.encode(after, "jpeg") == libjpeg_restart_encode(after, imaging.DEFAULT_QUALITY["jpeg"])
    png = Image.open(io.BytesIO(imaging.encode(after, "png")))
    assert png.tobytes() == Image.frombytes("RGB", after.size, bytes(after.bgrx), "raw", "BGRX").tobytes()


def test_capture_window_sees_through_a_covering_window(
    desktop: Desktop, x11_backend: X11Backend, extra_apps: Callable[..., FixtureApp]
) -> None:
    target = desktop.settled_window(x11_backend, desktop.gtk)
    area = target.bounds
    # A window over the target's lower-right quarter, on top because it is mapped last.
    cover_app = extra_apps(
        "tk", f"cover-{desktop.mode}", BLUE, (area.x + area.width // 2, area.y + area.height // 2), (300, 200)
    )
    cover = desktop.settled_window(x11_backend, cover_app)
    overlap = area.intersection(cover.bounds)
    assert overlap is not None
    assert cover.z_order < desktop.settled_window(x11_backend, desktop.gtk).z_order
    screen = x11_backend.capture(x11_backend.screen_bounds())
    assert screen.getpixel((area.right - 1, area.bottom - 1)) == BLUE, "the cover must hide the corner"

    captured = x11_backend.grab_window(target.id, include_frame=False)
    image = captured.image

    assert image.size == (area.width, area.height)
    assert image.getcolors() == [(area.width * area.height, desktop.gtk.color)]
    assert captured.method == "composite"


def test_capture_window_with_frame_includes_the_decoration(desktop: Desktop, x11_backend: X11Backend) -> None:
    window = desktop.settled_window(x11_backend, desktop.tk)
    assert window.frame_bounds is not None
    frame = window.frame_bounds

    image = x11_backend.capture_window(window.id, include_frame=True)

    assert image.size == (frame.width, frame.height)
    inside = {"x": window.bounds.x - frame.x, "y": window.bounds.y - frame.y}
    client_in_frame = window.bounds.model_copy(update=inside)
    assert colours_at(image, client_in_frame) == {desktop.tk.color}
    if desktop.managed:
        assert image.getpixel((frame.width // 2, 2)) != desktop.tk.color  # the title bar


@pytest.mark.parametrize("window_id", [0x1FFFFF00, 0, -1, 1 << 40])
def test_capture_window_of_unknown_id_is_window_not_found(x11_backend: X11Backend, window_id: int) -> None:
    with pytest.raises(DeskrigError) as excinfo:
        x11_backend.capture_window(window_id, include_frame=False)

    assert excinfo.value.code is ErrorCode.WINDOW_NOT_FOUND
    assert excinfo.value.details == {"window_id": window_id}


def test_capture_window_of_a_closed_window_is_window_not_found(
    desktop: Desktop, x11_backend: X11Backend, extra_apps: Callable[..., FixtureApp]
) -> None:
    app = extra_apps("tk", f"short-lived-{desktop.mode}", YELLOW, (700, 500), (120, 80))
    window_id = desktop.settled_window(x11_backend, app).id
    app.proc.terminate()
    app.proc.wait()

    def gone() -> DeskrigError | None:
        try:
            x11_backend.capture_window(window_id, include_frame=False)
        except DeskrigError as exc:
            return exc
        return None

    assert poll("the closed window's capture to fail", gone).code is ErrorCode.WINDOW_NOT_FOUND
    assert all(w.id != window_id for w in x11_backend.windows())


def test_damage_serial_is_stable_when_idle_and_moves_on_a_change(
    desktop: Desktop, x11_backend: X11Backend, extra_apps: Callable[..., FixtureApp]
) -> None:
    def settled() -> int | None:
        first = x11_backend.damage_serial()
        return first if x11_backend.damage_serial() == first else None

    idle = poll("an idle screen", settled)
    assert x11_backend.damage_serial() == idle

    extra_apps("gtk", f"damage-{desktop.mode}", YELLOW, (700, 80), (100, 60))

    assert x11_backend.damage_serial() != idle


@pytest.mark.parametrize("reader", READERS)
def test_the_changing_screen_sees_a_change_whose_damage_another_reader_took_first(
    desktop: Desktop, x11_backend: X11Backend, extra_apps: Callable[..., FixtureApp], reader: str
) -> None:
    title = f"stolen-damage-{desktop.mode}-{reader.replace(' ', '-')}"
    frame = change_seen_after_another_reader(
        DesktopFacade(x11_backend), reader, lambda: extra_apps("gtk", title, YELLOW, (700, 200), (100, 60))
    )
    image = frame.pixels.image
    assert YELLOW in {colour for _, colour in image.getcolors(image.width * image.height) or []}


def _resize_screen(display: str, width: int, height: int) -> None:
    """Resize the screen as xrandr --fb does, from a connection of its own, and wait for the reply.
    The output is switched off first: a screen may not shrink under the mode it shows."""
    xlib = Display(display)
    try:
        root = xlib.screen().root
        resources = root.xrandr_get_screen_resources()
        for crtc in resources.crtcs:
            xlib.xrandr_set_crtc_config(crtc, resources.config_timestamp, 0, 0, 0, randr.Rotate_0, [])
        root.xrandr_set_screen_size(width, height, width // 4, height // 4)
        xlib.sync()
    finally:
        xlib.close()


def test_a_resized_screen_is_seen_by_the_next_call(tmp_path: Path) -> None:
    """The screen's bounds are kept from the root window's events, not asked for each call: a
    resize (RandR, as xrandr makes it) shows in the very next call, and in the next grab."""
    xvfb, display = start_xvfb(tmp_path)
    backend = X11Backend(display)
    try:
        assert backend.screen_bounds() == Bounds(x=0, y=0, width=SCREEN[0], height=SCREEN[1])
        backend.damage_serial()  # a screenshot's first look, draining the events so far
        for width, height in ((640, 480), SCREEN):
            _resize_screen(display, width, height)
            assert backend.screen_bounds() == Bounds(x=0, y=0, width=width, height=height)
            assert backend.grab(backend.screen_bounds()).size == (width, height)
    finally:
        backend.close()
        stop_process(xvfb)


def test_focused_window_follows_the_keyboard_focus(desktop: Desktop, x11_backend: X11Backend) -> None:
    for app in desktop.apps:
        window = desktop.settled_window(x11_backend, app)
        focus(desktop, window.id)

        def focused_is(window_id: int = window.id) -> bool:
            return [w.id for w in x11_backend.windows() if w.focused] == [window_id]

        poll(f"{app.title!r} to be the one focused window", focused_is)


def focus(desktop: Desktop, window_id: int) -> None:
    """Move the keyboard focus the way a user's tool would: through the WM if there is one."""
    xlib = desktop.xlib
    root = xlib.screen().root
    if desktop.managed:
        request = event.ClientMessage(
            window=xlib.create_resource_object("window", window_id),
            client_type=xlib.intern_atom("_NET_ACTIVE_WINDOW"),
            data=(32, [2, X.CurrentTime, 0, 0, 0]),  # source 2: a pager, which WMs obey
        )
        root.send_event(request, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
    else:
        xlib.set_input_focus(window_id, X.RevertToPointerRoot, X.CurrentTime)
    xlib.sync()


def test_pointer_root_focus_is_the_window_under_the_pointer(bare_desktop: Desktop) -> None:
    impl = X11Backend(bare_desktop.display)
    try:
        xlib = bare_desktop.xlib
        target = bare_desktop.settled_window(impl, bare_desktop.gtk).bounds
        xlib.set_input_focus(X.PointerRoot, X.RevertToPointerRoot, X.CurrentTime)
        xlib.screen().root.warp_pointer(target.x + 10, target.y + 10)
        xlib.sync()

        position = impl.cursor_position()
        assert (position.x, position.y, position.display_id) == (target.x + 10, target.y + 10, 1)
        assert [w.title for w in impl.windows() if w.focused] == [bare_desktop.gtk.title]
    finally:
        impl.close()


def test_without_a_wm_the_tree_walk_finds_named_toplevels_only(bare_desktop: Desktop) -> None:
    xlib = bare_desktop.xlib
    root = xlib.screen().root
    assert root.get_full_property(xlib.intern_atom("_NET_CLIENT_LIST"), X.AnyPropertyType) is None
    screen = xlib.screen()
    popup = root.create_window(
        900, 600, 50, 50, 0, screen.root_depth, override_redirect=True, background_pixel=screen.white_pixel
    )
    popup.set_wm_name("a popup menu")
    popup.map()
    xlib.sync()
    impl = X11Backend(bare_desktop.display)
    try:
        titles = {w.title for w in impl.windows()}

        assert {bare_desktop.gtk.title, bare_desktop.tk.title} <= titles
        assert "a popup menu" not in titles
    finally:
        impl.close()
        popup.destroy()
        xlib.sync()


def test_minimized_window_is_listed_as_minimized(openbox_desktop: Desktop) -> None:
    impl = X11Backend(openbox_desktop.display)
    xlib = openbox_desktop.xlib
    app = openbox_desktop.tk
    window_id = openbox_desktop.settled_window(impl, app).id
    iconify = event.ClientMessage(
        window=xlib.create_resource_object("window", window_id),
        client_type=xlib.intern_atom("WM_CHANGE_STATE"),
        data=(32, [3, 0, 0, 0, 0]),  # ICCCM IconicState
    )
    try:
        xlib.screen().root.send_event(
            iconify, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask
        )
        xlib.sync()

        def minimized() -> bool:
            window = openbox_desktop.window_of(impl, app)
            return window is not None and window.minimized

        poll("the iconified Tk window to be listed as minimized", minimized)
        with pytest.raises(DeskrigError) as excinfo:
            impl.capture_window(window_id, include_frame=False)
        assert excinfo.value.code is ErrorCode.CAPTURE_FAILED
    finally:
        focus(openbox_desktop, window_id)  # activating restores it for the tests that follow
        poll("the window restored", lambda: openbox_desktop.settled_window(impl, app).minimized is False)
        impl.close()


def test_capture_works_from_any_thread(x11_backend: X11Backend) -> None:
    facade = DesktopFacade(x11_backend)
    region = Bounds(x=0, y=0, width=64, height=48)
    results: list[Image.Image] = []
    worker = threading.Thread(target=lambda: results.append(facade.capture(region)))

    worker.start()
    worker.join(timeout=10)
    results.append(facade.capture(region))

    assert [image.size for image in results] == [(64, 48), (64, 48)]
    assert results[0].tobytes() == results[1].tobytes()


def test_unreachable_display_is_display_not_found() -> None:
    with pytest.raises(DeskrigError) as excinfo:
        X11Backend(":4999")

    assert excinfo.value.code is ErrorCode.DISPLAY_NOT_FOUND


def test_backend_reports_no_fallbacks_on_xvfb(x11_backend: X11Backend) -> None:
    x11_backend.capture(Bounds(x=0, y=0, width=8, height=8))

    assert x11_backend.diagnostics == []


#: Runs in a child process: python-xlib keeps its event-code table in a class attribute shared by
#: every connection of a process, so one process cannot talk to X servers whose extensions differ.
FALLBACK_PROBE = """
import json, sys
from Xlib.display import Display
from deskrig.desktop.x11 import LAYOUT_MAX_AGE_S, X11Backend
from deskrig.model import Bounds

backend = X11Backend(sys.argv[1])
xlib = Display(sys.argv[1])
screen = xlib.screen()
window = screen.root.create_window(10, 20, 40, 30, 0, screen.root_depth, background_pixel=screen.white_pixel)
window.map()
xlib.sync()
print(json.dumps({
    "screen_pixel": backend.capture(Bounds(x=0, y=0, width=100, height=100)).getpixel((10, 20)),
    "window_colours": backend.capture_window(window.id, include_frame=False).getcolors(),
    "serials": [backend.damage_serial() for _ in range(3)],
    "diagnostics": [d.message for d in backend.diagnostics],
}))
backend.close()
"""


def test_missing_extensions_give_visible_fallbacks(tmp_path: Path) -> None:
    disabled = ["Composite", "DAMAGE", "MIT-SHM", "X-Resource"]
    xvfb, display = start_xvfb(tmp_path, *[arg for name in disabled for arg in ("-extension", name)])
    try:
        probe = subprocess.run(
            [sys.executable, "-c", FALLBACK_PROBE, display], capture_output=True, text=True, timeout=30
        )
    finally:
        stop_process(xvfb)
    assert probe.returncode == 0, probe.stderr
    result = json.loads(probe.stdout)

    assert result["screen_pixel"] == [255, 255, 255]
    assert result["window_colours"] == [[40 * 30, [255, 255, 255]]]
    assert len(set(result["serials"])) == 3  # no DAMAGE: never claims the screen is unchanged
    noted = " ".join(result["diagnostics"])
    for clue in ("X-Resource", "Composite", "DAMAGE", "MIT-SHM"):
        assert clue in noted
