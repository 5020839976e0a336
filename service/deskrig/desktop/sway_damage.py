"""Damage on sway, and the screen as sway last drew it, both from wlr-screencopy's ``copy_with_damage``.

sway has no damage events for clients, but wlr-screencopy (version 2, wlroots >= 0.12) has
``copy_with_damage``: the copy completes only at an output commit that brings damage since this
client's previous completed copy of that output (wlroots keeps that damage per client, so none is
lost between copies). :class:`DamageWatch` keeps such copies pending on every output, on a
Wayland connection and a thread of its own (libwayland proxies stay on the thread that made them),
asleep in ``select`` while the screen is still. It serves three users:

- the live screen (:meth:`DamageWatch.fileno`): each completed (or failed) copy is one "may have
  changed", a byte written to a pipe, and the copy is asked for again at once;
- captures (:meth:`DamageWatch.latest`): a completed copy holds the frame sway drew at that
  commit, so while no damage has come since, that frame *is* the screen, handed over at once
  instead of waiting for sway's next frame (up to a refresh interval, 16.7 ms at 60 Hz: sway
  hands a plain copy over at the output's next commit, and a commit in the current interval
  defers that to the next tick). Kept for :data:`HOLD_SECONDS` after the last capture, so an
  idle rig pays nothing: no copies pending, no buffers, no wake-ups;
- the damage serial (:meth:`DamageWatch.ended`): the count of ended copies, while every output is
  covered, moves on with anything sway draws, so it stays put only on a screen sway has not
  drawn anew. Unlike the fd's pipe, which the first reader empties, a count cannot be taken
  from another reader.

Why a held frame is the screen (the proof the capture relies on). Events on one connection arrive
in the order sway sent them, and sway answers a ``wl_display.sync`` only after everything it did
before. Each output keeps :data:`COPIES_PER_OUTPUT` copies pending, each counted as armed once a
sync sent after its ``copy_with_damage`` came back. A damaged commit completes one armed copy
(wlroots clears the client's damage on completion, so the others wait for the next damage). So if,
when a copy completes, another one was already armed, every later damaged commit completes a copy
too, until the armed ones run out: the output is *covered*. A capture sends a sync; when it comes
back, every completion for commits before the capture was asked for has arrived. If the output is
still covered and nothing completed since the held frame, no commit after it brought damage: the
held frame shows every frame sway drew before the request.

A completion while no other copy was armed (two damaged commits before the thread could ask again)
leaves the output uncovered: a commit that brought damage before the copies asked again reached
sway completes one only at sway's next commit, which a sync does not wait for, so an armed copy
proves nothing yet, and captures take a fresh copy, as without the watch. On a still screen there
is no next damaged commit, so the thread does not wait for one: once every damaged copy is armed
again, it asks a *plain* copy, which completes at sway's next commit whatever the damage (asking
for any copy makes sway draw a frame). That completion covers the output like any other: a
damaged copy armed when a copy completes was in sway's hands at that commit, so the commit left
this client no damage (the completing copy took it, or the armed one did, and then its completion
comes next, before any sync's answer: sway sends both while handling the one commit), and the
next damaged commit completes the armed copy. So coverage comes back by itself, for one frame
sway draws. The same plain copy first seeds the held frame after a pause in watching, when
wlroots still keeps this client's damage and no damaged copy would complete on a still screen.

Why this rather than a faster output: a headless output at 240 Hz cut the wait to a quarter
(click and screenshot 4.8x faster than swaymsg + grim, not the 5x asked; screen PNG 6.1 ms) but
quadruples sway's frame-timer wake-ups for the rig's whole life, and raising the rate only while
captures come would change the output's mode under the apps (every client gets the new
``wl_output`` mode) and still wait for a frame on every capture. The held frame costs nothing on
a still screen, and on a busy one a copy per drawn frame for :data:`HOLD_SECONDS`.

What sway has not drawn yet is not on screen: an app's commit (its reaction to a click, say) shows
from sway's next frame, as on X11 an app's drawing shows once the server has it; a capture shows
the screen as it is then, and an action's effect that has not reached the screen is caught by
``wait_for``, on both backends. What deskrig itself changed before a capture must show, though (a
cursor it moved, a window it focused or made transparent): the caller passes the time of its last
such change, and a held frame older than that is not used. sway dates a completed copy with the
output commit's CLOCK_MONOTONIC time, the clock of :func:`time.monotonic`.

A change is stamped once sway has it (after the round trip that made it), so a frame sway drew
between having it and our stamp (our thread's wake-up: up to a millisecond; after 300 pointer
moves, 60 to 66 of the frames refused were dated less than 1 ms before the stamp) shows the
change but is dated before it. No tolerance on the dates is sound: a frame drawn just before
sway had the change is dated in that same interval. The capture takes a fresh copy then, asked
after the stamp, so sway hands it over at a commit drawn with the change. Once that copy is in,
the capture tells the watch (:meth:`DamageWatch.confirm`), whose sync is sent after it: if the
output is covered when the answer comes, its held frame is the screen as of every commit before
the answer, that one included (sway sends both copies' events while handling the one commit),
so it shows every change stamped before the fresh copy was asked for. Without that, every
capture of the still screen took a fresh copy until the next change (36 of 300 second captures
after a move, none with it).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import queue
import select
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from deskrig.desktop.sway_protocols import ZwlrScreencopyManagerV1
from deskrig.desktop.sway_wayland import ShmBuffer, WaylandConnection, bgrx_part, nonblocking_pipe
from deskrig.errors import DeskrigError
from deskrig.grabs import Grab
from deskrig.model import Bounds

log = logging.getLogger(__name__)

#: The screencopy version with ``copy_with_damage``.
DAMAGE_VERSION = 2
#: Seconds before a copy the compositor failed is asked for again (an output going away fails it).
RETRY_SECONDS = 0.25
#: Copies kept pending per output: one completes at a damaged commit while the other keeps the
#: output covered until the thread has asked again (see the module's proof).
COPIES_PER_OUTPUT = 2
#: How long after the last capture the watch keeps the held frames current. Within it, an agent's
#: next screenshot (seconds later) comes at once; after it the copies are given back, and a still
#: screen costs neither sway nor us anything.
HOLD_SECONDS = 10.0
#: How long a capture waits for the watch's answer before taking a fresh copy itself.
ANSWER_TIMEOUT = 1.0
#: zwlr_screencopy_frame_v1.flags: the copy is upside down.
_Y_INVERT = 1


@dataclass
class _Copy:
    """A ``copy_with_damage`` asked of one output, and the buffer it copies into."""

    #: False for a plain copy, which completes at sway's next commit whatever the damage.
    with_damage: bool = True
    frame: Any = None
    buffer: ShmBuffer | None = None
    inverted: bool = False
    #: sway holds the copy: a sync sent after it came back.
    armed: bool = False
    marker: Any = None


@dataclass
class _Held:
    """The frame of an output's last completed copy, and the changes it shows (monotonic seconds)."""

    buffer: ShmBuffer
    inverted: bool
    #: It shows every change made before this time: when sway drew it, or later once a fresh
    #: copy asked at that time proved it still the screen (:meth:`DamageWatch.confirm`).
    current_as_of: float


@dataclass
class _Output:
    copies: list[_Copy] = field(default_factory=lambda: [_Copy() for _ in range(COPIES_PER_OUTPUT)])
    #: A plain copy, asked while the output is not covered once every damaged copy is armed: it
    #: completes at sway's next commit whatever the damage, which covers the output again on a
    #: still screen, where no damaged copy would complete (see the module's proof).
    plain: _Copy = field(default_factory=lambda: _Copy(with_damage=False))
    held: _Held | None = None
    #: Every damaged commit since ``held`` was drawn has completed a copy (see the module's proof).
    covered: bool = False
    #: Buffers no copy and no held frame uses, kept while their shape holds.
    spare: list[ShmBuffer] = field(default_factory=list)
    #: Monotonic time before which a failed copy is not asked for again.
    retry_at: float = 0.0


@dataclass
class _Question:
    """A capture's question: ``part`` of ``output`` as sway last drew it, if that is the screen.
    With no ``output``, the damage serial's: how many copies ended so far, if every output's held
    frame is the screen. With ``confirms``, no question but news: a fresh copy of ``output`` asked
    at ``not_before`` is in (:meth:`DamageWatch.confirm`)."""

    output: str | None
    part: Bounds | None
    not_before: float
    confirms: bool = False
    answered: threading.Event = field(default_factory=threading.Event)
    frame: Grab | None = None
    ended: int | None = None
    marker: Any = None


class DamageWatch:
    """Watches every output of the compositor at ``socket`` (as in WAYLAND_DISPLAY) for damage,
    keeping the last frame drawn while someone uses it."""

    def __init__(self, socket: str) -> None:
        self._connection = WaylandConnection(socket)
        try:
            self._screencopy = self._connection.bind(ZwlrScreencopyManagerV1, DAMAGE_VERSION)
        except DeskrigError:
            self._connection.close()
            raise
        self._damaged, self._notify = nonblocking_pipe()
        self._wake_read, self._wake_write = nonblocking_pipe()
        self._outputs: dict[str, _Output] = {}
        self._questions: queue.SimpleQueue[_Question] = queue.SimpleQueue()
        #: Questions whose sync is out, by id, until answered (the watcher thread's). Nothing else
        #: holds a confirm once asked: it and its marker would be garbage, and a marker proxy that
        #: is collected drops sway's answer (CI42: a confirm lost so, a capture copied afresh).
        self._asking: dict[int, _Question] = {}
        #: The live screen watches from its first viewer on, for the rig's life.
        self._watched = False
        #: Monotonic time until which captures keep the frames current.
        self._hold_until = 0.0
        #: Copies completed or failed, and outputs gone, so far (the watcher thread's count).
        self._ended = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._watch, name="deskrig-sway-damage", daemon=True)
        self._thread.start()

    def fileno(self) -> int:
        """Readable once the screen may have changed since the last :meth:`drain`; watching
        starts with the first call."""
        if not self._watched:
            self._watched = True
            self._wake()
        return self._damaged

    def drain(self) -> bool:
        """Whether damage came since the last call; empties :meth:`fileno`."""
        seen = False
        with contextlib.suppress(BlockingIOError):
            while os.read(self._damaged, 4096):
                seen = True
        return seen

    def latest(self, output: str, part: Bounds, not_before: float) -> Grab | None:
        """``part`` (in the output's own coordinates) of ``output`` as sway last drew it, when that
        is provably the screen now and was drawn after ``not_before`` (monotonic seconds); else None,
        and the caller copies afresh. Keeps the frames current for :data:`HOLD_SECONDS` more."""
        if not self._thread.is_alive():
            return None
        self._hold_until = time.monotonic() + HOLD_SECONDS
        return self._asked(_Question(output, part, not_before)).frame

    def confirm(self, output: str, asked_at: float) -> None:
        """A fresh copy of ``output``, asked for at ``asked_at`` (monotonic seconds), has been
        handed over: if the held frame is still the screen after it, it shows every change made
        before ``asked_at`` (the module's last paragraph). Returns at once."""
        if self._thread.is_alive():
            self._questions.put(_Question(output, None, asked_at, confirms=True))
            self._wake()

    def ended(self) -> int | None:
        """How many copies have completed or failed (and outputs gone) so far, when every output is
        covered (the module's proof): then anything sway draws later moves the count on, so an
        unchanged count is a screen sway has not drawn anew. None when that cannot be told
        (nothing held, an output not covered, nobody watching or holding): a damage serial must
        then move on. Unlike :meth:`latest`, it does not start holding frames."""
        if not self._thread.is_alive() or (not self._watched and time.monotonic() >= self._hold_until):
            return None
        return self._asked(_Question(None, None, -math.inf)).ended

    def _asked(self, question: _Question) -> _Question:
        """``question`` answered by the watcher thread, or as it was if no answer came in time."""
        self._questions.put(question)
        self._wake()
        if not question.answered.wait(ANSWER_TIMEOUT):
            log.warning("the sway damage watch did not answer within %g s", ANSWER_TIMEOUT)
        return question

    def close(self) -> None:
        self._stopping = True
        self._wake()
        self._thread.join()
        for fd in (self._damaged, self._notify, self._wake_read, self._wake_write):
            os.close(fd)

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # the pipe is full: the thread wakes anyway
            os.write(self._wake_write, b"w")

    # -- the watcher thread -------------------------------------------------------------------------

    def _watch(self) -> None:
        try:
            while not self._stopping:
                wait = self._tend()
                self._connection.dispatch_pending()
                readable, _, _ = select.select([self._connection.fileno(), self._wake_read], [], [], wait)
                if self._wake_read in readable:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_read, 4096)
                    self._ask_questions()
                if self._connection.fileno() in readable:
                    self._connection.read_events()
        except DeskrigError as exc:  # the compositor is gone: every capture will say so
            log.warning("sway damage watch ended: %s", exc.message)
            self._damage()  # wake the watchers, which find the capture failing
        finally:
            self._release()

    def _tend(self) -> float | None:
        """Ask for the copies each output lacks while someone watches or holds, give them all
        back when nobody does; how long until something is due (None: nothing is)."""
        now = time.monotonic()
        if not self._watched and now >= self._hold_until:
            self._release_outputs()
            return None
        waits = [] if self._watched else [self._hold_until - now]
        outputs = self._connection.outputs()
        for name in [name for name in self._outputs if name not in outputs]:
            self._release_output(self._outputs.pop(name))
            self._damage()  # the screen lost an output: its frames are no longer the screen
        for name, proxy in outputs.items():
            watched = self._outputs.setdefault(name, _Output())
            if watched.retry_at > now:
                waits.append(watched.retry_at - now)
                continue
            for copy in watched.copies:
                if copy.frame is None:
                    self._ask_copy(watched, copy, proxy)
            if not watched.covered and watched.plain.frame is None and all(c.armed for c in watched.copies):
                self._ask_copy(watched, watched.plain, proxy)
        return min(waits, default=None)

    def _ask_copy(self, watched: _Output, copy: _Copy, proxy: Any) -> None:
        copy.frame = self._screencopy.capture_output(0, proxy)
        copy.frame.dispatcher["buffer"] = lambda _f, *shape: self._copy_into(watched, copy, tuple(shape))
        copy.frame.dispatcher["flags"] = lambda _f, flags: setattr(copy, "inverted", bool(flags & _Y_INVERT))
        copy.frame.dispatcher["ready"] = lambda _f, hi, lo, ns: self._completed(watched, copy, hi, lo, ns)
        copy.frame.dispatcher["failed"] = lambda _f: self._failed(watched, copy)

    def _copy_into(self, watched: _Output, copy: _Copy, shape: tuple[int, int, int, int]) -> None:
        for old in [b for b in watched.spare if b.shape != shape]:  # the output changed size
            watched.spare.remove(old)
            old.release()
        copy.buffer = watched.spare.pop() if watched.spare else self._connection.new_buffer(shape)
        if copy.with_damage:
            copy.frame.copy_with_damage(copy.buffer.buffer)
        else:
            copy.frame.copy(copy.buffer.buffer)
        copy.marker = self._connection.sync(lambda: setattr(copy, "armed", copy.with_damage))

    def _completed(self, watched: _Output, copy: _Copy, sec_hi: int, sec_lo: int, nsec: int) -> None:
        assert copy.buffer is not None  # sway completes only a copy it was given a buffer for
        # A damaged copy armed now was in sway's hands at this commit (the module's proof); the
        # plain copy never counts, as it waits for no damage.
        watched.covered = any(other.armed for other in watched.copies if other is not copy)
        if watched.held is not None:
            watched.spare.append(watched.held.buffer)
        drawn_at = ((sec_hi << 32) | sec_lo) + nsec / 1e9
        if drawn_at > time.monotonic():  # not CLOCK_MONOTONIC: no telling what it came after
            drawn_at = -math.inf
        watched.held = _Held(copy.buffer, copy.inverted, drawn_at)
        copy.buffer = None
        self._forget(copy)
        self._damage()

    def _failed(self, watched: _Output, copy: _Copy) -> None:
        watched.covered = False
        watched.retry_at = time.monotonic() + RETRY_SECONDS
        if copy.buffer is not None:
            watched.spare.append(copy.buffer)
            copy.buffer = None
        self._forget(copy)
        self._damage()

    @staticmethod
    def _forget(copy: _Copy) -> None:
        copy.frame.destroy()
        copy.frame, copy.armed, copy.marker, copy.inverted = None, False, None, False

    def _ask_questions(self) -> None:
        """A sync per question: its answer comes after every completion sway sent before."""
        while True:
            try:
                question = self._questions.get_nowait()
            except queue.Empty:
                return
            self._asking[id(question)] = question
            question.marker = self._connection.sync(functools.partial(self._answer, question))

    def _answer(self, question: _Question) -> None:
        if question.output is None:
            if all(self._current(name, question.not_before) for name in self._connection.outputs()):
                question.ended = self._ended
        elif question.confirms:
            if held := self._current(question.output, -math.inf):
                held.current_as_of = max(held.current_as_of, question.not_before)
        elif question.part is not None and (held := self._current(question.output, question.not_before)):
            _fmt, width, height, _stride = held.buffer.shape
            if question.part.intersection(Bounds(x=0, y=0, width=width, height=height)) == question.part:
                question.frame = bgrx_part(held.buffer, held.inverted, question.part)
        question.marker = None
        del self._asking[id(question)]
        question.answered.set()

    def _current(self, output: str, not_before: float) -> _Held | None:
        """The output's held frame, if it is provably the screen now (the module's proof) and shows
        every change made up to ``not_before``."""
        watched = self._outputs.get(output)
        held = watched.held if watched is not None else None
        if watched is None or held is None or not watched.covered or held.current_as_of <= not_before:
            return None
        return held

    def _damage(self) -> None:
        self._ended += 1
        with contextlib.suppress(BlockingIOError):  # the pipe is full: the news is already there
            os.write(self._notify, b"d")

    def _release_output(self, watched: _Output) -> None:
        for copy in [*watched.copies, watched.plain]:
            if copy.frame is not None:
                self._forget(copy)
            if copy.buffer is not None:
                copy.buffer.release()
                copy.buffer = None
        buffers = [*watched.spare, *([watched.held.buffer] if watched.held is not None else [])]
        for buffer in buffers:
            buffer.release()
        watched.spare.clear()
        watched.held, watched.covered = None, False

    def _release_outputs(self) -> None:
        for watched in self._outputs.values():
            self._release_output(watched)
        self._outputs.clear()

    def _release(self) -> None:
        self._release_outputs()
        # A capture waiting for an answer takes a fresh copy (and meets its error) at once: those
        # whose question is out (its answer will not come) and those not asked yet.
        for question in self._asking.values():
            question.answered.set()
        while True:
            try:
                self._questions.get_nowait().answered.set()
            except queue.Empty:
                break
        with contextlib.suppress(DeskrigError):
            self._connection.close()
