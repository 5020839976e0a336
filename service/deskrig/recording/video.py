"""Screen video through ffmpeg, built with ffmpeg-python, that survives a crash.

What ffmpeg reads comes from the desktop backend (:meth:`~deskrig.desktop.base.DesktopBackend.screen_video`):
X11's display it grabs itself (``x11grab``); a Wayland screen comes from a screen recorder, the
backend's *feeder* (sway: wf-recorder), whose stdout is ffmpeg's stdin. Either way ffmpeg encodes
the same H.264 into the same mp4, and nothing here knows which backend it records.

The mp4 is fragmented (``empty_moov`` + 200 ms fragments, flushed as written), so whatever ffmpeg
wrote before a SIGKILL of ffmpeg (or of the feeder, or of the rig) still decodes. A graceful stop
ends the input: ``q`` on ffmpeg's stdin, or SIGINT to the feeder, whose end of stream makes ffmpeg
close the file cleanly (exit 0). Each program's stderr is kept in a bounded ring.

ffmpeg and the feeder run in their own sessions (a terminal's Ctrl-C reaches the rig, which then
stops them) with a death signal, so they never outlive the rig. They are forked from one
long-lived thread: the death signal fires when the forking *thread* ends.
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

import ffmpeg

from deskrig.desktop.base import ScreenVideo
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.procs import KILL_SIGNAL, die_with_parent

log = logging.getLogger(__name__)

FRAME_RATE = 30
#: Lines of each program's stderr kept for diagnostics.
STDERR_LINES = 60
#: How long start() waits for ffmpeg to write the file header before calling it started.
START_TIMEOUT = 5.0
#: How long a graceful stop waits for ffmpeg to finish the file before SIGTERM, then SIGKILL.
STOP_TIMEOUT = 10.0
#: How long a graceful stop waits for the feeder to end after SIGINT before SIGKILL (ffmpeg then
#: still closes the file cleanly: its input has ended either way).
FEEDER_STOP_TIMEOUT = 3.0

#: ffmpeg's report of its input's first timestamp.
_INPUT_START = re.compile(r"^\s*Duration: .*, start: (\d+\.\d+)")
#: An input start this close to when ffmpeg was started is a wall-clock time.
WALL_CLOCK_SLACK = 60.0

#: Forks every ffmpeg and feeder: one thread that lives as long as the process, for the death signal.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deskrig-ffmpeg-spawner")


def video_argv(binary: str, source: ScreenVideo, path: Path) -> list[str]:
    """The ffmpeg command line: ``source`` to a fragmented H.264 mp4 of the source's (even) size."""
    stream = ffmpeg.input(source.source, **source.options)
    output = ffmpeg.output(
        stream,
        str(path),
        f="mp4",
        vcodec="libx264",
        preset="ultrafast",
        pix_fmt="yuv420p",
        r=FRAME_RATE,
        # A no-op for a grab of that size; trims an odd-sized screen a recorder hands over whole.
        vf=f"crop={source.width}:{source.height}:0:0",
        movflags="+frag_keyframe+empty_moov",
        frag_duration=200_000,
        flush_packets=1,
    )
    # -nostats: no progress lines flooding stderr. (Never -nostdin: ``q`` arrives on stdin.)
    return [str(arg) for arg in ffmpeg.compile(output.global_args("-nostats"), cmd=binary)]


class VideoRecorder:
    """One ffmpeg process (fed by the source's recorder, if it has one) writing ``path``.

    ``last_error`` says why it is not (or no longer) recording."""

    def __init__(self, source: ScreenVideo, path: Path, binary: str = "ffmpeg") -> None:
        self.source = source
        self.path = path
        self.binary = binary
        self.last_error: str | None = None
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._feeder_stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._process: subprocess.Popen[bytes] | None = None
        self._feeder: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        #: Taken by the first program to stop unexpectedly: its exit is the cause worth reporting.
        self._first_death = threading.Lock()
        self._lock = threading.Lock()
        self._readers: list[threading.Thread] = []
        self.started_at: float | None = None
        #: Wall time (epoch seconds) of the video's 0 s: see :meth:`_note_input_start`; else when
        #: ffmpeg first wrote the file (its header follows the first encoded frame, ~0.15 s late).
        self.first_frame_at: float | None = None
        self.stopped_at: float | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def feeder_pid(self) -> int | None:
        return self._feeder.pid if self._feeder is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stderr_tail(self, lines: int = 10) -> list[str]:
        return list(self._stderr)[-lines:]

    def _programs(self) -> list[tuple[str, str]]:
        """(program, Debian package) of ffmpeg and the feeder."""
        feeder = self.source.feeder
        extra = [(feeder.argv[0], feeder.package or feeder.argv[0])] if feeder is not None else []
        return [(self.binary, "ffmpeg"), *extra]

    def start(self) -> None:
        """Blocking: spawn ffmpeg (and its feeder) and wait until it writes the file; RECORDING_ERROR otherwise."""
        found = {program: shutil.which(program) for program, _ in self._programs()}
        for program, path in found.items():
            if path is None:
                raise self._fail(f"{program} is not installed (no {program!r} on PATH)")
        argv = video_argv(found[self.binary] or self.binary, self.source, self.path)

        try:
            feeder, process = _SPAWNER.submit(self._launch, argv, found).result()
        except OSError as exc:
            raise self._fail(f"cannot start the screen recording: {exc}") from exc
        self._feeder, self._process = feeder, process
        self.started_at = time.time()
        self._read(process, self.binary, self._stderr)
        if feeder is not None:
            self._read(feeder, self._feeder_name, self._feeder_stderr)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if feeder is not None and feeder.poll() is not None:
                self._end_at_start_up()
                raise self._fail(
                    f"{self._feeder_name} exited at start-up with status {feeder.returncode}",
                    self._feeder_stderr,
                )
            if process.poll() is not None:
                self._end_at_start_up()
                raise self._fail(f"ffmpeg exited at start-up with status {process.returncode}")
            if self.path.exists() and self.path.stat().st_size > 0:
                if self.first_frame_at is None:
                    self.first_frame_at = time.time()
                log.info("recording video of %s to %s", self.source.name, self.path)
                return
            time.sleep(0.02)
        self.last_error = f"ffmpeg has not written {self.path} after {START_TIMEOUT:g} s; still waiting"

    @property
    def _feeder_name(self) -> str:
        return self.source.feeder.argv[0] if self.source.feeder is not None else ""

    def _launch(
        self, argv: list[str], found: dict[str, str | None]
    ) -> tuple[subprocess.Popen[bytes] | None, subprocess.Popen[bytes]]:
        """In the spawner thread: the feeder first (its stdout is ffmpeg's stdin), then ffmpeg."""
        feeder_spec = self.source.feeder
        feeder = None
        if feeder_spec is not None:
            feeder = subprocess.Popen(
                [found[feeder_spec.argv[0]] or feeder_spec.argv[0], *feeder_spec.argv[1:]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd="/",
                env={**os.environ, **feeder_spec.env},
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGTERM),
            )
        try:
            process = subprocess.Popen(
                argv,
                stdin=feeder.stdout if feeder is not None else subprocess.PIPE,
                # stdout may be the MCP stdio transport: ffmpeg must never write there.
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
                # PR_SET_PDEATHSIG is Linux's; Windows' subprocess takes no preexec_fn at all.
                preexec_fn=die_with_parent(signal.SIGTERM) if sys.platform == "linux" else None,
            )
        except OSError:
            if feeder is not None:
                feeder.kill()
                feeder.wait()
            raise
        finally:
            if feeder is not None and feeder.stdout is not None:
                feeder.stdout.close()  # ffmpeg's now: its end of stream is the feeder's exit
        return feeder, process

    def _read(self, process: subprocess.Popen[bytes], program: str, ring: deque[str]) -> None:
        reader = threading.Thread(
            target=self._read_stderr,
            args=(process, program, ring),
            name=f"deskrig-{program}-stderr",
            daemon=True,
        )
        self._readers.append(reader)
        reader.start()

    def _end_at_start_up(self) -> None:
        """One of the two failed at start-up: end the other, read what both said."""
        self._stopping.set()
        for process in (self._feeder, self._process):
            if process is not None and process.poll() is None:
                process.kill()
            if process is not None:
                process.wait()
        for reader in self._readers:
            reader.join(timeout=2)

    def _fail(self, message: str, ring: deque[str] | None = None) -> DeskrigError:
        tail = list(ring if ring is not None else self._stderr)[-10:]
        self.last_error = message + (f": {tail[-1]}" if tail else "")
        details: dict[str, object] = {"ffmpeg_stderr": self.stderr_tail(), "display": self.source.name}
        if self.source.feeder is not None:
            details["feeder_stderr"] = list(self._feeder_stderr)[-10:]
        programs = [program for program, _ in self._programs()]
        packages = [package for _, package in self._programs()]
        return DeskrigError(
            ErrorCode.RECORDING_ERROR,
            self.last_error,
            details=details,
            remediation=f"Install {' and '.join(programs)} (Debian: apt-get install {' '.join(packages)}) "
            "and check that the display is up; turn folders are recorded without video meanwhile.",
        )

    def _read_stderr(self, process: subprocess.Popen[bytes], program: str, ring: deque[str]) -> None:
        assert process.stderr is not None
        with process.stderr:
            for raw in process.stderr:
                line = raw.decode("utf-8", "replace").rstrip()
                ring.append(line)
                if process is self._process:
                    self._note_input_start(line)
        status = process.wait()
        if self._stopping.is_set() or self.started_at is None:
            return
        # The first program to stop unexpectedly is the cause; what the other does next follows.
        if self._first_death.acquire(blocking=False):
            tail = list(ring)[-1:]
            self.last_error = f"{program} stopped unexpectedly with status {status}" + (
                f": {tail[0]}" if tail else ""
            )
            log.warning("%s (video %s)", self.last_error, self.path)
        feeder = self._feeder
        if process is self._process and feeder is not None and feeder.poll() is None:
            feeder.kill()  # nothing reads its frames any more

    def _note_input_start(self, line: str) -> None:
        """x11grab stamps frames with the wall clock, and ffmpeg reports its input's first one
        (``Duration: N/A, start: 1796103982.087386``): the exact wall time of the video's 0 s.
        A piped feeder's stream starts at 0 instead, which is no wall time and is ignored."""
        match = _INPUT_START.search(line)
        if match is None or self.started_at is None:
            return
        start = float(match.group(1))
        if abs(start - self.started_at) < WALL_CLOCK_SLACK:
            self.first_frame_at = start

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Blocking and idempotent: end ffmpeg's input, then SIGTERM, then SIGKILL. Returns ffmpeg's status."""
        with self._lock:
            process = self._process
            if process is None:
                return None
            self._stopping.set()
            if process.poll() is None:
                self._end_input(process)
            for sig in (None, signal.SIGTERM, KILL_SIGNAL):
                if sig is not None and process.poll() is None:
                    log.warning("ffmpeg did not finish the video; sending %s", sig.name)
                    process.send_signal(sig)
                try:
                    process.wait(timeout=timeout if sig is None else 3.0)
                    break
                except subprocess.TimeoutExpired:
                    continue
            feeder = self._feeder
            if feeder is not None and feeder.poll() is None:
                feeder.kill()
                feeder.wait()
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            for reader in self._readers:
                reader.join(timeout=2)
            if self.stopped_at is None:
                self.stopped_at = time.time()
            return process.returncode

    def _end_input(self, process: subprocess.Popen[bytes]) -> None:
        """Ask for the end of the video: SIGINT to the feeder (ffmpeg reads its end of stream), or
        ``q`` to an ffmpeg grabbing the screen itself."""
        feeder = self._feeder
        if feeder is None:
            try:
                assert process.stdin is not None
                process.stdin.write(b"q")
                process.stdin.flush()
            except OSError:
                pass  # already exiting
            return
        if feeder.poll() is None:
            feeder.send_signal(signal.SIGINT)
        try:
            feeder.wait(timeout=FEEDER_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop after SIGINT; killing it", self._feeder_name)
            feeder.kill()
            feeder.wait()
