"""A sway capture served from the damage watch's held frame is never stale: it shows every frame
sway drew before the capture was asked for, and every change deskrig itself made before it.

The tests' own Wayland client takes plain screen copies, which sway hands over at its next commit:
once one shows a change, sway has drawn it, and the desktop's capture asked for after that must
show it too. Each change is made while the desktop holds a frame from before it (its previous
capture kept the watch armed). A watch that lost its proof (two frames faster than it could ask
again) proves a still screen again by itself, with nothing drawn.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.desktop.conftest import SCREEN, FixtureApp
from tests.desktop.sway_scene import run_commands
from tests.polling import poll
from tests.sway.conftest import COLOR, window_of
from tests.sway.swayproc import SwaySession, start_sway

from deskrig.desktop import Desktop, open_desktop, sway_damage
from deskrig.desktop.sway_wayland import WaylandConnection
from deskrig.model import Bounds

#: Changes per test: each one a chance for a frame from before it to slip through.
CHANGES = 40
#: The pointer's picture fits in this box from its hot spot (the default cursor theme).
CURSOR_BOX = 32
#: How long no copy ends before the screen counts as still (a caret blinks twice a second).
STILL_SECONDS = 0.6


def _wayland_socket(session: SwaySession) -> str:
    env = session.env
    return os.path.join(env["XDG_RUNTIME_DIR"], env["WAYLAND_DISPLAY"])


@pytest.fixture
def observer(sway: SwaySession) -> Iterator[WaylandConnection]:
    """The test's own screencopy client: a plain copy shows the frame sway draws next."""
    connection = WaylandConnection(_wayland_socket(sway))
    yield connection
    connection.close()


def _output(desktop: Desktop) -> str:
    return desktop.displays()[0].name


def _pixel(desktop: Desktop, point: tuple[int, int]) -> tuple[int, int, int]:
    color: tuple[int, int, int] = (
        desktop.grab(Bounds(x=point[0], y=point[1], width=1, height=1)).image().getpixel((0, 0))
    )
    return color


def _drawn(observer: WaylandConnection, output: str, point: tuple[int, int]) -> tuple[int, int, int]:
    color: tuple[int, int, int] = (
        observer.grab(output, Bounds(x=point[0], y=point[1], width=1, height=1)).image().getpixel((0, 0))
    )
    return color


def test_a_capture_shows_every_frame_sway_drew_before_it(
    sway: SwaySession, sway_desktop: Desktop, color_app: FixtureApp, observer: WaylandConnection
) -> None:
    """Another client changes the screen (the colour window's opacity, through sway's IPC, which
    deskrig does not see); once sway has drawn the change, the capture shows it."""
    window = window_of(sway_desktop, color_app)
    point = (window.bounds.x + window.bounds.width // 2, window.bounds.y + window.bounds.height // 2)
    output = _output(sway_desktop)
    poll("the colour window drawn", lambda: _pixel(sway_desktop, point) == COLOR)
    try:
        for change in range(CHANGES):
            opacity = "0.5" if change % 2 == 0 else "1"
            run_commands(sway, f"[con_id={window.id}] opacity {opacity}")
            # sway applied it before answering: the frame it draws next, the observer's copy, shows it.
            drawn = _drawn(observer, output, point)
            assert (drawn == COLOR) == (opacity == "1"), f"change {change}: sway drew {drawn}"
            assert _pixel(sway_desktop, point) == drawn, f"change {change}: a frame from before it"
    finally:
        run_commands(sway, f"[con_id={window.id}] opacity 1")


def _cursor_shown(desktop: Desktop, point: tuple[int, int]) -> bool:
    """Whether the pointer's picture is in the box below and right of ``point`` (its hot spot),
    over the uniform colour window."""
    box = Bounds(x=point[0], y=point[1], width=CURSOR_BOX, height=CURSOR_BOX)
    return desktop.grab(box).image().getcolors() != [(CURSOR_BOX * CURSOR_BOX, COLOR)]


def test_a_capture_right_after_a_move_shows_the_pointer_where_it_went(
    sway_desktop: Desktop, color_app: FixtureApp, observer: WaylandConnection
) -> None:
    """The cursor deskrig moved is in the next capture, asked for at once: sway draws it at its
    next frame, and a plain copy just before makes that a whole refresh away, while the frame the
    watch holds shows the pointer where it was."""
    window = window_of(sway_desktop, color_app)
    spots = [
        (window.bounds.x + 10, window.bounds.y + 10),
        (window.bounds.x + 10 + 2 * CURSOR_BOX, window.bounds.y + 10),
    ]
    output = _output(sway_desktop)
    sway_desktop.with_input(lambda device: device.move(*spots[0]))
    poll("the pointer drawn at the first spot", lambda: _cursor_shown(sway_desktop, spots[0]))
    for change in range(CHANGES):
        there, elsewhere = spots[(change + 1) % 2], spots[change % 2]
        _drawn(observer, output, elsewhere)  # sway has just drawn a frame: its next is a refresh away
        sway_desktop.with_input(lambda device, spot=there: device.move(*spot))
        assert _cursor_shown(sway_desktop, there), f"move {change}: the pointer not where it went"
        assert not _cursor_shown(sway_desktop, elsewhere), f"move {change}: the pointer still where it was"


@pytest.fixture
def own_desktop(sway: SwaySession, monkeypatch: pytest.MonkeyPatch) -> Iterator[Desktop]:
    """A desktop of its own, with a damage watch of its own (the session's is watched by the live
    screen for good)."""
    for name, value in sway.env.items():
        monkeypatch.setenv(name, value)
    desktop = open_desktop("sway")
    yield desktop
    desktop.close()


@pytest.fixture
def brief_hold(own_desktop: Desktop, monkeypatch: pytest.MonkeyPatch) -> Desktop:
    """A desktop of its own whose captures keep the frames held for a moment only."""
    monkeypatch.setattr(sway_damage, "HOLD_SECONDS", 0.5)
    return own_desktop


def _watch(desktop: Desktop) -> sway_damage.DamageWatch:
    """The desktop's damage watch (its first capture starts it)."""
    watch = desktop._backend._damage  # type: ignore[attr-defined]
    assert isinstance(watch, sway_damage.DamageWatch)
    return watch


def test_an_idle_desktop_gives_the_held_frames_back_and_captures_again_after(
    brief_hold: Desktop, color_app: FixtureApp
) -> None:
    window = window_of(brief_hold, color_app)
    inside = Bounds(x=window.bounds.x + 10, y=window.bounds.y + 10, width=40, height=40)
    assert brief_hold.grab(inside).image().getcolors() == [(40 * 40, COLOR)]
    watch = _watch(brief_hold)
    poll("the frames held", lambda: any(o.held for o in watch._outputs.values()))
    poll("the copies given back", lambda: not watch._outputs, timeout=10)
    # Back from idle on a still screen: the first capture copies afresh, and a plain copy makes
    # the watch hold a frame again although no damage comes.
    assert brief_hold.grab(inside).image().getcolors() == [(40 * 40, COLOR)]
    poll("a frame held again", lambda: any(o.held and o.covered for o in watch._outputs.values()))
    assert brief_hold.grab(inside).image().getcolors() == [(40 * 40, COLOR)]


@contextmanager
def _stalled(watch: sway_damage.DamageWatch, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The watch's thread held at the top of its loop, where it asks for copies: sway's events
    wait in its socket until the block ends."""
    stalled, resume = threading.Event(), threading.Event()
    tend = watch._tend

    def held_up() -> float | None:
        stalled.set()
        resume.wait()
        return tend()

    monkeypatch.setattr(watch, "_tend", held_up)
    watch._wake()  # the thread goes round its loop: into the hold-up
    try:
        poll("the watch's thread held up", stalled.is_set)
        yield
    finally:
        resume.set()


def test_the_watch_covers_the_output_again_by_itself_on_a_still_screen(
    own_desktop: Desktop, color_app: FixtureApp, observer: WaylandConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two frames sway draws before the watch can ask again (a loaded machine) leave the output
    uncovered: neither its held frame nor a still damage serial proves anything then. On a still
    screen no damaged copy completes to cover it again, so the watch must, with nothing drawn."""
    window = window_of(own_desktop, color_app)
    output = _output(own_desktop)
    own_desktop.grab(own_desktop.screen_bounds())  # a capture: the watch holds frames
    watch = _watch(own_desktop)
    poll(
        "every copy armed and the output covered",
        lambda: (
            watch._outputs
            and all(o.covered and all(c.armed for c in o.copies) for o in watch._outputs.values())
        ),
    )
    left_uncovered: list[bool] = []
    completed = watch._completed

    def seen(watched: Any, copy: Any, *when: int) -> None:
        completed(watched, copy, *when)
        left_uncovered.append(not watched.covered)

    monkeypatch.setattr(watch, "_completed", seen)
    spots = [(window.bounds.x + 10 + 2 * CURSOR_BOX * n, window.bounds.y + 10) for n in range(2)]
    with _stalled(watch, monkeypatch):
        for spot in spots:  # two frames: each completes one of the copies armed before
            own_desktop.with_input(lambda device, spot=spot: device.move(*spot))
            _drawn(observer, output, spot)  # sway has drawn the move
    poll("a completion that found no other copy armed", lambda: any(left_uncovered))

    def still_serial() -> int | None:
        serial = watch.ended()
        return serial if serial is not None and watch.ended() == serial else None

    poll("a still damage serial, nothing drawn since", still_serial, timeout=10)
    box = Bounds(x=spots[-1][0], y=spots[-1][1], width=CURSOR_BOX, height=CURSOR_BOX)
    held = poll("a held frame", lambda: watch.latest(output, box, -math.inf))
    assert held.image().tobytes() == observer.grab(output, box).image().tobytes()


def _still(watch: sway_damage.DamageWatch) -> bool:
    """Whether the watch holds a covered frame of every output and no copy ends for a while."""
    ended = watch._ended
    if not watch._outputs or not all(o.held and o.covered for o in watch._outputs.values()):
        return False
    deadline = time.monotonic() + STILL_SECONDS
    while time.monotonic() < deadline and watch._ended == ended:
        time.sleep(0.01)
    return watch._ended == ended


def _after_asking(
    watch: sway_damage.DamageWatch, monkeypatch: pytest.MonkeyPatch, then: Callable[[], object]
) -> None:
    """``then`` runs in the watch's thread each time it has asked sway its questions (their syncs
    queued, not yet sent)."""
    ask_questions = watch._ask_questions

    def asked_then() -> None:
        ask_questions()
        then()

    monkeypatch.setattr(watch, "_ask_questions", asked_then)


@pytest.mark.parametrize("collected", [False, True], ids=["as-it-comes", "garbage-collected-while-asking"])
def test_a_held_frame_showing_a_change_stamped_after_it_serves_again_after_one_fresh_copy(
    own_desktop: Desktop,
    color_app: FixtureApp,
    observer: WaylandConnection,
    monkeypatch: pytest.MonkeyPatch,
    collected: bool,
) -> None:
    """sway may draw a change in the moment before the desktop stamps it (its thread wakes after
    sway answered): the held frame shows the change, dated before it. One capture takes a fresh
    copy, which proves the held frame still the screen; the captures after it are served from
    that frame, not each from a fresh copy until the screen next changes.

    ``collected``: the garbage collector runs each time the watch has asked sway its questions
    (as it may at any allocation): the fresh copy's news, which no caller waits on, must still be
    answered (CI42 lost one so: two fresh copies, no copy ended)."""
    window = window_of(own_desktop, color_app)
    inside = Bounds(x=window.bounds.x + 10, y=window.bounds.y + 10, width=40, height=40)
    own_desktop.activate_window(window.id)  # no other app's caret blinks; the pointer stays put
    own_desktop.grab(inside)  # a capture: the watch holds frames
    watch = _watch(own_desktop)
    poll("a still screen: covered frames held, no copy ending", lambda: _still(watch))
    backend = own_desktop._backend  # type: ignore[attr-defined]
    fresh: list[object] = []
    grab = backend._wayland.grab

    def counted(*args: Any) -> Any:
        fresh.append(args)
        return grab(*args)

    monkeypatch.setattr(backend._wayland, "grab", counted)
    # What each capture asked the watch and what it had then, for a failure to show.
    asked: list[str] = []
    ask = watch._asked

    def noted(question: sway_damage._Question) -> sway_damage._Question:
        answer = ask(question)
        outputs = {n: (o.covered, o.held and o.held.current_as_of) for n, o in watch._outputs.items()}
        asked.append(
            f"not before {question.not_before - stamp:+.4f} s: answered {answer.answered.is_set()}, "
            f"frame {answer.frame is not None}; outputs (covered, held frame current as of) {outputs}"
        )
        return answer

    monkeypatch.setattr(watch, "_asked", noted)
    if collected:
        _after_asking(watch, monkeypatch, gc.collect)
    # A change sway has drawn already (nothing moves, so no damage follows), stamped after it.
    stamp = backend._pointer.drawn_change_at = time.monotonic()
    ended = watch._ended

    captures = [own_desktop.grab(inside).image().tobytes() for _ in range(4)]

    assert captures == [observer.grab(_output(own_desktop), inside).image().tobytes()] * 4
    # One fresh copy (none if anything else drew a frame since: that frame is dated after the stamp).
    assert len(fresh) <= 1, (
        f"{len(fresh)} fresh copies; copies ended meanwhile: {watch._ended - ended}; stamp {stamp}; "
        + "; ".join(asked)
    )


def test_a_capture_whose_question_is_out_when_sway_goes_away_is_answered_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """sway dies with a capture's question asked of it: the watch ends, and the capture, whose
    answer will never come, is told so at once (it copies afresh and meets the compositor's
    error) rather than waiting out the watch's answer timeout."""
    session = start_sway(tmp_path, SCREEN)  # its own sway: this one is killed
    try:
        watch = sway_damage.DamageWatch(_wayland_socket(session))

        def gone() -> None:  # the question's sync is queued, not yet sent: sway never answers it
            os.kill(session.proc.pid, signal.SIGKILL)
            session.proc.wait(10)

        _after_asking(watch, monkeypatch, gone)
        monkeypatch.setattr(sway_damage, "ANSWER_TIMEOUT", 30.0)  # waited out: the test fails slowly
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger=sway_damage.__name__):
            assert watch.latest("HEADLESS-1", Bounds(x=0, y=0, width=1, height=1), -math.inf) is None
        assert "did not answer" not in caplog.text
        assert time.monotonic() - started < sway_damage.ANSWER_TIMEOUT
        watch.close()
    finally:
        session.stop()
