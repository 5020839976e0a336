"""Screen video through ffmpeg (``x11grab``), built with ffmpeg-python, that survives a crash.

The mp4 is fragmented (``empty_moov`` + 200 ms fragments, flushed as written), so whatever ffmpeg
wrote before a SIGKILL of ffmpeg or of the rig still decodes. A graceful stop sends ``q`` on
ffmpeg's stdin, which ends the file cleanly (exit 0). ffmpeg's stderr is kept in a bounded ring.

ffmpeg runs in its own session (a terminal's Ctrl-C reaches the rig, which then stops ffmpeg with
``q``) with a death signal, so it never outlives the rig. It is forked from one long-lived thread:
the death signal fires when the forking *thread* ends.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ffmpeg

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.procs import die_with_parent

log = logging.getLogger(__name__)

FRAME_RATE = 30
#: Lines of ffmpeg's stderr kept for diagnostics.
STDERR_LINES = 60
#: How long start() waits for ffmpeg to write the file header before calling it started.
START_TIMEOUT = 5.0
#: How long a graceful stop waits after ``q`` before SIGTERM, then SIGKILL.
STOP_TIMEOUT = 10.0

#: Forks every ffmpeg: one thread that lives as long as the process, for the death signal.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deskrig-ffmpeg-spawner")


def even(value: int) -> int:
    """H.264 in yuv420p wants even dimensions: round down."""
    return value - value % 2


def video_argv(binary: str, display: str, width: int, height: int, path: Path) -> list[str]:
    """The ffmpeg command line: x11grab of the whole screen to a fragmented H.264 mp4."""
    source = ffmpeg.input(
        display, f="x11grab", framerate=FRAME_RATE, video_size=(even(width), even(height)), draw_mouse=1
    )
    output = ffmpeg.output(
        source,
        str(path),
        f="mp4",
        vcodec="libx264",
        preset="ultrafast",
        pix_fmt="yuv420p",
        r=FRAME_RATE,
        movflags="+frag_keyframe+empty_moov",
        frag_duration=200_000,
        flush_packets=1,
    )
    # -nostats: no progress lines flooding stderr. (Never -nostdin: ``q`` arrives on stdin.)
    return [str(arg) for arg in ffmpeg.compile(output.global_args("-nostats"), cmd=binary)]


class VideoRecorder:
    """One ffmpeg process writing ``path``. ``last_error`` says why it is not (or no longer) recording."""

    def __init__(self, display: str, width: int, height: int, path: Path, binary: str = "ffmpeg") -> None:
        self.display = display
        self.size = (even(width), even(height))
        self.path = path
        self.binary = binary
        self.last_error: str | None = None
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self.started_at: float | None = None
        self.stopped_at: float | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stderr_tail(self, lines: int = 10) -> list[str]:
        return list(self._stderr)[-lines:]

    def start(self) -> None:
        """Blocking: spawn ffmpeg and wait until it writes the file; RECORDING_ERROR otherwise."""
        binary = shutil.which(self.binary)
        if binary is None:
            raise self._fail(f"ffmpeg is not installed (no {self.binary!r} on PATH)")
        argv = video_argv(binary, self.display, *self.size, self.path)

        def launch() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                # stdout may be the MCP stdio transport: ffmpeg must never write there.
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGTERM),
            )

        try:
            process = _SPAWNER.submit(launch).result()
        except OSError as exc:
            raise self._fail(f"cannot start ffmpeg: {exc}") from exc
        self._process = process
        self.started_at = time.time()
        self._reader = threading.Thread(
            target=self._read_stderr, args=(process,), name="deskrig-ffmpeg-stderr", daemon=True
        )
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self._reader.join(timeout=2)
                raise self._fail(f"ffmpeg exited at start-up with status {process.returncode}")
            if self.path.exists() and self.path.stat().st_size > 0:
                log.info("recording video of %s to %s", self.display, self.path)
                return
            time.sleep(0.02)
        self.last_error = f"ffmpeg has not written {self.path} after {START_TIMEOUT:g} s; still waiting"

    def _fail(self, message: str) -> DeskrigError:
        tail = self.stderr_tail()
        self.last_error = message + (f": {tail[-1]}" if tail else "")
        return DeskrigError(
            ErrorCode.RECORDING_ERROR,
            self.last_error,
            details={"ffmpeg_stderr": tail, "display": self.display},
            remediation="Install ffmpeg (Debian: apt-get install ffmpeg) and check that the display is up; "
            "turn folders are recorded without video meanwhile.",
        )

    def _read_stderr(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        with process.stderr:
            for raw in process.stderr:
                self._stderr.append(raw.decode("utf-8", "replace").rstrip())
        status = process.wait()
        if not self._stopping.is_set() and self.started_at is not None:
            tail = self.stderr_tail(1)
            self.last_error = f"ffmpeg stopped unexpectedly with status {status}" + (
                f": {tail[0]}" if tail else ""
            )
            log.warning("%s (video %s)", self.last_error, self.path)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Blocking and idempotent: ``q`` on stdin, then SIGTERM, then SIGKILL. Returns the exit status."""
        with self._lock:
            process = self._process
            if process is None:
                return None
            self._stopping.set()
            if process.poll() is None:
                try:
                    assert process.stdin is not None
                    process.stdin.write(b"q")
                    process.stdin.flush()
                except OSError:
                    pass  # already exiting
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None and process.poll() is None:
                    log.warning("ffmpeg did not stop after q; sending %s", sig.name)
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
