"""The session core: capacity, lifecycle, timeouts and artifacts, over any :class:`Runtime`.

One task per session owns every change of that session's state::

    queued --slot--> starting --/readyz--> ready --stop | idle | max duration--> stopping -> stopped
       \\                 \\                    \\
        queue timeout      start-up failure     rig crashed                               -> failed

While ready, the session's artifact mirror copies finished turns to the host and a watch loop
checks, every ``watch_interval``, that the container still runs, how long the rig has been idle
(the rig's ``/status`` ``last_activity``) and the session's deadline. Stopping finalizes the
recording (the mp4 arrives over the feed), saves the rig's log, then removes the container. A
crashed rig's session fails with the reason; what the mirror had copied stays.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType

import anyio
import httpx2
from anyio.abc import TaskGroup

from deskrig.client import tls_context
from deskrig.errors import DeskrigError, ErrorCode, file_system_error
from deskrig.orchestrator.models import OrchestratorConfig, SessionInfo, SessionSpec, SessionState
from deskrig.orchestrator.reaper import Lease, Reaper
from deskrig.orchestrator.recovery import Recovery, save_log_and_remove
from deskrig.orchestrator.rig_client import READYZ, mcp_url
from deskrig.orchestrator.runtime import LABEL_ORCHESTRATOR, Runtime
from deskrig.orchestrator.runtimes import make_runtime
from deskrig.orchestrator.session import Session, finalize, rig_request, watch
from deskrig.orchestrator.slots import Slots
from deskrig.orchestrator.state import Journal, JournalEntry, write_session_record

log = logging.getLogger("deskrig.orchestrator")


class Orchestrator:
    """Starts, watches and stops rig sessions. Use as ``async with Orchestrator(config) as orch``."""

    def __init__(
        self,
        config: OrchestratorConfig | None = None,
        runtime: Runtime | None = None,
        *,
        orchestrator_id: str | None = None,
    ) -> None:
        self.config = config or OrchestratorConfig()
        self.id = orchestrator_id or f"o{secrets.token_hex(4)}"
        self.runtime = runtime or make_runtime(self.config)
        self._sessions: dict[str, Session] = {}
        self._slots = Slots(self.config.max_sessions)
        self._starting = anyio.Semaphore(self.config.max_starting)
        self._lease = Lease(self.config.state_dir, self.id)
        #: Dead orchestrators' leases, held while rigs that name them run under this one.
        self._adopted_leases: dict[Path, Lease] = {}
        self._journal = Journal(self.config.state_dir, self.id)
        self.reaper = Reaper(self.runtime, self.id, self._live_ids)
        self._stack = contextlib.AsyncExitStack()
        self._tg: TaskGroup | None = None
        self._http: httpx2.AsyncClient | None = None

    # --- lifetime ----------------------------------------------------------------------------------

    async def __aenter__(self) -> Orchestrator:
        self._lease.acquire()
        try:
            self._http = await self._stack.enter_async_context(
                httpx2.AsyncClient(timeout=10.0, verify=tls_context())
            )
            self._tg = await self._stack.enter_async_context(anyio.create_task_group())
            self._slots.resize(await self.runtime.capacity(self.config.max_sessions))
            await self._recover()  # before the sweep, which would reap the rigs it re-adopts
            await self.reaper.sweep()
            self._tg.start_soon(self._reap_periodically)
        except BaseException:
            await self._close()
            raise
        log.info(
            "orchestrator %s up on %s: max %d sessions", self.id, self.runtime.name, self._slots.capacity
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with anyio.CancelScope(shield=True):
            await self.stop_all("the orchestrator shut down")
        await self._close()  # exits the task group entered in __aenter__: outside the shield

    async def _close(self) -> None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        try:
            await self._stack.aclose()
        finally:
            await self.runtime.close()
            for lease in self._adopted_leases.values():
                lease.release()
            self._journal.close()
            self._lease.release()

    async def _recover(self) -> None:
        """Re-adopt the rigs of dead predecessors that still serve; the rest are marked failed."""
        assert self._tg is not None and self._http is not None
        recovery = Recovery(self._journal, self.runtime, self._http, adopt=self.config.adopt_rigs)
        adoptable = await recovery.run()
        self._adopted_leases = recovery.leases
        for found in adoptable:
            info, handle = found.info, found.handle
            info.container = handle.name
            info.mcp_url = mcp_url(handle.endpoint)
            info.token = found.token
            slot = anyio.Event()
            slot.set()
            self._slots.hold(info.id)
            session = Session(info=info, token=found.token, slot=slot, handle=handle, adopted=True)
            self._sessions[info.id] = session
            self._journal.record(
                JournalEntry(session_id=info.id, artifacts_dir=info.artifacts_dir, token=found.token)
            )
            self.reaper.adopted_owners.add(handle.labels.get(LABEL_ORCHESTRATOR, ""))
            log.warning("session %s: re-adopted its rig %s from a dead orchestrator", info.id, handle.name)
            self._tg.start_soon(self._lifecycle, session, self._serve, name=f"session {info.id}")

    async def _reap_periodically(self) -> None:
        """Sweep, and follow the runtime's capacity (nodes join and leave a cluster)."""
        while True:
            await anyio.sleep(self.config.reap_interval)
            try:
                await self.reaper.sweep()
                self._slots.resize(await self.runtime.capacity(self.config.max_sessions))
            except DeskrigError as exc:
                log.warning("reaper: %s", exc.message)

    @property
    def capacity(self) -> int:
        """Rigs at once: ``max_sessions`` per node of the runtime (one node for docker)."""
        return self._slots.capacity

    def _live_ids(self) -> set[str]:
        return {sid for sid, session in self._sessions.items() if not session.done.is_set()}

    # --- the API -----------------------------------------------------------------------------------

    async def start(self, spec: SessionSpec, *, wait: bool = True) -> SessionInfo:
        """Queue a session; with ``wait``, return once it is ready (or raise why it is not)."""
        if self._tg is None:
            raise RuntimeError("use the Orchestrator as an async context manager")
        session_id = f"s{secrets.token_hex(5)}"
        directory = (
            Path(spec.artifacts_dir) if spec.artifacts_dir else self.config.artifacts_root / session_id
        )
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise file_system_error("create the session directory", directory, exc) from exc
        info = SessionInfo(
            id=session_id,
            state=SessionState.QUEUED,
            spec=spec,
            created_at=time.time(),
            artifacts_dir=str(directory.resolve()),
        )
        token = secrets.token_urlsafe(32)
        try:  # written first, so that a restarted orchestrator can say how this one ended
            self._journal.record(
                JournalEntry(session_id=session_id, artifacts_dir=info.artifacts_dir, token=token)
            )
        except OSError as exc:
            raise file_system_error("write the session journal in", self._journal.dir, exc) from exc
        session = Session(info=info, token=token, slot=self._slots.request(session_id))
        self._sessions[session_id] = session
        with contextlib.suppress(OSError):
            self._save(session)
        self._tg.start_soon(self._lifecycle, session, self._run, name=f"session {session_id}")
        if wait:
            return await self.wait(session_id)
        return self.get(session_id)

    async def wait(self, session_id: str) -> SessionInfo:
        """Wait until the session is ready or ended; raise its error if it failed."""
        session = self._session(session_id)
        await session.settled.wait()
        if session.info.state is SessionState.FAILED and session.info.error is not None:
            error = session.info.error
            raise DeskrigError(
                error.code, error.message, details=error.details, remediation=error.remediation
            )
        return self.get(session_id)

    async def stop(self, session_id: str, reason: str = "stopped by request") -> SessionInfo:
        """End a session (whatever its state) and return it once its container is gone."""
        session = self._session(session_id)
        if not session.done.is_set():
            if not session.stop_requested.is_set():
                session.stop_reason = reason
                session.stop_requested.set()
            if session.start_scope is not None:
                session.start_scope.cancel()
            await session.done.wait()
        return self.get(session_id)

    async def stop_all(self, reason: str) -> None:
        async with anyio.create_task_group() as tg:
            for session_id in self._live_ids():
                tg.start_soon(self.stop, session_id, reason)

    def get(self, session_id: str) -> SessionInfo:
        session = self._session(session_id)
        update: dict[str, object] = {"queue_position": self._slots.position(session_id)}
        if session.mirror is not None:
            update["mirror"] = session.mirror.report.model_copy(deep=True)
        return session.info.model_copy(update=update)

    def list(self) -> list[SessionInfo]:
        return [self.get(session_id) for session_id in self._sessions]

    async def logs(self, session_id: str, tail: int | None = None) -> str:
        """The rig's log: live from the runtime while it runs, else the copy saved on stop."""
        session = self._session(session_id)
        if session.handle is not None and not session.done.is_set():
            return await self.runtime.logs(session.handle, tail)
        try:
            lines = (session.dir / "rig.log").read_text(errors="replace").splitlines(keepends=True)
        except FileNotFoundError:
            return ""
        return "".join(lines if tail is None else lines[-tail:] if tail else [])

    def _session(self, session_id: str) -> Session:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise DeskrigError(
                ErrorCode.SESSION_NOT_FOUND,
                f"no session {session_id!r} in orchestrator {self.id}",
                details={"session": session_id},
            ) from None

    # --- one session's life ------------------------------------------------------------------------

    async def _lifecycle(self, session: Session, body: Callable[[Session], Awaitable[None]]) -> None:
        try:
            await body(session)
        except DeskrigError as exc:
            self._fail(session, exc)
        except Exception as exc:  # a bug in one session must not take the orchestrator down
            log.exception("session %s", session.info.id)
            self._fail(session, DeskrigError(ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))
        finally:
            with anyio.CancelScope(shield=True):
                await self._teardown(session)

    async def _run(self, session: Session) -> None:
        info = session.info
        with anyio.CancelScope() as start_scope:  # stop() cancels it while queued or starting
            session.start_scope = start_scope
            await self._admit(session)
            info.state = SessionState.STARTING
            info.phase = "waiting for a start-up slot (max_starting)"
            async with self._starting:
                info.phase = f"creating the rig from {info.spec.image} (pulling it if needed)"
                request = rig_request(
                    session, self.config, orchestrator_id=self.id, lease=self._lease.path.resolve()
                )
                session.handle = await self.runtime.create(request)
                info.container = session.handle.name
                info.mcp_url = mcp_url(session.handle.endpoint)
                info.token = session.token
                info.phase = f"waiting for the rig's {READYZ} (display, window manager, app)"
                with contextlib.suppress(OSError):
                    self._save(session)  # names the container, should this orchestrator die now
                await self.runtime.wait_ready(session.handle, session.timeout("ready_timeout", self.config))
        session.start_scope = None
        if start_scope.cancelled_caught or session.stop_requested.is_set() or session.handle is None:
            return
        await self._serve(session)

    async def _serve(self, session: Session) -> None:
        """A running rig, from ready until it stops or crashes."""
        info = session.info
        handle = session.handle
        assert handle is not None and self._http is not None
        info.state = SessionState.READY
        info.phase = None
        info.ready_at = info.ready_at or time.time()
        log.info("session %s ready at %s", info.id, info.mcp_url)
        self._save(session)
        session.settled.set()
        if info.spec.record:
            session.mirror = self.runtime.stream_artifacts(handle, session.token, session.dir)
            if session.adopted:
                session.mirror.resume()
        crash: DeskrigError | None = None  # raised outside the task group, which would wrap it
        async with anyio.create_task_group() as tg:
            if session.mirror is not None:
                tg.start_soon(session.mirror.run)
            try:
                await watch(session, self.runtime, self.config, self._http)
                info.state = SessionState.STOPPING
                info.phase = "finalizing the recording"
                await finalize(session, self.config, self._http)
            except DeskrigError as exc:
                crash = exc
            finally:
                if session.mirror is not None:
                    session.mirror.close()
        if crash is not None:
            raise crash

    async def _admit(self, session: Session) -> None:
        """Wait for a slot, up to the queue timeout (0: fail at once when all are busy)."""
        if session.slot.is_set():
            return
        queue_timeout = session.timeout("queue_timeout", self.config)
        position = self._slots.position(session.info.id)
        with anyio.move_on_after(queue_timeout):
            await session.slot.wait()
        if session.slot.is_set():
            return
        raise DeskrigError(
            ErrorCode.QUEUE_TIMEOUT,
            f"no free rig slot within {queue_timeout:g} s: all {self._slots.capacity} are busy",
            details={
                "max_sessions": self._slots.capacity,
                "queue_timeout": queue_timeout,
                "position": position,
            },
        )

    def _fail(self, session: Session, exc: DeskrigError) -> None:
        info = session.info
        info.state = SessionState.FAILED
        info.reason = exc.message
        info.error = exc.info()
        log.warning("session %s failed: %s", info.id, exc.message)

    async def _teardown(self, session: Session) -> None:
        info = session.info
        if session.handle is not None:
            if info.state is not SessionState.FAILED:
                info.state = SessionState.STOPPING
            info.phase = "saving the rig's log and removing it"
            try:
                await save_log_and_remove(self.runtime, session.handle, session.dir)
            except (DeskrigError, OSError) as exc:
                log.warning(
                    "session %s: cleaning up %s: %s (the reaper will retry)",
                    info.id,
                    session.handle.name,
                    exc,
                )
        self._slots.release(info.id)
        if info.state is not SessionState.FAILED:
            info.state = SessionState.STOPPED
            info.reason = session.stop_reason
        info.ended_at = time.time()
        info.phase = None
        with contextlib.suppress(OSError):
            self._save(session)
            self._journal.forget(info.id)
        log.info("session %s %s: %s", info.id, info.state.value, info.reason)
        session.settled.set()
        session.done.set()

    def _save(self, session: Session) -> None:
        write_session_record(self.get(session.info.id))
