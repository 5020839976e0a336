"""One session as the core runs it, and the steps of its life that need no more of the core:
the rig it asks the runtime for, the watch over that rig while it serves, and the finalize that
closes its recording."""

from __future__ import annotations

import logging
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.models import RIG_RECORD_DIR, OrchestratorConfig, SessionInfo
from deskrig.orchestrator.reaper import host_id
from deskrig.orchestrator.rig_client import RigClient
from deskrig.orchestrator.runtime import ArtifactStream, RigHandle, RigRequest, Runtime, rig_labels
from deskrig.orchestrator.waits import LOG_TAIL, last_words

log = logging.getLogger("deskrig.orchestrator")

#: The feed must have been quiet this long after finalize before the container goes.
SETTLE_QUIET = 0.5
#: How long a running session outlives an engine that does not answer.
ENGINE_GRACE = 30.0
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


@dataclass
class Session:
    """A session's info and token, its rig and mirror once it has them, and the events its task
    signals: ready or ended (``settled``), asked to stop, ``done``."""

    info: SessionInfo
    token: str
    slot: anyio.Event  # set once the session holds a slot
    handle: RigHandle | None = None
    mirror: ArtifactStream | None = None
    stop_reason: str = "stopped by request"
    start_scope: anyio.CancelScope | None = None
    adopted: bool = False  # taken over from a dead orchestrator, already running
    stop_requested: anyio.Event = field(default_factory=anyio.Event)
    settled: anyio.Event = field(default_factory=anyio.Event)  # ready, or ended
    done: anyio.Event = field(default_factory=anyio.Event)

    @property
    def dir(self) -> Path:
        return Path(self.info.artifacts_dir)

    def timeout(self, name: str, config: OrchestratorConfig) -> float:
        value = getattr(self.info.spec, name)
        return float(getattr(config, name) if value is None else value)


def rig_request(
    session: Session, config: OrchestratorConfig, *, orchestrator_id: str, lease: Path
) -> RigRequest:
    """What to ask the runtime for; sets the session's deadline (``expires_at``), which its labels carry."""
    spec = session.info.spec
    bind = config.bind_address
    hosts = [*_LOOPBACK_HOSTS, *([bind] if bind not in ("0.0.0.0", "::", "", *_LOOPBACK_HOSTS) else [])]
    env = {
        **spec.env,
        "DESKRIG_TOKEN": session.token,
        # Clients reach the rig on a published port, so its Host header is not the rig's own.
        "DESKRIG_ALLOWED_HOSTS": ",".join([*hosts, *config.allowed_hosts]),
        "DESKRIG_RECORD": RIG_RECORD_DIR if spec.record else "",
    }
    if spec.video:
        env["DESKRIG_RECORD_VIDEO"] = "1"
    if spec.size:
        env["DESKRIG_SIZE"] = spec.size
    if spec.backend:
        env["DESKRIG_BACKEND"] = spec.backend
    max_duration = session.timeout("max_duration", config)
    if max_duration:
        session.info.expires_at = time.time() + max_duration
    labels = rig_labels(
        orchestrator_id=orchestrator_id,
        session_id=session.info.id,
        expires_at=session.info.expires_at,
        host=host_id(),
        lease=lease,
    )
    command = shlex.split(spec.app) if spec.app else None
    return RigRequest(session.info.id, spec.image, command, env, labels)


async def watch(
    session: Session, runtime: Runtime, config: OrchestratorConfig, http: httpx2.AsyncClient
) -> None:
    """Return when the session should stop (its ``stop_reason`` says why); raise if the rig died."""
    assert session.handle is not None
    idle_timeout = session.timeout("idle_timeout", config)
    engine_lost_at: float | None = None
    while True:
        with anyio.move_on_after(config.watch_interval):
            await session.stop_requested.wait()
        if session.stop_requested.is_set():
            return
        try:
            status = await runtime.status(session.handle)
            engine_lost_at = None
        except DeskrigError as exc:  # a restarting engine is not a dead rig, for a while
            engine_lost_at = engine_lost_at or time.monotonic()
            if (
                exc.code is not ErrorCode.RUNTIME_UNAVAILABLE
                or time.monotonic() - engine_lost_at > ENGINE_GRACE
            ):
                raise
            log.warning("session %s: %s", session.info.id, exc.message)
            continue
        if not status.running:
            logs = (await runtime.logs(session.handle, LOG_TAIL)).splitlines()
            raise DeskrigError(
                ErrorCode.RIG_FAILED,
                f"the rig stopped unexpectedly: container {status.detail}{last_words(logs)}",
                details={"exit_code": status.exit_code, "logs": logs[-LOG_TAIL:]},
            )
        now = time.time()
        expires = session.info.expires_at
        if expires and now >= expires:
            session.stop_reason = f"max duration reached ({session.timeout('max_duration', config):g} s)"
            return
        if idle_timeout:
            idle = now - await last_activity(session, http)
            if idle >= idle_timeout:
                session.stop_reason = (
                    f"idle timeout: no MCP activity for {idle:.0f} s (limit {idle_timeout:g} s)"
                )
                return


async def last_activity(session: Session, http: httpx2.AsyncClient) -> float:
    """When the rig last served an MCP request (its /status); ready time if it cannot say."""
    assert session.handle is not None
    fallback = session.info.ready_at or session.info.created_at
    last = await RigClient(http, session.handle.endpoint, session.token).last_activity()
    return fallback if last is None else max(last, fallback)


async def finalize(session: Session, config: OrchestratorConfig, http: httpx2.AsyncClient) -> None:
    """Close the recording (the mp4 is written) and let the mirror copy the last of it."""
    mirror = session.mirror
    if mirror is None or session.handle is None:
        return
    timeout = config.stop_timeout
    with anyio.move_on_after(timeout) as deadline:
        try:
            rig = RigClient(http, session.handle.endpoint, session.token)
            response = await rig.finalize(timeout=timeout)
            if response.status_code >= 400:
                mirror.report.errors.append(f"finalize: HTTP {response.status_code} {response.text[:200]}")
        except httpx2.HTTPError as exc:
            mirror.report.errors.append(f"finalize: {type(exc).__name__}: {exc}")
        settled = await mirror.settle(quiet=SETTLE_QUIET, timeout=timeout, want_video=session.info.spec.video)
        if not settled:
            mirror.report.errors.append(f"the feed did not settle within {timeout:g} s of finalize")
    if deadline.cancelled_caught:  # a rig that answers nothing (hung, paused) is removed anyway
        mirror.report.errors.append(
            f"finalize: the recording was not finished and copied within {timeout:g} s"
        )
