"""The runtime choice: one line per runtime, naming the class that implements it.

``--runtime``, ``$DESKRIG_RUNTIME``, ``--deskrig-runtime`` and ``OrchestratorConfig.runtime`` all
end here. Implementations are imported only when chosen, so choosing docker never loads a
cluster client.
"""

from __future__ import annotations

import importlib

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.models import OrchestratorConfig, RuntimeName
from deskrig.orchestrator.runtime import Runtime

#: ``module:Class`` of each runtime; the class is built with the orchestrator's config.
#: None: that runtime is not part of this build.
RUNTIMES: dict[RuntimeName, str | None] = {
    "docker": "deskrig.orchestrator.docker_backend:DockerRuntime",
    "swarm": "deskrig.orchestrator.swarm_backend:SwarmRuntime",
    "kubernetes": None,
}


def make_runtime(config: OrchestratorConfig) -> Runtime:
    """The runtime ``config.runtime`` names; RUNTIME_UNAVAILABLE when this build has none."""
    target = RUNTIMES[config.runtime]
    if target is None:
        available = [name for name, where in RUNTIMES.items() if where is not None]
        raise DeskrigError(
            ErrorCode.RUNTIME_UNAVAILABLE,
            f"the {config.runtime} runtime is not available in this build",
            details={"runtime": config.runtime, "available": available},
            remediation=f"Choose one of {', '.join(available)} (--runtime, $DESKRIG_RUNTIME).",
        )
    module, _, name = target.partition(":")
    runtime: Runtime = getattr(importlib.import_module(module), name)(config)
    return runtime
