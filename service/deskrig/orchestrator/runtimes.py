"""The runtime choice: one line per runtime, naming the class that implements it.

``--runtime``, ``$DESKRIG_RUNTIME``, ``--deskrig-runtime`` and ``OrchestratorConfig.runtime`` all
end here. Implementations are imported only when chosen, so choosing docker never loads a
cluster client, and a runtime whose extra is not installed says which one to install.
"""

from __future__ import annotations

import importlib

from deskrig.extras import Extra, needs_extra
from deskrig.orchestrator.models import OrchestratorConfig, RuntimeName
from deskrig.orchestrator.runtime import Runtime

#: ``module:factory`` of each runtime (a class or a function), called with the orchestrator's
#: config, and the extra that installs what it imports.
RUNTIMES: dict[RuntimeName, tuple[str, Extra]] = {
    "docker": ("deskrig.orchestrator.docker_backend:DockerRuntime", "orchestrator"),
    "swarm": ("deskrig.orchestrator.swarm_backend:SwarmRuntime", "orchestrator"),
    "kubernetes": ("deskrig.orchestrator.kubernetes_runtime:kubernetes_runtime", "kubernetes"),
}


def make_runtime(config: OrchestratorConfig) -> Runtime:
    """The runtime ``config.runtime`` names (a cluster client is reached only when first used)."""
    factory, extra = RUNTIMES[config.runtime]
    module, _, name = factory.partition(":")
    with needs_extra(extra, f"the {config.runtime} runtime"):
        implementation = importlib.import_module(module)
    runtime: Runtime = getattr(implementation, name)(config)
    return runtime
