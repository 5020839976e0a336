"""The runtime choice: one line per runtime, naming the class that implements it.

``--runtime``, ``$DESKRIG_RUNTIME``, ``--deskrig-runtime`` and ``OrchestratorConfig.runtime`` all
end here. Implementations are imported only when chosen, so choosing docker never loads a
cluster client.
"""

from __future__ import annotations

import importlib

from deskrig.orchestrator.models import OrchestratorConfig, RuntimeName
from deskrig.orchestrator.runtime import Runtime

#: ``module:factory`` of each runtime (a class or a function), called with the orchestrator's config.
RUNTIMES: dict[RuntimeName, str] = {
    "docker": "deskrig.orchestrator.docker_backend:DockerRuntime",
    "swarm": "deskrig.orchestrator.swarm_backend:SwarmRuntime",
    "kubernetes": "deskrig.orchestrator.kubernetes_runtime:kubernetes_runtime",
}


def make_runtime(config: OrchestratorConfig) -> Runtime:
    """The runtime ``config.runtime`` names (a cluster client is reached only when first used)."""
    module, _, name = RUNTIMES[config.runtime].partition(":")
    runtime: Runtime = getattr(importlib.import_module(module), name)(config)
    return runtime
