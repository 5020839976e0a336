"""The recorder: every recording of one server, and the action observer that feeds them.

Two kinds of recording:

- the **boot** recording (``--record DIR`` / ``DESKRIG_RECORD``) takes every action of every client
  from start-up until the server stops;
- a **session** recording (``start_recording``) belongs to the client that started it (its
  identity, plus its MCP session where the protocol has one: see ``deskrig.identity``) and takes
  only that client's actions. It lives beside the boot recording (a client that starts one on a
  rig recording from boot gets both) and ends with ``stop_recording``, a new ``start_recording``
  (which replaces it), the client's disconnect (session protocols only), or
  ``recording_idle_timeout`` seconds without an action from its owner (reading its state does not
  count): the one end a stateless (2026-07-28) client's forgotten recording has before the server
  stops.

Each action is observed once before it (synchronously, ahead of the action, reusing the window
list its target resolver read) and once after it, through the same observation path as the
screenshot tools; an after-observation still current when the next action starts is that action's
before-observation (see :mod:`deskrig.recording.moments`). The same turn is handed to every
recording that wants it; encoding and writing happen on the recordings' writer threads, off the
event loop.

**The after-observation waits for the next action.** It is taken :data:`AFTER_CAPTURE_DELAY`
after the action answered, unless the next recorded action of the same target comes first (a
client acting back to back): that action's before-observation is then this turn's after too, one
observation where two were taken. Both mean the same: the target at an instant after this action
and before the next one (which is why the next action waits for an after-observation under way).
Anything else that waits for the turns (the next action of another target or client, stopping or
restarting a recording, a client's disconnect) has it taken at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from deskrig.a11y.access import A11yAccess
from deskrig.config import Settings
from deskrig.errors import DeskrigError, ErrorCode, ErrorInfo
from deskrig.idle import IdleExpiry
from deskrig.observation import Observer
from deskrig.recording.moments import capture_moment, target_key
from deskrig.recording.session import EndReason, Recording, RecordingState, Wakeups
from deskrig.recording.signing import TurnSigner
from deskrig.recording.turns import Moment, TurnRecord

if TYPE_CHECKING:
    from deskrig.services import AnyTool, CallInfo, Services, ToolResult

log = logging.getLogger(__name__)

#: How many clients' final recording states are kept (a rig may serve many short sessions).
REMEMBERED_CLIENTS = 256
#: How long a disconnect waits for the client's last "after" capture.
AFTER_CAPTURE_GRACE = 2.0
#: Seconds an action's "after" observation waits for the next action to take it (see the module
#: docstring): well beyond a client's turnaround (the reply read, the next call sent and its target
#: resolved: 5-20 ms in a rig process on a loaded 2-core machine), well short of an agent's
#: (hundreds of ms), which finds it taken.
AFTER_CAPTURE_DELAY = 0.05


@dataclass
class PendingTurn:
    """What ``begin`` hands to ``end``: where the turn goes and the state before the action."""

    recordings: list[Recording]
    tool: str
    arguments: dict[str, Any]
    before: Moment | None
    capture_seconds: float


@dataclass
class AwaitedAfter:
    """A turn whose action has answered, and its "after" observation, waiting to be taken (see
    the module docstring)."""

    turn: PendingTurn
    call: CallInfo
    action: dict[str, Any]
    #: Set to take it at once.
    hurry: asyncio.Event = field(default_factory=asyncio.Event)
    #: The next action's before-observation is this turn's after: it is not taken on its own.
    claimed: bool = False
    #: Being taken on its own: no action may claim it any more.
    taking: bool = False


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RecordingRegistry:
    """Owns the boot recording and one session recording per client; observes action tools."""

    def __init__(self, observer: Observer, settings: Settings, a11y: A11yAccess | None = None) -> None:
        """``observer``: the desktop under the server's security policy (what turns and video show);
        ``a11y``: its accessibility source, the tools' own access to it."""
        self.observer = observer
        #: Shared with the tools: one event feed and one live mirror per app, kept current for both.
        self.a11y = a11y
        self.boot: Recording | None = None
        #: The recording started last (boot or session; stopped or not): the one the rig's /view shows.
        self.latest: Recording | None = None
        #: Woken whenever :attr:`latest` becomes another recording.
        self.started = Wakeups()
        self._sessions: dict[str, Recording] = {}
        #: Each session recording's start or its owner's last action; stops those left idle.
        self._idle = IdleExpiry(settings.recording_idle_timeout, self._stop_idle, "deskrig-recording-idle")
        #: The final state of each client's last stopped recording, for ``stop_recording`` twice.
        self._stopped: dict[str, RecordingState] = {}
        #: Each client's recording while it is being stopped (its last turns written, its video
        #: finished), with why it ends: in neither of the above until its final state is kept.
        self._stopping: dict[str, tuple[Recording, EndReason]] = {}
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._teardowns: list[threading.Thread] = []
        #: The turns waiting for their "after" observation, each with the task that takes it.
        self._afters: dict[asyncio.Task[None], AwaitedAfter] = {}
        #: The last action's "after": the next action's "before" where still current (see
        #: deskrig.recording.moments).
        self._last_after: Moment | None = None
        #: Signs every turn written, and checks the turns replay_trajectory runs.
        self.signer = TurnSigner.from_settings(settings)

    # ---- starting and stopping (blocking: call from a worker thread) ------------------------------

    def _video(self, video: bool) -> Observer | None:
        """The observer whose screen a recording's video shows, if asked. Its frames have blocked
        windows blacked out, like every observation; refused under PII masking, which would have
        to OCR up to 30 frames a second: no pixels a client may not see are written silently."""
        if not video:
            return None
        if self.observer.masks():
            raise DeskrigError(
                ErrorCode.RECORDING_ERROR,
                "video cannot be recorded while PII masking is on: its frames would not be masked",
                details={"pii_masking": True},
                remediation="Record without video (the turn folders' images are masked), or turn PII masking off.",
            )
        return self.observer

    def _check_free(self, output_dir: Path, replacing: Recording | None) -> None:
        with self._lock:
            active = [r for r in [self.boot, *self._sessions.values()] if r is not None and r.active]
        for recording in active:
            if recording is not replacing and recording.output_dir == output_dir:
                raise DeskrigError(
                    ErrorCode.RECORDING_ERROR,
                    f"{output_dir} is already being recorded to by another "
                    f"{'recording from boot' if recording.scope == 'boot' else 'MCP session'}",
                    details={"output_dir": str(output_dir), "scope": recording.scope},
                    remediation="Record to another folder.",
                )

    def start_boot(self, output_dir: Path, video: bool) -> RecordingState:
        """Record every client's actions to ``output_dir`` until :meth:`close`."""
        source = self._video(video)
        recording = Recording(output_dir, "boot")
        recording.start(source)
        self.boot = recording
        self._started(recording)
        return recording.state()

    def start_session(self, client_id: str, output_dir: Path, video: bool) -> RecordingState:
        """Start (or restart) the session recording of ``client_id``."""
        source = self._video(video)
        with self._start_lock:
            with self._lock:
                previous = self._sessions.get(client_id)
            self._check_free(output_dir, previous)
            if previous is not None:
                self._remember(client_id, previous.stop(), "restarted")
            recording = Recording(output_dir, "session", owner=client_id)
            recording.start(source)
            with self._lock:
                self._sessions[client_id] = recording
            self._idle.used(client_id)
            self._started(recording)
            return recording.state()

    def _started(self, recording: Recording) -> None:
        self.latest = recording
        self.started.wake()

    def stop_session(self, client_id: str) -> RecordingState:
        """Stop the client's recording; its final state (also when it was already stopped)."""
        recording = self._take(client_id, "stop_recording")
        if recording is None:
            return self._stopped.get(client_id) or self.session_state(client_id)
        return self._remember(client_id, recording.stop(), "stop_recording")

    def _take(self, client_id: str, ended_by: EndReason) -> Recording | None:
        """The client's running recording, moved to those being stopped (for ``ended_by``)."""
        self._idle.forget(client_id)
        with self._lock:
            recording = self._sessions.pop(client_id, None)
            if recording is not None:
                self._stopping[client_id] = (recording, ended_by)
            return recording

    def _remember(self, client_id: str, state: RecordingState, ended_by: EndReason) -> RecordingState:
        state = state.model_copy(update={"ended_by": ended_by})
        with self._lock:
            self._stopping.pop(client_id, None)
            self._stopped.pop(client_id, None)
            self._stopped[client_id] = state
            while len(self._stopped) > REMEMBERED_CLIENTS:
                del self._stopped[next(iter(self._stopped))]
        return state

    def touch(self, client_id: str) -> None:
        """``client_id`` made an action: its recording is not idle."""
        self._idle.touch(client_id)

    def _stop_idle(self, client_id: str) -> None:
        """Stop ``client_id``'s session recording: its owner made no action for ``recording_idle_timeout``."""
        recording = self._take(client_id, "idle_timeout")
        if recording is not None:
            log.info("recording of %s idle for %gs: stopping it", client_id, self._idle.timeout)
            self._remember(client_id, recording.stop(), "idle_timeout")

    def session_state(self, client_id: str) -> RecordingState:
        """The client's recording now: running, being stopped (why it ends, its turns so far), or
        the last one stopped; a blank state when it has none."""
        with self._lock:
            recording = self._sessions.get(client_id)
            stopping = self._stopping.get(client_id)
            last = self._stopped.get(client_id)
        if recording is not None:
            return recording.state()
        if stopping is not None:
            stopped, ended_by = stopping
            return stopped.state().model_copy(update={"ended_by": ended_by})
        if last is not None:
            return last
        return RecordingState(recording=False, output_dir=None, turns=0, video_path=None, last_error=None)

    async def settled_session_state(self, client_id: str) -> RecordingState:
        """:meth:`session_state`, after the stop of a recording being stopped is done (its queued
        turns written, its video finished). Only that wait takes a worker thread: any other answer
        is read here, without leaving the event loop (the thread hop was most of the call)."""
        with self._lock:
            stopping = self._stopping.get(client_id)
        if stopping is None:
            return self.session_state(client_id)
        stopped, ended_by = stopping
        # The stop is idempotent and waits for one in progress; the state is the one it keeps.
        state = await anyio.to_thread.run_sync(stopped.stop)
        return state.model_copy(update={"ended_by": ended_by})

    async def client_closed(self, client_id: str) -> None:
        """The client disconnected (or its session ended): finish its recording in the background."""
        with anyio.move_on_after(AFTER_CAPTURE_GRACE):
            await self.settle()  # its last turn
        recording = self._take(client_id, "disconnect")
        if recording is None:
            return
        log.info("client %s is gone: finishing its recording in %s", client_id, recording.output_dir)

        def finish() -> None:
            self._remember(client_id, recording.stop(), "disconnect")

        thread = threading.Thread(target=finish, name="deskrig-recording-teardown")
        thread.start()
        with self._lock:
            self._teardowns = [t for t in self._teardowns if t.is_alive()] + [thread]

    def close(self) -> None:
        """Stop every recording, the boot one included, and wait until all are final."""
        self._idle.close()
        with self._lock:
            sessions = list(self._sessions.items())
            self._sessions.clear()
            self._stopping.update((client_id, (r, "server_stop")) for client_id, r in sessions)
            teardowns = list(self._teardowns)
        for client_id, recording in sessions:
            self._remember(client_id, recording.stop(), "server_stop")
        if self.boot is not None:
            self.boot.stop()
        for thread in teardowns:
            thread.join()

    # ---- the action observer -----------------------------------------------------------------------

    def shown_to(self, client_id: str) -> Recording | None:
        """The recording whose turns a client's MCP resources show: its running session
        recording, else the rig's boot recording."""
        with self._lock:
            return self._sessions.get(client_id) or self.boot

    def _recordings_for(self, client_id: str) -> list[Recording]:
        with self._lock:
            candidates = [self.boot, self._sessions.get(client_id)]
        return [r for r in candidates if r is not None and r.active]

    def _recording_any(self) -> bool:
        with self._lock:
            return any(r is not None and r.active for r in [self.boot, *self._sessions.values()])

    async def settle(self) -> None:
        """Take the "after" observations awaited on this loop at once, and wait for them (before
        the next action, or a stop)."""
        loop = asyncio.get_running_loop()
        pending = [task for task in self._afters if task.get_loop() is loop]
        for task in pending:
            self._afters[task].hurry.set()
        if pending:
            await asyncio.wait(pending)

    def _claim_after(self, call: CallInfo, spec: AnyTool, refused: ErrorInfo | None) -> AwaitedAfter | None:
        """The turn whose "after" observation this action's "before" one is to be: the one turn
        awaiting it on this loop, when it is of the same target and not being taken yet, and this
        action is observed before it runs. (Synchronous: no other task runs between the check and
        the claim.) Only the one: of two actions answered at once, the one claimed would be
        handed to the recordings after the other, though it may have answered first."""
        if refused is not None or not spec.recorded or not self._recordings_for(call.client_id):
            return None
        loop = asyncio.get_running_loop()
        awaited = [
            after for task, after in self._afters.items() if task.get_loop() is loop and not task.done()
        ]
        if len(awaited) != 1:
            return None
        after = awaited[0]
        if after.taking or after.claimed or target_key(after.call.target) != target_key(call.target):
            return None
        after.claimed = True
        after.hurry.set()  # its task has nothing more to do
        return after

    async def begin(
        self, call: CallInfo, spec: AnyTool, arguments: dict[str, Any], refused: ErrorInfo | None
    ) -> PendingTurn | None:
        claimed = self._claim_after(call, spec, refused)
        before = None
        try:
            # No action may change the screen while the previous one's "after" is being captured.
            await self.settle()
            self.touch(call.client_id)
            if not spec.recorded:
                return None
            recordings = self._recordings_for(call.client_id)
            if not recordings and claimed is None:
                if not self._recording_any():
                    self._last_after = None  # nothing to offer it to: let its frame go
                return None
            started = time.perf_counter()
            if refused is None:
                target = call.target
                observation = self.observer.observe(target.windows if target is not None else None)
                before = await capture_moment(
                    observation, self.a11y, target, previous=self._last_after, note_seen=claimed is not None
                )
        finally:  # also when cancelled, or failed unexpectedly: the turn claimed still gets an "after"
            if claimed is not None:
                self._claimed_after(claimed, before)
        if not recordings:  # stopped while the turn before was awaited
            return None
        return PendingTurn(recordings, spec.name, dict(arguments), before, time.perf_counter() - started)

    def _claimed_after(self, claimed: AwaitedAfter, moment: Moment | None) -> None:
        """Hand ``claimed``'s turn over with ``moment`` as its "after"; without one (the
        observation failed unexpectedly), have its own taken, as it would have been."""
        if moment is None:
            self._await_after(AwaitedAfter(claimed.turn, claimed.call, claimed.action), delay=0.0)
            return
        self._last_after = moment  # offered to the next action, as an "after" is
        self._hand_over(claimed.turn, claimed.call, claimed.action, moment)

    async def end(
        self,
        token: object,
        call: CallInfo,
        result: ToolResult | None,
        error: ErrorInfo | None,
        duration_ms: float,
    ) -> None:
        """The "after" observation is awaited (see the module docstring): it is not part of the
        action's latency, and :meth:`settle` makes the next action wait for it."""
        if not isinstance(token, PendingTurn):
            return
        action = self._action(token, call, result, error, duration_ms)
        if self.observer.masks() and self.observer.masker is not None:
            # Typed text and the names in results are what a turn's readers (and the feed) see too.
            action = self.observer.masker.redact_data(action)
        if token.before is None:
            self._hand_over(token, call, action, None)
            return
        self._await_after(AwaitedAfter(token, call, action), AFTER_CAPTURE_DELAY)

    def _await_after(self, after: AwaitedAfter, delay: float) -> None:
        task = asyncio.get_running_loop().create_task(self._capture_after(after, delay))
        self._afters[task] = after
        task.add_done_callback(self._afters.pop)

    async def _capture_after(self, after: AwaitedAfter, delay: float) -> None:
        """Take ``after``'s observation once ``delay`` has passed or it is hurried, unless the next
        action claimed it."""
        with anyio.move_on_after(delay):
            await after.hurry.wait()
        if after.claimed:
            return
        after.taking = True
        try:
            moment = await capture_moment(
                self.observer.observe(), self.a11y, after.call.target, note_seen=True
            )
        except Exception:  # the task has no caller to report to
            log.exception("capturing the state after %s failed", after.turn.tool)
            return
        self._last_after = moment
        self._hand_over(after.turn, after.call, after.action, moment)

    def _hand_over(
        self, token: PendingTurn, call: CallInfo, action: dict[str, Any], after: Moment | None
    ) -> None:
        target = call.target
        record = TurnRecord(
            tool=token.tool,
            action=action,
            before=token.before,
            after=after,
            click_point=target.point if target is not None else None,
            signer=self.signer,
        )
        for recording in token.recordings:
            recording.enqueue(record)

    @staticmethod
    def _action(
        token: PendingTurn,
        call: CallInfo,
        result: ToolResult | None,
        error: ErrorInfo | None,
        duration_ms: float,
    ) -> dict[str, Any]:
        """action.json. ``duration_ms`` is the call's own time, without the recorder's before-capture."""
        target = call.target
        own_ms = max(0.0, duration_ms - token.capture_seconds * 1000)
        return {
            "tool": token.tool,
            "arguments": token.arguments,
            "result": result.structured.model_dump(mode="json", exclude_none=True) if result else None,
            "is_error": error is not None,
            "error": error.model_dump(mode="json", exclude_none=True) if error else None,
            "pid": target.pid if target else None,
            "window_id": target.window_id if target else None,
            "window_title": target.window_title if target else None,
            "click_point": target.point.model_dump() if target and target.point else None,
            "element": target.element.model_dump(mode="json") if target and target.element else None,
            "timestamp": _iso(datetime.now(UTC) - timedelta(milliseconds=duration_ms)),
            "duration_ms": round(own_ms, 3),
            "client_id": call.client_id,
        }


def registry_or_none(services: Services) -> RecordingRegistry | None:
    """The server's recorder, if it has one. :class:`~deskrig.services.Services` sits below this
    package, so it holds the recorder by its interface (:class:`~deskrig.services.Recorder`); the
    type is narrowed here, in one place (a static type would need ``Services`` generic in its
    recorder, through every handler's signature)."""
    recorder = services.recorder
    return recorder if isinstance(recorder, RecordingRegistry) else None


def registry_of(services: Services) -> RecordingRegistry:
    """The server's recorder; RECORDING_ERROR when it has none."""
    registry = registry_or_none(services)
    if registry is None:
        raise DeskrigError(ErrorCode.RECORDING_ERROR, "this server has no recorder")
    return registry
