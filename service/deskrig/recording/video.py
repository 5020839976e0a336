"""Screen video from the observation path: a frame pump feeding ffmpeg, into an mp4 that survives a crash.

The frames are the screenshot tools' (:class:`~deskrig.screen_changes.ScreenChanges`: an
:class:`~deskrig.observation.Observation` of the whole screen, blocked windows blacked out), so the
video shows exactly what a client may see, on every backend alike. The pump thread writes each
changed screen to ffmpeg's stdin as raw BGRX rows; ffmpeg stamps every frame with the wall clock
as it reads it (``use_wallclock_as_timestamps``) and keeps those times (variable frame rate), so a
busy screen gets up to :data:`FRAME_RATE` frames a second and an idle one next to nothing: it is
not grabbed (the backend's damage says it has not changed) and its last frame is sent again only
every :data:`HEARTBEAT_SECONDS`, which makes the muxer write out the fragment holding the last
change (it writes a fragment when the next frame arrives) and carries the video on to the present.

The mp4 is fragmented (``empty_moov`` + 200 ms fragments, flushed as written), so whatever ffmpeg
wrote before a SIGKILL of ffmpeg (or of the rig) still decodes. A graceful stop sends the screen
once more (the video ends at the stop, not at the last change) and closes ffmpeg's stdin, whose end
of stream makes ffmpeg close the file cleanly (exit 0). ffmpeg's stderr is kept in a bounded ring.

The pointer: where the backend's captures leave it out (``captures_show_pointer``: X11, macOS,
Windows), the pump draws an arrow at the pointer's position on every frame it sends
(:mod:`deskrig.recording.pointer`; blocked windows stay black). Moving the pointer draws nothing
on the screen (no damage), so while recording, the pump also reads the pointer's position (every
:data:`POINTER_STILL_POLL_SECONDS` while it keeps still, every frame tick while it moves) and sends
the last frame again, with the pointer where it went, when it moved: a still pointer on an idle
screen still costs one frame a second.

The video is one size: a screen that changes size mid-recording ends it there (cleanly, with
``last_error`` saying so); turns after that have no place in it.

ffmpeg runs in its own session (a terminal's Ctrl-C reaches the rig, which then stops it) with a
death signal, so it never outlives the rig. It is forked from one long-lived thread: the death
signal fires when the forking *thread* ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.observation import Observer
from deskrig.procs import KILL_SIGNAL, die_with_parent
from deskrig.recording.pointer import with_pointer
from deskrig.screen_changes import ScreenChanges, ScreenFrame

log = logging.getLogger(__name__)

#: The most frames a second a busy screen is recorded at.
FRAME_RATE = 30
#: An unchanged screen's last frame is sent again this often (see the module's docstring): at most
#: this much video is lost to a SIGKILL of ffmpeg, and the video never lags the screen by more.
HEARTBEAT_SECONDS = 1.0
#: How long the pump waits for a change before it looks whether it is to stop.
STOP_POLL_SECONDS = 0.25
#: Where the pump draws the pointer: how often it reads the pointer's position while the pointer
#: keeps still (a jump shows within this). A read costs about 0.5 ms of CPU on X11: reading it
#: every frame tick all the time cost an idle recording 1.5 % of a core more.
POINTER_STILL_POLL_SECONDS = 0.1
#: For how long after the pointer moved the pump reads it every frame tick (a drag or a glide is
#: followed at the frame rate).
POINTER_MOVING_SECONDS = 1.0
#: Lines of ffmpeg's stderr kept for diagnostics.
STDERR_LINES = 60
#: How long start() waits for ffmpeg to write the file header before calling it started.
START_TIMEOUT = 5.0
#: How long a graceful stop waits for ffmpeg to finish the file before SIGTERM, then SIGKILL.
STOP_TIMEOUT = 10.0
#: Niceness of the pump thread: grabbing for the video yields the CPU to the actions it records.
PUMP_NICENESS = 5
#: Wall-clock timestamps are kept to 10 ms (the input's time base). Not finer: a player or ffmpeg
#: decoding the file takes a declared rate above 210 fps for nonsense and falls back to the average
#: rate (a few fps for a calm screen), in whose coarse steps frames 30 ms apart collide.
TIMESTAMP_RATE = 100

#: ffmpeg's report of its input's first timestamp: the wall time of the video's 0 s.
_INPUT_START = re.compile(r"^\s*Duration: .*, start: (\d+\.\d+)")

#: Forks every ffmpeg: one thread that lives as long as the process, for the death signal.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deskrig-ffmpeg-spawner")


def even(value: int) -> int:
    """H.264 in yuv420p wants even dimensions: round down."""
    return value - value % 2


def video_argv(binary: str, width: int, height: int, path: Path) -> list[str]:
    """The ffmpeg command line: raw ``width`` x ``height`` BGRX frames on stdin, stamped with the
    wall clock as they arrive, to a fragmented H.264 mp4 of the (even) size, frames kept where
    they fall in time."""
    return [
        binary,
        *("-f", "rawvideo", "-video_size", f"{width}x{height}"),
        # Start on the first frame: an idle screen may not send a second one for a while.
        *("-analyzeduration", "0", "-probesize", "32"),
        *("-framerate", str(TIMESTAMP_RATE), "-pix_fmt", "bgr0", "-use_wallclock_as_timestamps", "1"),
        *("-i", "pipe:0"),
        *("-f", "mp4", "-vcodec", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"),
        # No frames held back in the encoder: each one reaches the file when the next arrives.
        *("-tune", "zerolatency", "-fps_mode", "vfr"),
        # Trims an odd-sized screen to the even size yuv420p needs.
        *("-vf", f"crop={even(width)}:{even(height)}:0:0"),
        *("-movflags", "+frag_keyframe+empty_moov", "-frag_duration", "200000", "-flush_packets", "1"),
        str(path),
        "-nostats",  # no progress lines flooding stderr
    ]


class VideoRecorder:
    """ffmpeg writing ``path``, fed the screen of ``observer``'s desktop by a pump thread.

    ``last_error`` says why it is not (or no longer) recording."""

    def __init__(self, observer: Observer, path: Path, binary: str = "ffmpeg") -> None:
        self.observer = observer
        self.path = path
        self.binary = binary
        self.last_error: str | None = None
        #: Frames handed to ffmpeg (changes, heartbeats and the last one at the stop).
        self.frames_written = 0
        #: The screen's size, which every frame has.
        self.size: tuple[int, int] | None = None
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._process: subprocess.Popen[bytes] | None = None
        self._pump: threading.Thread | None = None
        self._reader: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        #: Whether the pump draws the pointer: the backend's captures leave it out.
        self.draws_pointer = not observer.desktop.captures_show_pointer
        #: Where the pointer is drawn on the last frame handed to ffmpeg (None: not drawn).
        self.pointer_drawn_at: tuple[int, int] | None = None
        self.started_at: float | None = None
        #: Wall time (epoch seconds) of the video's 0 s: the first frame's stamp as ffmpeg reports
        #: it (:meth:`_note_input_start`); else when ffmpeg first wrote the file.
        self.first_frame_at: float | None = None
        self.stopped_at: float | None = None
        #: The ``last_error`` of a start that gave up waiting for the file, until ffmpeg writes it.
        self._still_waiting: str | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def pump_thread(self) -> threading.Thread | None:
        return self._pump

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stderr_tail(self, lines: int = 10) -> list[str]:
        return list(self._stderr)[-lines:]

    def start(self) -> None:
        """Blocking: grab the screen, spawn ffmpeg, feed it and wait until it writes the file;
        RECORDING_ERROR otherwise."""
        found = shutil.which(self.binary)
        if found is None:
            raise self._fail(f"{self.binary} is not installed (no {self.binary!r} on PATH)")
        changes = ScreenChanges(self.observer, 1 / FRAME_RATE)
        try:
            first = changes.next(START_TIMEOUT)
        except DeskrigError as exc:
            raise self._fail(f"cannot capture the screen for the video: {exc.message}") from exc
        if first is None:
            raise self._fail(f"no capture of the screen for the video in {START_TIMEOUT:g} s")
        self.size = first.size
        argv = video_argv(found, *first.size, self.path)
        try:
            process = _SPAWNER.submit(self._launch, argv).result()
        except OSError as exc:
            raise self._fail(f"cannot start the screen recording: {exc}") from exc
        self._process = process
        self.started_at = time.time()
        self._reader = threading.Thread(target=self._read_stderr, name="deskrig-ffmpeg-stderr", daemon=True)
        self._reader.start()
        self._pump = threading.Thread(
            target=self._feed, args=(changes, first), name="deskrig-video-pump", daemon=True
        )
        self._pump.start()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self._end_at_start_up()
                raise self._fail(f"ffmpeg exited at start-up with status {process.returncode}")
            if self.path.exists() and self.path.stat().st_size > 0:
                if self.first_frame_at is None:
                    self.first_frame_at = time.time()
                log.info("recording video of the %dx%d screen to %s", *first.size, self.path)
                return
            time.sleep(0.02)
        self.last_error = self._still_waiting = (
            f"ffmpeg has not written {self.path} after {START_TIMEOUT:g} s; still waiting"
        )

    def _launch(self, argv: list[str]) -> subprocess.Popen[bytes]:
        """In the spawner thread (see the module's docstring)."""
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            # stdout may be the MCP stdio transport: ffmpeg must never write there.
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            bufsize=0,  # a frame goes to ffmpeg in one write, not through a second buffer
            start_new_session=True,
            # PR_SET_PDEATHSIG is Linux's; Windows' subprocess takes no preexec_fn at all. SIGKILL
            # (KILL_SIGNAL off Windows): ffmpeg 5 has been seen to deadlock handling SIGTERM once its input had ended (five
            # threads in futex waits for minutes, the file held open), and a rig that died can do
            # nothing about it. The fragmented mp4 decodes up to its last whole fragment.
            preexec_fn=die_with_parent(KILL_SIGNAL) if sys.platform == "linux" else None,
        )

    def _pointer(self) -> tuple[int, int] | None:
        """Where to draw the pointer: None when the captures show it, or it cannot be read."""
        if not self.draws_pointer:
            return None
        try:
            at = self.observer.desktop.cursor_position()
        except DeskrigError:  # the capture that comes with it says what is wrong
            return None
        return at.x, at.y

    def _feed(self, changes: ScreenChanges, first: ScreenFrame) -> None:
        """The pump thread: each change of the screen or (where it is drawn) of the pointer's
        position, a heartbeat of an unchanged one, and the screen once more at the stop; then
        ffmpeg's end of stream."""
        if sys.platform != "win32":
            with contextlib.suppress(OSError, AttributeError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PUMP_NICENESS)
        still_wait = POINTER_STILL_POLL_SECONDS if self.draws_pointer else STOP_POLL_SECONDS
        last, pointer, failure = first, self._pointer(), ""
        moved_at = -POINTER_MOVING_SECONDS
        try:
            if not self._send(first, pointer):
                return
            sent_at = time.monotonic()
            while not self._stopping.is_set():
                moving = time.monotonic() - moved_at < POINTER_MOVING_SECONDS
                try:
                    frame = changes.next(1 / FRAME_RATE if moving else still_wait)
                except DeskrigError as exc:  # tried again a slow tick later; logged once
                    if exc.message != failure:
                        failure = exc.message
                        log.warning("video %s: cannot capture the screen: %s", self.path, exc.message)
                    frame = None
                if frame is not None and frame.size != first.size:
                    self._resized(first.size, frame.size)
                    return
                moved_to = self._pointer()
                if moved_to != pointer:
                    moved_at = time.monotonic()
                elif frame is None and time.monotonic() - sent_at < HEARTBEAT_SECONDS:
                    continue
                last, pointer = frame or last, moved_to
                if not self._send(last, pointer):
                    return
                sent_at = time.monotonic()
            self._send(last, self._pointer())  # the video lasts until the stop
        finally:
            with contextlib.suppress(OSError):
                assert self._process is not None and self._process.stdin is not None
                self._process.stdin.close()

    def _send(self, frame: ScreenFrame, pointer: tuple[int, int] | None) -> bool:
        """Hand one frame to ffmpeg, with the ``pointer`` drawn at its position if given; False
        once ffmpeg reads no more (the stderr reader says why)."""
        assert self._process is not None and self._process.stdin is not None
        rows = frame.bgrx
        if pointer is not None:
            region = frame.pixels.region
            rows = with_pointer(rows, frame.size, (region.x, region.y), pointer, frame.blocked)
        try:
            self._process.stdin.write(rows)
        except (OSError, ValueError):  # a broken pipe, or stdin closed by a stop that gave up waiting
            return False
        self.frames_written += 1
        self.pointer_drawn_at = pointer
        if self._still_waiting is not None:
            self._written_at_last()
        return True

    def _written_at_last(self) -> None:
        """In the pump, after a start that gave up waiting: once ffmpeg has written the file, the
        video records after all, and ``last_error`` no longer says it does not."""
        try:
            if self.path.stat().st_size == 0:
                return
        except OSError:  # not created yet
            return
        if self.last_error == self._still_waiting:
            self.last_error = None
        self._still_waiting = None
        if self.first_frame_at is None:
            self.first_frame_at = time.time()
        log.info("video %s: ffmpeg has written the file after a slow start", self.path)

    def _resized(self, size: tuple[int, int], now: tuple[int, int]) -> None:
        """The screen is another size than the video: end the video here, cleanly, and say so."""
        self.last_error = (
            f"the screen changed size from {size[0]}x{size[1]} to {now[0]}x{now[1]}: "
            "the video ends there (start a new recording for video of the new size)"
        )
        log.warning("video %s: %s", self.path, self.last_error)
        self.stopped_at = time.time()
        self._stopping.set()  # ffmpeg's exit is expected now

    def _end_at_start_up(self) -> None:
        """ffmpeg failed at start-up: stop the pump, read what ffmpeg said."""
        self._stopping.set()
        process = self._process
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait()
        for thread in (self._pump, self._reader):
            if thread is not None:
                thread.join(timeout=2)

    def _fail(self, message: str) -> DeskrigError:
        tail = self.stderr_tail()
        self.last_error = message + (f": {tail[-1]}" if tail else "")
        return DeskrigError(
            ErrorCode.RECORDING_ERROR,
            self.last_error,
            details={"ffmpeg_stderr": tail},
            remediation=f"Install {self.binary} (Debian: apt-get install ffmpeg) and check that the display "
            "is up; turn folders are recorded without video meanwhile.",
        )

    def _read_stderr(self) -> None:
        process = self._process
        assert process is not None and process.stderr is not None
        with process.stderr:
            for raw in process.stderr:
                line = raw.decode("utf-8", "replace").rstrip()
                self._stderr.append(line)
                self._note_input_start(line)
        status = process.wait()
        if self._stopping.is_set():
            return
        tail = self.stderr_tail(1)
        self.last_error = f"ffmpeg stopped unexpectedly with status {status}" + (
            f": {tail[0]}" if tail else ""
        )
        log.warning("%s (video %s)", self.last_error, self.path)

    def _note_input_start(self, line: str) -> None:
        """ffmpeg reports its input's first timestamp (``Duration: N/A, start: 1796103982.087``):
        the wall time the first frame arrived, which is the video's 0 s."""
        match = _INPUT_START.search(line)
        if match is not None:
            self.first_frame_at = float(match.group(1))

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Blocking and idempotent: end ffmpeg's input, then SIGTERM, then SIGKILL. Returns ffmpeg's status."""
        with self._lock:
            process = self._process
            if process is None:
                return None
            self._stopping.set()
            if self._pump is not None:
                self._pump.join(timeout=timeout)  # sends the last frame and closes ffmpeg's stdin
            for sig in (None, signal.SIGTERM, KILL_SIGNAL):
                if sig is not None and process.poll() is None:
                    log.warning("ffmpeg did not finish the video; sending %s", sig.name)
                    process.send_signal(sig)
                try:
                    process.wait(timeout=timeout if sig is None else 3.0)
                    break
                except subprocess.TimeoutExpired:
                    continue
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            if self._reader is not None:
                self._reader.join(timeout=2)
            if self.stopped_at is None:
                self.stopped_at = time.time()
            return process.returncode
