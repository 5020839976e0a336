"""Small composable wait strategies over one polling helper, in the manner of testcontainers.

A strategy probes a :class:`WaitTarget` once and says whether its condition holds, what it saw,
and whether waiting longer is pointless (the container exited). :func:`wait_for` polls a strategy
to a deadline; when it gives up, the error says what was observed last and carries the rig's last
log lines, so a rig that never came up explains itself.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import anyio
import httpx2

from deskrig.client import tls_context
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.rig_client import READYZ
from deskrig.orchestrator.runtime import ContainerState, RigHandle

#: Log lines attached to a wait's timeout error.
LOG_TAIL = 30
#: How often the readiness wait asks the rig's ``/readyz``: a rig that has come up waits half of it
#: on average (it was 0.1 s). A refused probe, the rig still booting, costs about 2 ms of CPU here
#: (this process's and docker-proxy's), taken from the boot on a loaded machine: 0.025 s cost
#: 165 ms of CPU per 2 s of waiting, 0.05 s 100 ms, 0.1 s 60 ms.
READY_POLL = 0.05
#: How often that wait asks the runtime whether the rig's container still runs: a rig that exited
#: is seen within this. Each question is an engine request (on swarm, a task listing from the
#: manager: about 3 ms of CPU), needless while ``/readyz`` is what the wait is for.
STATUS_POLL = 0.5


@dataclass(frozen=True)
class Probe:
    done: bool
    observed: str
    fatal: bool = False  # the condition can no longer come true


async def poll(check: Callable[[], Awaitable[Probe]], timeout: float, interval: float = 0.1) -> Probe:
    """Probe until done, fatal or past ``timeout`` seconds; return the last probe either way."""
    deadline = time.monotonic() + timeout
    while True:
        probe = await check()
        remaining = deadline - time.monotonic()
        if probe.done or probe.fatal or remaining <= 0:
            return probe
        await anyio.sleep(min(interval, remaining))


class WaitTarget(Protocol):
    """What strategies can look at: the rig's HTTP endpoint, its state and its logs."""

    endpoint: str
    http: httpx2.AsyncClient

    async def status(self) -> ContainerState: ...

    async def logs(self, tail: int) -> str: ...


class WaitStrategy(Protocol):
    @property
    def description(self) -> str: ...

    async def probe(self, target: WaitTarget) -> Probe: ...


@dataclass(frozen=True)
class Running:
    """The rig's container runs; one that has exited is fatal."""

    description: str = "the container to run"

    async def probe(self, target: WaitTarget) -> Probe:
        status = await target.status()
        return Probe(done=status.running, observed=f"container {status.detail}", fatal=not status.running)


@dataclass(frozen=True)
class HttpStatus:
    """``GET endpoint + path`` answers ``status`` (by default, the rig's readiness probe)."""

    path: str = READYZ
    status: int = 200

    @property
    def description(self) -> str:
        return f"GET {self.path} -> {self.status}"

    async def probe(self, target: WaitTarget) -> Probe:
        try:
            response = await target.http.get(target.endpoint + self.path, timeout=2.0)
        except httpx2.HTTPError as exc:
            return Probe(done=False, observed=f"GET {self.path}: {type(exc).__name__} {exc}".strip())
        body = response.text[:300].strip()
        return Probe(
            done=response.status_code == self.status,
            observed=f"GET {self.path}: HTTP {response.status_code} {body}",
        )


@dataclass(frozen=True)
class AllOf:
    """Every strategy holds, checked in order; the first that does not speaks for the whole."""

    strategies: tuple[WaitStrategy, ...]

    @property
    def description(self) -> str:
        return " and ".join(s.description for s in self.strategies)

    async def probe(self, target: WaitTarget) -> Probe:
        probe = Probe(done=True, observed="")
        for strategy in self.strategies:
            probe = await strategy.probe(target)
            if not probe.done:
                return probe
        return probe


class Seldom:
    """``strategy`` probed at most every ``every`` seconds; in between, its last probe stands (a
    done or fatal probe too: a condition that held is not asked again until ``every`` has passed).
    One per wait: it remembers that wait's last probe."""

    def __init__(self, strategy: WaitStrategy, every: float) -> None:
        self.strategy = strategy
        self.every = every
        self._last: Probe | None = None
        self._probed_at = -math.inf

    @property
    def description(self) -> str:
        return self.strategy.description

    async def probe(self, target: WaitTarget) -> Probe:
        if self._last is None or time.monotonic() - self._probed_at >= self.every:
            self._probed_at = time.monotonic()
            self._last = await self.strategy.probe(target)
        return self._last


def rig_ready() -> WaitStrategy:
    """The default for a rig: its container runs (asked every :data:`STATUS_POLL`) and its
    /readyz says display, WM and app are up (asked at every poll)."""
    strategies: tuple[WaitStrategy, ...] = (Seldom(Running(), STATUS_POLL), HttpStatus(READYZ, 200))
    return AllOf(strategies)


class RigObserver(Protocol):
    """The part of a Runtime that the wait strategies use."""

    async def status(self, handle: RigHandle) -> ContainerState: ...

    async def logs(self, handle: RigHandle, tail: int | None = None) -> str: ...


class _RigTarget:
    """A runtime's rig as the wait strategies see it."""

    def __init__(self, runtime: RigObserver, handle: RigHandle, http: httpx2.AsyncClient) -> None:
        self.runtime = runtime
        self.handle = handle
        self.endpoint = handle.endpoint
        self.http = http

    async def status(self) -> ContainerState:
        return await self.runtime.status(self.handle)

    async def logs(self, tail: int) -> str:
        return await self.runtime.logs(self.handle, tail)


def last_words(logs: list[str]) -> str:
    """The last line a rig that ended logged, to end the message that says it ended: it mostly
    says why (the full tail is in the error's details, which a log or a test's report may not show)."""
    last = next((line.strip() for line in reversed(logs) if line.strip()), None)
    return "" if last is None else f"; its last log line: {last}"


async def wait_until_ready(
    runtime: RigObserver, handle: RigHandle, timeout: float, *, interval: float = READY_POLL
) -> None:
    """``Runtime.wait_ready`` for any backend: :func:`rig_ready` over a client of its own."""
    async with httpx2.AsyncClient(verify=tls_context()) as http:
        await wait_for(_RigTarget(runtime, handle, http), rig_ready(), timeout, interval=interval)


async def wait_for(
    target: WaitTarget, strategy: WaitStrategy, timeout: float, *, interval: float = READY_POLL
) -> None:
    """Poll ``strategy`` until it holds; raise RIG_FAILED with the last observation and logs."""
    probe = await poll(lambda: strategy.probe(target), timeout, interval)
    if probe.done:
        return
    logs = (await target.logs(LOG_TAIL)).splitlines()[-LOG_TAIL:]
    why = "gave up" if probe.fatal else f"timed out after {timeout:g} s"
    raise DeskrigError(
        ErrorCode.RIG_FAILED,
        f"rig at {target.endpoint} not ready: waiting for {strategy.description} {why}; "
        f"last observed: {probe.observed}{last_words(logs) if probe.fatal else ''}",
        details={
            "waited_for": strategy.description,
            "observed": probe.observed,
            "timeout": timeout,
            "logs": logs,
        },
    )
