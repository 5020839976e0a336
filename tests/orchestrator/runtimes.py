"""The runtimes the contract suite (test_runtime_contract.py) runs against, one harness each.

A harness builds its runtime, crashes a rig's app from outside as a test needs, and lists what
of a session's rig the engine still holds (leaks). ``memory`` always runs; ``docker`` and
``swarm`` run on the test engine (a single-node swarm: :func:`ensure_swarm` makes the engine a
manager when it is not one, and never leaves the swarm: other users of the engine may rely on
it); ``kubernetes`` runs only when ``$KUBECONFIG`` is set, through :func:`kubernetes_harness`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docker
from docker.models.containers import Container

from deskrig.orchestrator.memory_runtime import MemoryRuntime
from deskrig.orchestrator.models import OrchestratorConfig
from deskrig.orchestrator.runtime import LABEL_SESSION, Runtime

#: The rigs' image and app: the shared bare rig image (never rebuilt here) and a small X11 app
#: from it with a window (a rig with an app is ready once the app maps one); it is what
#: :func:`crash_app_in_container` kills.
RIG_IMAGE = "deskrig/rig:latest"
APP = "xkbvleds"
#: Kills the app by its process name (the loop's own shell is "sh"); as the rig's user.
_KILL_APP = (
    f'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = {APP} ] && kill -9 ${{p#/proc/}}; done'
)


@dataclass
class Harness:
    """One runtime under test."""

    name: str
    #: The runtime to hand the orchestrator; None: it builds its own from ``config.runtime``.
    runtime: Runtime | None
    #: Whether rigs are real (they serve MCP); the memory runtime's stand-ins answer its HTTP only.
    real: bool
    #: Kill the app of a session's rig, as a crash would.
    crash_app: Callable[[str], None]
    #: What of a session's rig the engine still has (container, service, Pod names): must end [].
    leftovers: Callable[[str], list[str]]
    #: Settings this runtime's rigs need here (swarm: stay on this node, where crash_app reaches).
    settings: dict[str, Any] = field(default_factory=dict)

    def config(self, base: OrchestratorConfig) -> OrchestratorConfig:
        """``base`` set to this runtime (the memory runtime is handed over, whatever it says)."""
        if self.runtime is not None:
            return base
        return base.model_copy(update={"runtime": self.name, **self.settings})


def ensure_swarm(client: docker.DockerClient) -> str:
    """Make the test engine a single-node swarm manager on loopback, unless it is in a swarm;
    the placement constraint that keeps rigs on it (other nodes may have joined: scripts/swarm-lab)."""
    if client.info().get("Swarm", {}).get("LocalNodeState") != "active":
        subprocess.run(
            ["docker", "swarm", "init", "--advertise-addr", "127.0.0.1"], check=True, capture_output=True
        )
    return f"node.id=={client.info()['Swarm']['NodeID']}"


def _session_filter(session_id: str) -> dict[str, Any]:
    return {"label": [f"{LABEL_SESSION}={session_id}"]}


def container_names(client: docker.DockerClient, filters: dict[str, Any]) -> list[str]:
    """Containers, running or not, by one list call: the SDK's ``containers.list`` inspects each,
    and raises NotFound for one removed meanwhile."""
    return [entry["Names"][0].lstrip("/") for entry in client.api.containers(all=True, filters=filters)]


def listed_containers(
    client: docker.DockerClient, filters: dict[str, Any], *, stopped_too: bool = True
) -> list[Container]:
    """Containers as the SDK's objects. ``containers.list`` inspects each listed container in turn:
    one removed meanwhile (a rig an orchestrator is tearing down) is left out, not raised."""
    return client.containers.list(all=stopped_too, filters=filters, ignore_removed=True)  # type: ignore[no-any-return]


def service_names(client: docker.DockerClient, filters: dict[str, Any]) -> list[str]:
    """Services, by one list call (the SDK's ``services.list`` races with removals as above)."""
    return [entry["Spec"]["Name"] for entry in client.api.services(filters=filters)]


def crash_app_in_container(client: docker.DockerClient, session_id: str) -> None:
    """Kill the app in the session's rig container (a swarm task's too: on this single node)."""
    (container,) = listed_containers(client, _session_filter(session_id), stopped_too=False)
    container.exec_run(["sh", "-c", _KILL_APP])


def memory_harness() -> Harness:
    runtime = MemoryRuntime()
    return Harness(
        name="memory",
        runtime=runtime,
        real=False,
        crash_app=lambda session_id: runtime.exit(session_id, code=1),
        leftovers=lambda session_id: [
            rig.handle.name for rig in runtime.rigs.values() if rig.handle.session_id == session_id
        ],
    )


def docker_harness(client: docker.DockerClient) -> Harness:
    return Harness(
        name="docker",
        runtime=None,
        real=True,
        crash_app=lambda session_id: crash_app_in_container(client, session_id),
        leftovers=lambda session_id: container_names(client, _session_filter(session_id)),
    )


def swarm_harness(client: docker.DockerClient) -> Harness:
    this_node = ensure_swarm(client)

    def leftovers(session_id: str) -> list[str]:
        # A removed service's task container goes a moment later (its stop grace period).
        filters = _session_filter(session_id)
        return [*service_names(client, filters), *container_names(client, filters)]

    return Harness(
        name="swarm",
        runtime=None,
        real=True,
        crash_app=lambda session_id: crash_app_in_container(client, session_id),
        leftovers=leftovers,
        settings={"placement_constraints": [this_node]},
    )


def kubernetes_harness() -> Harness:
    """The hook of the Kubernetes runtime: its harness, run only against a real cluster
    (``$KUBECONFIG``). The runtime comes from ``runtimes.RUNTIMES["kubernetes"]``; a Pod is found
    by its session label and its app killed by an exec into it."""
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    from kubernetes.stream import stream

    k8s_config.load_kube_config()
    core = k8s.CoreV1Api()
    namespace = os.environ.get("DESKRIG_K8S_NAMESPACE", "deskrig")

    def pods(session_id: str) -> list[Any]:
        return list(core.list_namespaced_pod(namespace, label_selector=f"{LABEL_SESSION}={session_id}").items)

    def crash_app(session_id: str) -> None:
        (pod,) = pods(session_id)
        stream(
            core.connect_get_namespaced_pod_exec,
            pod.metadata.name,
            namespace,
            command=["sh", "-c", _KILL_APP],
            stderr=True,
            stdout=True,
        )

    return Harness(
        name="kubernetes",
        runtime=None,
        real=True,
        crash_app=crash_app,
        leftovers=lambda session_id: [pod.metadata.name for pod in pods(session_id)],
    )


def available_runtimes() -> list[str]:
    """The contract suite's parameters: every runtime this machine can run."""
    return ["memory", "docker", "swarm", *(["kubernetes"] if os.environ.get("KUBECONFIG") else [])]


def harness(name: str, client: docker.DockerClient) -> Harness:
    builders: dict[str, Callable[[], Harness]] = {
        "memory": memory_harness,
        "docker": lambda: docker_harness(client),
        "swarm": lambda: swarm_harness(client),
        "kubernetes": kubernetes_harness,
    }
    return builders[name]()
