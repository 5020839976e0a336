"""The orchestrator for synchronous callers: :class:`Orchestrator`'s event loop in a thread."""

from __future__ import annotations

import contextlib
import functools

from anyio.from_thread import BlockingPortal, start_blocking_portal

from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.models import OrchestratorConfig, SessionInfo, SessionSpec
from deskrig.orchestrator.runtime import Runtime


class BlockingOrchestrator:
    """The orchestrator for synchronous callers (pytest fixtures, scripts): its loop runs in a thread.

    ``with BlockingOrchestrator(config) as orch: info = orch.start(SessionSpec(...))``
    """

    def __init__(self, config: OrchestratorConfig | None = None, runtime: Runtime | None = None) -> None:
        self._orchestrator = Orchestrator(config, runtime)
        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal | None = None

    @property
    def id(self) -> str:
        return self._orchestrator.id

    @property
    def config(self) -> OrchestratorConfig:
        return self._orchestrator.config

    def __enter__(self) -> BlockingOrchestrator:
        with contextlib.ExitStack() as stack:
            portal = stack.enter_context(start_blocking_portal())
            stack.enter_context(portal.wrap_async_context_manager(self._orchestrator))
            self._portal = portal
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._portal = None
        self._stack.close()

    def _call(self) -> BlockingPortal:
        if self._portal is None:
            raise RuntimeError("use the BlockingOrchestrator as a context manager")
        return self._portal

    def start(self, spec: SessionSpec, *, wait: bool = True) -> SessionInfo:
        return self._call().call(functools.partial(self._orchestrator.start, spec, wait=wait))

    def wait(self, session_id: str) -> SessionInfo:
        return self._call().call(self._orchestrator.wait, session_id)

    def stop(self, session_id: str, reason: str = "stopped by request") -> SessionInfo:
        return self._call().call(self._orchestrator.stop, session_id, reason)

    def get(self, session_id: str) -> SessionInfo:
        return self._call().call(self._orchestrator.get, session_id)

    def list(self) -> list[SessionInfo]:
        return self._call().call(self._orchestrator.list)
