"""One recording: an output folder, a turn writer thread, optional video, and the turn events.

Turns are handed over with :meth:`Recording.enqueue` (never blocks) and written in order by the
recording's own thread, which numbers them. Restarting into a folder that already holds turns
continues after the last one (``turn-00008`` follows an existing ``turn-00007``); nothing is ever
overwritten. Likewise the video goes to ``recording.mp4``, or ``recording-2.mp4`` ... when taken.

Listeners of the event feed add an asyncio event to :attr:`Recording.wakeups`, which the writer
thread sets (thread-safely, on the listener's loop) after each turn and after the video is finalised.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import queue
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from deskrig.errors import DeskrigError, file_system_error
from deskrig.model import FileEntry, TurnEvent
from deskrig.observation import Observer
from deskrig.recording.turns import (
    Moment,
    TurnRecord,
    TurnVideo,
    after_inodes,
    file_entry,
    read_turn_event,
    remove_stale_temps,
    taken_over,
    turn_numbers,
    write_turn,
)
from deskrig.recording.video import VideoRecorder

log = logging.getLogger(__name__)

Scope = Literal["session", "boot"]
#: stop_recording, a new start_recording, the client's disconnect, no call from its owner for
#: recording_idle_timeout seconds, or the server stopping.
EndReason = Literal["stop_recording", "restarted", "disconnect", "idle_timeout", "server_stop"]
#: Niceness of the turn writer threads (10: well behind the server's own work).
WRITER_NICENESS = 10
#: The "after" moment of the turn written last and the inodes of its files (see ``_write_turns``).
Earlier = tuple[Moment | None, dict[str, int]]


class RecordingState(BaseModel):
    """``get_recording_state``: ``{recording, output_dir, turns, video_path, last_error}`` plus extras."""

    recording: bool = Field(description="True while action calls are written as turn folders")
    output_dir: str | None = Field(description="The recording's folder (the last one after stop)")
    turns: int = Field(description="Turn folders this recording wrote")
    video_path: str | None = Field(description="The mp4 being (or last) written; null without video")
    last_error: str | None = Field(description="Why video or a turn failed, if anything did")
    scope: Scope | None = Field(
        default=None, description="session: this MCP session's own turns; boot: every client's (--record)"
    )
    first_turn: int | None = Field(
        default=None,
        description="Number of the first turn folder written; above 1 when the folder already held turns",
    )
    video_recording: bool = Field(default=False, description="ffmpeg is running")
    ended_by: EndReason | None = Field(
        default=None, description="Why a stopped session recording ended (null while it runs)"
    )


#: Numbers recordings in the order they start, across every registry of the process.
_SERIALS = itertools.count(1)


class Wakeups:
    """Listeners to wake: asyncio events, each set on its own loop from whatever thread calls
    :meth:`wake` (a writer thread, a tool's worker thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def add(self, wakeup: asyncio.Event) -> None:
        """Set ``wakeup`` (on the running loop) on every :meth:`wake` until it is discarded."""
        with self._lock:
            self._events.add((asyncio.get_running_loop(), wakeup))

    def discard(self, wakeup: asyncio.Event) -> None:
        with self._lock:
            self._events = {entry for entry in self._events if entry[1] is not wakeup}

    def wake(self) -> None:
        with self._lock:
            events = list(self._events)
        for loop, wakeup in events:
            try:
                loop.call_soon_threadsafe(wakeup.set)
            except RuntimeError:  # that loop is closed: the listener is gone
                self.discard(wakeup)


def free_video_path(folder: Path) -> Path:
    path = folder / "recording.mp4"
    counter = 2
    while path.exists():
        path = folder / f"recording-{counter}.mp4"
        counter += 1
    return path


class Recording:
    """Turn folders (and optionally video) under ``output_dir``, from :meth:`start` to :meth:`stop`."""

    def __init__(self, output_dir: Path, scope: Scope, owner: str | None = None) -> None:
        self.output_dir = output_dir
        self.scope = scope
        #: The client_id whose actions this session recording takes (None: everyone's).
        self.owner = owner
        #: Tells this recording apart from every other of the process (the rig's /view follows one).
        self.serial = next(_SERIALS)
        self.active = False
        self.first_turn = 1
        self.turns = 0
        self.video: VideoRecorder | None = None
        self.video_event: FileEntry | None = None
        #: The last failure of this recording itself (a turn not written).
        self._own_error: str | None = None
        self._next = 1
        self._earlier: list[int] = []
        self._events: list[TurnEvent] = []
        self._earlier_events: dict[int, TurnEvent | None] = {}
        self._queue: queue.Queue[TurnRecord | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stop_lock = threading.Lock()
        self._video_lock = threading.Lock()
        #: Woken after each turn is written and once the video is final.
        self.wakeups = Wakeups()

    # ---- life cycle (blocking) -------------------------------------------------------------------

    def start(self, video: Observer | None = None) -> None:
        """Create the folder, start the writer and, given ``video`` (the observer whose screen the
        video shows), the video.

        A video failure does not fail the start: turns are recorded and ``last_error`` says why
        there is no video.
        """
        try:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(self.output_dir)
            self._earlier = turn_numbers(self.output_dir)
        except OSError as exc:
            raise file_system_error("use for a recording", self.output_dir, exc) from exc
        self._next = self.first_turn = (self._earlier[-1] + 1) if self._earlier else 1
        self._writer = threading.Thread(target=self._write_turns, name="deskrig-turn-writer", daemon=True)
        self._writer.start()
        self.active = True
        if video is not None:
            self.video = VideoRecorder(video, free_video_path(self.output_dir))
            try:
                self.video.start()
            except DeskrigError as exc:
                log.warning("recording %s without video: %s", self.output_dir, exc.message)
        log.info("recording %s turns to %s from turn %d", self.scope, self.output_dir, self.first_turn)

    def enqueue(self, record: TurnRecord) -> None:
        """Hand a turn to the writer; dropped once the recording is stopped."""
        if self.active:
            self._queue.put(record)

    def stop(self) -> RecordingState:
        """Idempotent: finalise the video (first: its length is the recording's), then write the
        queued turns and stop the writer."""
        with self._stop_lock:
            was_active, self.active = self.active, False
            self.finalize_video()
            if self._writer is not None and was_active:
                self._queue.put(None)
                self._writer.join()
        return self.state()

    def finalize_video(self) -> FileEntry | None:
        """Stop the video gracefully (idempotent) and announce the finished mp4."""
        video = self.video
        if video is None:
            return None
        with self._video_lock:
            video.stop()
            if self.video_event is None and video.path.exists():
                self.video_event = file_entry(self.output_dir, video.path.name)
                self.wakeups.wake()
        return self.video_event

    def _write_turns(self) -> None:
        # Encoding is background work: on Linux a thread has its own nice value, so the writer
        # yields the CPU to the actions it records.
        if sys.platform != "win32":
            with contextlib.suppress(OSError, AttributeError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WRITER_NICENESS)
        #: The "after" moment of the turn written last, and the inodes of its files: what the next
        #: turn's "before" files may be links to.
        earlier: Earlier = (None, {})
        while (record := self._queue.get()) is not None:
            earlier = self._write(record, earlier)
            # Nothing written is held while the next turn is awaited: the frames of its moments go
            # back to their grabber, to be grabbed into again rather than copied anew (only the
            # "after" one stays, in ``earlier``, as the recorder holds it anyway).
            del record

    def _write(self, record: TurnRecord, earlier: Earlier) -> Earlier:
        """Write ``record`` as the next turn; what the turn after it may link to."""
        number = self._next
        try:
            event = write_turn(
                self.output_dir, number, record, self._turn_video(record), taken_over(record, *earlier)
            )
        except Exception as exc:  # a turn lost is reported, never the end of the recording
            self._own_error = f"turn {number} was not written: {exc}"
            log.exception("turn %d of %s", number, self.output_dir)
            return (None, {})
        with self._lock:
            self._next = number + 1
            self.turns += 1
            self._events.append(event)
        self.wakeups.wake()
        return (record.after, after_inodes(self.output_dir / event.turn))

    def _turn_video(self, record: TurnRecord) -> TurnVideo | None:
        """Where the video shows this turn: its action's start, in seconds from the first frame;
        None without a video, or when the video ended before the action."""
        video = self.video
        if video is None or video.first_frame_at is None:
            return None
        started = datetime.fromisoformat(record.action["timestamp"]).timestamp()
        if video.stopped_at is not None and started > video.stopped_at:
            return None  # the video was finalised before this action (POST /recording/finalize)
        return TurnVideo(path=video.path.name, offset_s=round(max(0.0, started - video.first_frame_at), 3))

    # ---- state -----------------------------------------------------------------------------------

    @property
    def last_error(self) -> str | None:
        video_error = self.video.last_error if self.video is not None else None
        return self._own_error or video_error

    def state(self) -> RecordingState:
        video = self.video
        return RecordingState(
            recording=self.active,
            output_dir=str(self.output_dir),
            turns=self.turns,
            video_path=str(video.path) if video is not None else None,
            last_error=self.last_error,
            scope=self.scope,
            first_turn=self.first_turn,
            video_recording=video is not None and video.running,
        )

    # ---- event feed ------------------------------------------------------------------------------

    def events_after(self, seq: int) -> list[TurnEvent]:
        """Blocking: every complete turn with a number above ``seq``, oldest first, including turns
        earlier recordings left in the folder."""
        earlier = [self._earlier_event(n) for n in self._earlier if n > seq]
        with self._lock:
            own = [event for event in self._events if event.seq > seq]
        return [event for event in earlier if event is not None] + own

    def _earlier_event(self, number: int) -> TurnEvent | None:
        if number not in self._earlier_events:
            self._earlier_events[number] = read_turn_event(self.output_dir, number)
        return self._earlier_events[number]
