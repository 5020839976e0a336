"""X11Input against real apps: a Tk form and a GTK form under openbox on their own Xvfb.

Every assertion reads the app's own log of what it received (tests/apps/tk_form.py,
tests/apps/gtk_form.py) or the X server's state; nothing is mocked, nothing sleeps for a fixed
time. Key-name parsing (deskrig.desktop.keys) is checked without a display at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.polling import poll
from Xlib import X
from Xlib.display import Display

from deskrig.desktop.keys import KeyCombo, parse_combo, parse_hotkey, parse_key
from deskrig.desktop.x11_input import X11Input
from deskrig.errors import DeskrigError, ErrorCode

from .conftest import SYSTEM_PYTHON, start_xvfb, stop_process, window_manager_ready

APPS_DIR = Path(__file__).resolve().parents[1] / "apps"
UNICODE = "Grüße, Ñandú — 東京 😀\nline 2"
UNICODE_LINE = UNICODE.splitlines()[0]


@dataclass
class App:
    """A fixture app and its JSON-lines log."""

    log: Path
    proc: subprocess.Popen[bytes]

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        lines = self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []
        events = [json.loads(line) for line in lines]
        return [e for e in events if name is None or e["event"] == name]

    def wait(self, name: str, check: Callable[[dict[str, Any]], bool], what: str = "") -> dict[str, Any]:
        """The newest ``name`` event once it satisfies ``check``."""

        def newest() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.log.stem} exited with {self.proc.returncode}")
            found = self.events(name)
            return found[-1] if found and check(found[-1]) else None

        return poll(what or f"{self.log.stem}: {name} event", newest, timeout=10)

    def widget(self, name: str) -> dict[str, int]:
        layout = [e for e in self.events() if e["event"] in ("ready", "layout")][-1]
        return dict(layout["widgets"][name])

    def center(self, name: str) -> tuple[int, int]:
        bounds = self.widget(name)
        return bounds["x"] + bounds["width"] // 2, bounds["y"] + bounds["height"] // 2


@dataclass
class Rig:
    display: str
    xlib: Display
    input: X11Input
    tk: App
    gtk: App

    def keyboard_mapping(self) -> list[list[int]]:
        info = self.xlib.display.info
        count = info.max_keycode - info.min_keycode + 1
        return [list(row) for row in self.xlib.get_keyboard_mapping(info.min_keycode, count)]


def _launch(display: str, log_dir: Path, script: str, title: str) -> App:
    log = log_dir / f"{Path(script).stem}.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    env |= {"DISPLAY": display, "LANG": "C.UTF-8", "NO_AT_BRIDGE": "1", "GSETTINGS_BACKEND": "memory"}
    with (log_dir / f"{Path(script).stem}.stderr").open("wb") as stderr:
        proc = subprocess.Popen(
            [SYSTEM_PYTHON, str(APPS_DIR / script), "--title", title, "--log", str(log)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    app = App(log=log, proc=proc)
    app.wait("ready", lambda e: True, f"{script} to report ready")
    return app


def _overlap(a: dict[str, int], b: dict[str, int]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and (a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])
    )


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    log_dir = tmp_path_factory.mktemp("x11-input")
    procs: list[subprocess.Popen[bytes]] = []
    xvfb, display = start_xvfb(log_dir)
    procs.append(xvfb)
    xlib = Display(display)
    try:
        with (log_dir / "openbox.log").open("wb") as wm_log:
            procs.append(
                subprocess.Popen(
                    ["openbox", "--sm-disable"],
                    env={**os.environ, "DISPLAY": display},
                    stdout=subprocess.DEVNULL,
                    stderr=wm_log,
                )
            )
        poll("openbox to set _NET_SUPPORTING_WM_CHECK", lambda: window_manager_ready(xlib))
        tk = _launch(display, log_dir, "tk_form.py", "Tk form")
        procs.append(tk.proc)
        gtk = _launch(display, log_dir, "gtk_form.py", "GTK form")
        procs.append(gtk.proc)
        assert not any(
            _overlap(tk.widget(a), gtk.widget(b)) for a in ("entry", "text", "button") for b in ("entry",)
        ), "openbox placed the two forms on top of each other"
        device = X11Input(display)
        try:
            yield Rig(display=display, xlib=xlib, input=device, tk=tk, gtk=gtk)
        finally:
            device.close()
    finally:
        xlib.close()
        for proc in reversed(procs):
            stop_process(proc)


def _focus_tk_field(rig: Rig, widget: str) -> None:
    """Click into a Tk field and empty it (Tk selects all with ctrl+/)."""
    rig.input.button(*rig.tk.center(widget))
    rig.input.press_key("ctrl+slash")
    rig.input.press_key("Delete")
    poll(f"Tk {widget} to be empty", lambda: [e["text"] for e in rig.tk.events(widget)][-1:] in ([], [""]))


# -- typing ------------------------------------------------------------------------------------------


def test_unicode_lands_exactly_in_tk_text_and_the_mapping_is_restored(rig: Rig) -> None:
    before = rig.keyboard_mapping()
    _focus_tk_field(rig, "text")
    report = rig.input.type_text(UNICODE)
    assert report.chars == len(UNICODE) and report.path == "xtest"
    assert report.remapped_keysyms == 8  # ü ß Ñ ú — 東 京 😀 are not on the US layout
    rig.tk.wait("text", lambda e: e["text"] == UNICODE, "the Tk text widget to hold the text")
    assert rig.keyboard_mapping() == before


def test_unicode_lands_exactly_in_tk_and_gtk_entries(rig: Rig) -> None:
    before = rig.keyboard_mapping()
    _focus_tk_field(rig, "entry")
    rig.input.type_text(UNICODE_LINE)
    rig.tk.wait("entry", lambda e: e["text"] == UNICODE_LINE, "the Tk entry to hold the text")
    # Shift was held for the capital G (state bit 0).
    keys = rig.tk.events("key")
    assert {"keysym": "G", "state": 1} in [{"keysym": k["keysym"], "state": k["state"] & 1} for k in keys]

    rig.input.button(*rig.gtk.center("entry"))
    rig.input.hotkey(["ctrl", "a"])
    rig.input.type_text(UNICODE_LINE)
    rig.gtk.wait("entry", lambda e: e["text"] == UNICODE_LINE, "the GTK entry to hold the text")
    assert rig.keyboard_mapping() == before


def test_ascii_at_full_speed_and_caps_lock_is_put_back(rig: Rig) -> None:
    text = "The quick brown fox jumps over the lazy dog 0123456789 ~!@#$%^&*()_+{}|:<>? " * 2
    rig.input.button(*rig.gtk.center("entry"))
    rig.input.hotkey(["ctrl", "a"])
    rig.input.press_key("Caps_Lock")
    assert rig.xlib.screen().root.query_pointer().mask & X.LockMask
    report = rig.input.type_text(text)
    assert report.remapped_keysyms == 0
    rig.gtk.wait("entry", lambda e: e["text"] == text, "the GTK entry to hold the ASCII text")
    assert rig.xlib.screen().root.query_pointer().mask & X.LockMask, "Caps Lock was left off"
    rig.input.press_key("Caps_Lock")


def test_typing_works_whatever_the_layout(rig: Rig) -> None:
    """Under a German layout y and z swap, @ needs AltGr (not reachable with Shift), ü exists."""
    text = "yz@ü€ Grüße"

    def setxkbmap(layout: str) -> None:
        subprocess.run(["setxkbmap", "-display", rig.display, layout], check=True)

    setxkbmap("de")
    try:
        rig.input.button(*rig.gtk.center("entry"))
        rig.input.hotkey(["ctrl", "a"])
        rig.input.type_text(text)
        rig.gtk.wait("entry", lambda e: e["text"] == text, "the GTK entry to hold the text under 'de'")
    finally:
        setxkbmap("us")


# -- pointer ----------------------------------------------------------------------------------------


def test_click_double_click_and_right_click_on_the_tk_button(rig: Rig) -> None:
    x, y = rig.tk.center("button")
    count = len(rig.tk.events("button"))
    rig.input.button(x, y)
    rig.tk.wait("button", lambda e: e["count"] == count + 1)
    rig.input.button(x, y, count=2)
    rig.tk.wait("button", lambda e: e["count"] == count + 3, "a double click to press the button twice")
    assert rig.tk.events("double_click"), "Tk did not see the second click as a double click"
    rig.input.button(x, y, button="right", modifiers=["ctrl"])
    pressed = rig.tk.wait("mouse", lambda e: e["num"] == 3, "a right click on the button")
    assert pressed["state"] & X.ControlMask
    assert len(rig.tk.events("button")) == count + 3  # a right click does not invoke a Tk button


def test_scroll_moves_the_listbox(rig: Rig) -> None:
    x, y = rig.tk.center("listbox")
    rig.input.scroll(x, y, "down", 5)
    moved = rig.tk.wait("listbox_view", lambda e: e["first"] > 0, "the listbox to scroll down")
    rig.input.scroll(x, y, "up", 5)
    rig.tk.wait("listbox_view", lambda e: e["first"] < moved["first"], "the listbox to scroll back up")


def test_drag_moves_the_slider(rig: Rig) -> None:
    layout = [e for e in rig.tk.events() if e["event"] in ("ready", "layout")][-1]
    knob, end = layout["scale_knob"], layout["scale_end"]
    rig.input.drag((knob["x"], knob["y"]), (end["x"], end["y"]), duration_ms=100, steps=10)
    rig.tk.wait("scale", lambda e: e["value"] >= 90, "the slider to follow the drag to its end")


# -- keys ---------------------------------------------------------------------------------------------


def test_named_keys_and_combinations_reach_the_tk_entry(rig: Rig) -> None:
    _focus_tk_field(rig, "entry")
    rig.input.type_text("abc")
    rig.tk.wait("entry", lambda e: e["text"] == "abc")
    seen = len(rig.tk.events("key"))
    rig.input.press_key("BackSpace")
    rig.tk.wait("entry", lambda e: e["text"] == "ab")
    for key in ("Return", "F5", "KP_Enter", "esc"):
        rig.input.press_key(key)
    rig.input.press_key("a", modifiers=["alt"])
    rig.input.press_key("shift+Tab")  # last: it moves the focus out of the entry

    def keys_through_shift_tab() -> list[dict[str, Any]] | None:
        keys = rig.tk.events("key")[seen:]
        return keys if any(k["state"] & X.ShiftMask for k in keys) else None

    keys = poll("shift+Tab to reach the entry", keys_through_shift_tab)
    named = [(k["keysym"], k["state"] & (X.ShiftMask | X.Mod1Mask)) for k in keys if k["keysym"] != "??"]
    assert named == [
        ("BackSpace", 0),
        ("Return", 0),
        ("F5", 0),
        ("KP_Enter", 0),
        ("Escape", 0),
        ("Alt_L", 0),
        ("a", X.Mod1Mask),
        ("Shift_L", 0),
        ("ISO_Left_Tab", X.ShiftMask),
    ]


def test_hotkey_select_all_then_typing_replaces_the_gtk_entry(rig: Rig) -> None:
    rig.input.button(*rig.gtk.center("entry"))
    rig.input.hotkey(["ctrl", "a"])
    rig.input.type_text("old text")
    rig.gtk.wait("entry", lambda e: e["text"] == "old text")
    rig.input.hotkey(["ctrl", "a"])
    rig.input.type_text("new")
    rig.gtk.wait("entry", lambda e: e["text"] == "new", "select-all and typing to replace the text")


# -- refusals ---------------------------------------------------------------------------------------


def _refused(call: Callable[[], object]) -> dict[str, Any]:
    with pytest.raises(DeskrigError) as caught:
        call()
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT, caught.value
    assert caught.value.remediation
    return caught.value.details or {}


def test_bad_input_is_refused_and_sends_nothing(rig: Rig) -> None:
    root = rig.xlib.screen().root
    x, y = rig.tk.center("button")
    rig.input.move(x, y)
    tk_before, gtk_before = len(rig.tk.events()), len(rig.gtk.events())

    details = _refused(lambda: rig.input.button(5000, 10))
    assert details["screen"] == {"width": 1280, "height": 800} and details["x"] == 5000
    _refused(lambda: rig.input.button(10, -1))
    _refused(lambda: rig.input.drag((x, y), (x, 900)))
    _refused(lambda: rig.input.move(1280, 0))
    _refused(lambda: rig.input.scroll(x, y, "down", 0))
    _refused(lambda: rig.input.scroll(x, y, "down", 51))
    _refused(lambda: rig.input.scroll(x, y, "sideways", 1))  # type: ignore[arg-type]
    _refused(lambda: rig.input.button(x, y, button="fourth"))  # type: ignore[arg-type]
    _refused(lambda: rig.input.button(x, y, modifiers=["a"]))
    assert "Return" in _refused(lambda: rig.input.press_key("Retrun"))["suggestions"]
    assert "shift" in _refused(lambda: rig.input.press_key("ctrl+shfit+t"))["suggestions"]
    _refused(lambda: rig.input.hotkey([]))
    _refused(lambda: rig.input.hotkey(["ctrl"]))
    _refused(lambda: rig.input.type_text("bell\x07"))

    pointer = root.query_pointer()
    assert (pointer.root_x, pointer.root_y) == (x, y), "a refused action moved the pointer"
    # One real click as a marker: once it has landed, anything sent before it has landed too.
    clicks = len(rig.tk.events("button"))
    rig.input.button(x, y)
    rig.tk.wait("button", lambda e: e["count"] == clicks + 1)
    assert [e["event"] for e in rig.tk.events()[tk_before:]] == ["mouse", "button"]
    assert len(rig.gtk.events()) == gtk_before


def test_connection_failures_are_structured(rig: Rig) -> None:
    with pytest.raises(DeskrigError) as caught:
        X11Input(":9999")
    assert caught.value.code == ErrorCode.DISPLAY_NOT_FOUND
    device = X11Input(rig.display)
    device.close()
    device.close()  # closing twice is harmless
    with pytest.raises(DeskrigError) as caught:
        device.move(1, 1)
    assert caught.value.code == ErrorCode.INPUT_FAILED


# -- key names, no display needed -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "combo"),
    [
        ("ctrl+s", KeyCombo(("Control_L",), "s")),
        ("Control+Shift+T", KeyCombo(("Control_L", "Shift_L"), "T")),
        ("shift+Tab", KeyCombo(("Shift_L",), "Tab")),
        ("ENTER", KeyCombo((), "Return")),
        ("esc", KeyCombo((), "Escape")),
        ("pgup", KeyCombo((), "Page_Up")),
        ("del", KeyCombo((), "Delete")),
        ("space", KeyCombo((), " ")),
        ("f24", KeyCombo((), "F24")),
        ("kp_enter", KeyCombo((), "KP_Enter")),
        ("super", KeyCombo((), "Super_L")),
        ("cmd+q", KeyCombo(("Super_L",), "q")),
        ("win+Left", KeyCombo(("Super_L",), "Left")),
        ("ctrl++", KeyCombo(("Control_L",), "+")),
        ("+", KeyCombo((), "+")),
        ("é", KeyCombo((), "é")),
    ],
)
def test_key_combinations_parse_to_canonical_names(spec: str, combo: KeyCombo) -> None:
    assert parse_combo(spec) == combo


def test_key_name_errors_explain_themselves() -> None:
    with pytest.raises(DeskrigError) as caught:
        parse_key("Retrun")
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT
    assert caught.value.details == {"key": "Retrun", "suggestions": ["Return"]}
    for bad in ("", "a+b", "ctrl+", "ctrl++a", "\n"):
        with pytest.raises(DeskrigError):
            parse_combo(bad)
    assert parse_combo("t", modifiers=["ctrl", "alt"]).keys == ["Control_L", "Alt_L", "t"]
    assert parse_hotkey(["ctrl", "shift", "esc"]) == ["Control_L", "Shift_L", "Escape"]
