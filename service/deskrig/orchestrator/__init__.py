"""The host orchestrator: one rig container per session, live-mirrored turn folders, three faces.

- Python: ``async with Orchestrator(config) as orch: info = await orch.start(SessionSpec(...))``,
  or :class:`BlockingOrchestrator` for synchronous callers;
- HTTP: ``deskrig orchestrator serve`` (``api.py``), reached with :class:`ServiceClient`;
- CLI: ``deskrig session start|stop|ls|logs|artifacts`` (``cli.py``).

Names are imported lazily: ``deskrig rig run`` loads the CLI parsers from here and must stay quick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deskrig.orchestrator.blocking import BlockingOrchestrator
    from deskrig.orchestrator.core import Orchestrator
    from deskrig.orchestrator.models import OrchestratorConfig, SessionInfo, SessionSpec, SessionState
    from deskrig.orchestrator.service import ServiceClient

_EXPORTS = {
    "Orchestrator": "core",
    "BlockingOrchestrator": "blocking",
    "OrchestratorConfig": "models",
    "SessionInfo": "models",
    "SessionSpec": "models",
    "SessionState": "models",
    "ServiceClient": "service",
}
__all__ = [
    "BlockingOrchestrator",
    "Orchestrator",
    "OrchestratorConfig",
    "ServiceClient",
    "SessionInfo",
    "SessionSpec",
    "SessionState",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"deskrig.orchestrator.{_EXPORTS[name]}"), name)
