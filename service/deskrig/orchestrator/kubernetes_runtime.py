"""The Kubernetes runtime: one hardened Pod per session, through the official ``kubernetes`` client.

Per session: a Secret with the rig's token (the pod reads it by ``secretKeyRef``; it is never in
the pod spec), the Pod (``kubernetes_objects.rig_pod``), and, for an orchestrator outside the
cluster, a NodePort Service. The Secret and Service name the Pod as their owner, so the cluster's
garbage collector removes them with it even when no orchestrator is left to.

The Secret comes first (the pod reads it when its container starts) and is handed to the Pod
once that exists: an orchestrator that dies in between leaves a Secret that nothing owns.
:meth:`KubernetesRuntime.list_leftovers` lists those (no owner, no pod of theirs) for the reaper,
which removes them as it removes rigs, and whoever made them once older than
``reaper.LEFTOVER_GRACE``. The other order (the Pod first, its Secret created owned by it) would
leave no such window, but a kubelet that reached the container before the Secret existed would
fail that sync (CreateContainerConfigError) and retry only after its pod worker's back-off, 10 to
15 s, on the path from request to ready; the window costs a sweep instead.

How the orchestrator reaches a rig (``RigPodSettings.endpoint``): in the cluster, by the pod's IP
(pod IPs are routable between pods; no Service needed); outside it, by the NodePort Service on the
node that runs the pod (``http://<hostIP>:<nodePort>``). ``auto`` picks by where the orchestrator
runs. Readiness is the other runtimes' (the pod runs, its /readyz answers 200); the pod also
carries a readinessProbe on /readyz for the cluster's own view.

The client is blocking and imported lazily (``pip install deskrig[kubernetes]``); every call runs
in a worker thread. API errors are translated here: RUNTIME_UNAVAILABLE when the API server cannot
be reached or refuses the orchestrator (RBAC), RIG_FAILED when a rig cannot be created or run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio

from deskrig.errors import ConfigError, DeskrigError, ErrorCode
from deskrig.extras import needs_extra
from deskrig.orchestrator.kubernetes_objects import (
    RIG_CONTAINER,
    Endpoint,
    Manifest,
    RigPodSettings,
    is_dns_label,
    owned_by,
    owner_from_environment,
    ownerless_token_secrets,
    rig_name,
    rig_pod,
    rig_service,
    selector,
    token_secret,
    token_secret_name,
)
from deskrig.orchestrator.mirror import ArtifactMirror
from deskrig.orchestrator.models import RIG_PORT, OrchestratorConfig
from deskrig.orchestrator.reaper import Leftover, created_epoch
from deskrig.orchestrator.runtime import LABEL_SESSION, ContainerState, RigHandle, RigRequest
from deskrig.orchestrator.waits import wait_until_ready

log = logging.getLogger("deskrig.orchestrator.kubernetes")

T = TypeVar("T")
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
#: Waiting reasons of a rig's container that no amount of waiting fixes.
FATAL_WAITING = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)
#: How long ``create`` waits for the pod to be scheduled and its container started (image pulls).
START_TIMEOUT = 300.0
POLL_INTERVAL = 0.5
#: What every ``runtime.LABEL_*`` name starts with: the annotations that are a rig's labels.
LABEL_PREFIX = "io.deskrig."
#: How the runtime lists Secrets: their metadata only (names, labels, owners, creation times),
#: never the tokens in them; a server without that form answers the plain list.
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


def _api_error(exc: Exception, doing: str) -> DeskrigError:
    """An API or transport failure as a DeskrigError: unreachable or refused -> RUNTIME_UNAVAILABLE,
    the rig's objects rejected -> RIG_FAILED."""
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None) or type(exc).__name__
    if status in (400, 409, 422):
        return DeskrigError(
            ErrorCode.RIG_FAILED,
            f"the Kubernetes API refused to {doing}: {status} {reason}",
            details={"status": status, "body": str(getattr(exc, "body", ""))[:500]},
        )
    if status in (401, 403):
        return DeskrigError(
            ErrorCode.RUNTIME_UNAVAILABLE,
            f"the Kubernetes API does not let the orchestrator {doing}: {status} {reason}",
            details={"status": status},
            remediation="Apply the Role and RoleBinding of `deskrig k8s manifests` and run the orchestrator "
            "under its ServiceAccount (or a kubeconfig user with the same rights).",
        )
    return DeskrigError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        f"cannot talk to the Kubernetes API to {doing}: {status or ''} {reason} {exc}".strip(),
        details={"error": type(exc).__name__},
    )


def _not_found(exc: Exception) -> bool:
    return getattr(exc, "status", None) == 404


def load_core_api() -> tuple[Any, bool, str | None]:
    """``(CoreV1Api, in_cluster, namespace of the kubeconfig context)``, configured the usual way:
    in-cluster service account, else ``$KUBECONFIG`` (as set when called) / ``~/.kube/config``."""
    with needs_extra("kubernetes", "the kubernetes runtime"):
        from kubernetes import client
        from kubernetes import config as kube_config

    config: Any = kube_config  # the client's loaders carry no type hints
    try:
        config.load_incluster_config()
        return client.CoreV1Api(), True, None
    except config.ConfigException:
        pass
    # KUBECONFIG as it is now: the client's default is the value it had when it was imported.
    kubeconfig = os.environ.get("KUBECONFIG") or "~/.kube/config"
    try:
        config.load_kube_config(config_file=kubeconfig)
        _, context = config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError) as exc:
        raise DeskrigError(
            ErrorCode.RUNTIME_UNAVAILABLE,
            f"no Kubernetes configuration: not in a cluster, and no usable kubeconfig ({exc})",
            remediation="Run the orchestrator in the cluster (`deskrig k8s manifests`), or set KUBECONFIG.",
        ) from exc
    return client.CoreV1Api(), False, (context or {}).get("context", {}).get("namespace")


def _errors() -> tuple[type[Exception], ...]:
    """What the client raises: API errors and urllib3's transport errors."""
    from kubernetes.client.exceptions import OpenApiException
    from urllib3.exceptions import HTTPError

    return (OpenApiException, HTTPError, OSError)


class KubernetesRuntime:
    name = "kubernetes"

    def __init__(
        self,
        config: OrchestratorConfig,
        *,
        api: Any = None,
        namespace: str | None = None,
        endpoint: Endpoint | Literal["auto"] = "auto",
        start_timeout: float = START_TIMEOUT,
        settings: RigPodSettings | None = None,
    ) -> None:
        """``api``: a CoreV1Api (or ``kubernetes_fake.FakeCoreV1Api``); loaded on first use when None.
        ``namespace``: default the service account's (in the cluster), else the kubeconfig context's,
        else ``deskrig``. ``endpoint``: see the module docstring."""
        if namespace is not None and not is_dns_label(namespace):
            raise ConfigError(f"namespace {namespace!r} is not a DNS label", details={"namespace": namespace})
        self._config = config
        self._api = api
        self._namespace = namespace
        self._endpoint = endpoint
        self._start_timeout = start_timeout
        self._base_settings = settings or RigPodSettings()
        self._settings: RigPodSettings | None = None
        #: Whether the log said once that a Role without list on secrets leaves leftovers.
        self._said_secrets_unlisted = False

    # --- the API ---------------------------------------------------------------------------------

    def _core(self) -> tuple[Any, RigPodSettings]:
        if self._api is None or self._settings is None:
            in_cluster, context_namespace = False, None
            if self._api is None:
                self._api, in_cluster, context_namespace = load_core_api()
            namespace = self._namespace or (
                SERVICE_ACCOUNT_NAMESPACE.read_text().strip() if in_cluster else context_namespace
            )
            endpoint = self._endpoint
            if endpoint == "auto":
                endpoint = "pod-ip" if in_cluster else "node-port"
            self._settings = replace(
                self._base_settings, namespace=namespace or self._base_settings.namespace, endpoint=endpoint
            )
        return self._api, self._settings

    def _plain(self, obj: Any) -> Manifest:
        """An API object (the client's model classes) as the API's own JSON dict."""
        api, _ = self._core()
        plain = obj if isinstance(obj, dict) else api.api_client.sanitize_for_serialization(obj)
        return plain if isinstance(plain, dict) else {}

    def _call(self, doing: str, call: Callable[[Any], T]) -> T:
        """``call(api)``, its errors translated."""
        api, _ = self._core()
        try:
            return call(api)
        except _errors() as exc:
            raise _api_error(exc, doing) from exc

    def _delete(self, doing: str, call: Callable[[Any], object]) -> None:
        """A delete whose object may be gone already (404), which is not an error."""
        api, _ = self._core()
        try:
            call(api)
        except _errors() as exc:
            if not _not_found(exc):
                raise _api_error(exc, doing) from exc

    # --- the Runtime protocol ----------------------------------------------------------------------

    async def capacity(self, per_node: int) -> int:
        """``per_node`` for the whole cluster: its scheduler places the pods, and counting the
        cluster's nodes would need a ClusterRole, more than the namespaced Role of
        `deskrig k8s manifests` grants."""
        return per_node

    async def create(self, request: RigRequest) -> RigHandle:
        if not is_dns_label(rig_name(request)) or not request.image.strip():
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                f"cannot name a pod for session {request.session_id!r} from image {request.image!r}",
                details={"session": request.session_id, "image": request.image},
            )
        pod = await anyio.to_thread.run_sync(self._create_objects, request)
        try:
            return await self._await_start(request, pod)
        except BaseException:
            with anyio.CancelScope(shield=True), contextlib.suppress(DeskrigError):
                await self.destroy(self._handle(pod, ""))
            raise

    def _create_objects(self, request: RigRequest) -> Manifest:
        """Secret, Pod, then the Secret handed to the Pod (and the Service, in node-port mode).
        A failure removes what this call created, and nothing else (a taken name stays taken)."""
        _, settings = self._core()
        namespace = settings.namespace
        name = rig_name(request)
        secret = token_secret(request, namespace)
        self._call(
            "create the rig's token Secret", lambda api: api.create_namespaced_secret(namespace, secret)
        )
        try:
            body = rig_pod(request, self._config, settings)
            pod = self._plain(
                self._call("create the rig's Pod", lambda api: api.create_namespaced_pod(namespace, body))
            )
        except BaseException:
            with contextlib.suppress(DeskrigError):
                self._delete(
                    "delete the rig's token Secret",
                    lambda api: api.delete_namespaced_secret(token_secret_name(name), namespace),
                )
            raise
        try:
            owner = {"metadata": {"ownerReferences": owned_by(pod)}}
            self._call(
                "hand the rig's Secret to its Pod",
                lambda api: api.patch_namespaced_secret(token_secret_name(name), namespace, owner),
            )
            if settings.endpoint == "node-port":
                service = rig_service(request, namespace)
                service["metadata"]["ownerReferences"] = owned_by(pod)
                self._call(
                    "create the rig's Service", lambda api: api.create_namespaced_service(namespace, service)
                )
        except BaseException:
            with contextlib.suppress(DeskrigError):
                self._destroy_names(name)
            raise
        return pod

    async def _await_start(self, request: RigRequest, pod: Manifest) -> RigHandle:
        """Wait until the pod runs and can be reached; RIG_FAILED when it cannot start."""
        name = pod["metadata"]["name"]
        deadline = time.monotonic() + self._start_timeout
        observed = "not read yet"
        while time.monotonic() < deadline:
            pod = await anyio.to_thread.run_sync(self._read_pod, name)
            if not pod:
                observed = "gone (deleted from outside)"
                break
            status = pod.get("status") or {}
            waiting = _container_state(pod).get("waiting") or {}
            if status.get("phase") in ("Failed", "Succeeded") or waiting.get("reason") in FATAL_WAITING:
                observed = _describe(pod)
                break
            if status.get("phase") == "Running" and status.get("podIP"):
                endpoint = await anyio.to_thread.run_sync(self._endpoint_of, pod)
                if endpoint:
                    return self._handle(pod, endpoint)
            observed = _describe(pod)
            await anyio.sleep(POLL_INTERVAL)
        logs = (await self.logs(self._handle(pod or {"metadata": {"name": name}}, ""), 30)).splitlines()
        raise DeskrigError(
            ErrorCode.RIG_FAILED,
            f"rig pod {name} did not start: {observed}",
            details={"image": request.image, "observed": observed, "logs": logs},
            remediation="`kubectl describe pod` shows the cluster's events (scheduling, image pulls); "
            "`deskrig images push` puts the rig images where nodes can pull them.",
        )

    def _read_pod(self, name: str) -> Manifest:
        api, settings = self._core()
        try:
            return self._plain(api.read_namespaced_pod(name, settings.namespace))
        except _errors() as exc:
            if _not_found(exc):
                return {}
            raise _api_error(exc, f"read pod {name}") from exc

    def _endpoint_of(self, pod: Manifest) -> str:
        """The rig's URL: by pod IP, or by the node's IP and the Service's node port ("" when the
        Service has none yet)."""
        _, settings = self._core()
        status = pod.get("status") or {}
        if settings.endpoint == "pod-ip":
            return _url(status.get("podIP", ""), RIG_PORT)
        session = (pod["metadata"].get("labels") or {}).get(LABEL_SESSION, "")
        services = self._node_ports(selector({LABEL_SESSION: session}))
        port = services.get(pod["metadata"]["name"])
        return _url(status.get("hostIP", ""), port) if port and status.get("hostIP") else ""

    def _node_ports(self, label_selector: str) -> dict[str, int]:
        """The node port of each rig Service matching ``label_selector``, by name."""
        namespace = self._core()[1].namespace
        found = self._call(
            "list rig Services",
            lambda api: api.list_namespaced_service(namespace, label_selector=label_selector),
        )
        ports = {}
        for service in self._plain(found).get("items") or []:
            for port in (service.get("spec") or {}).get("ports") or []:
                if port.get("nodePort"):
                    ports[service["metadata"]["name"]] = int(port["nodePort"])
        return ports

    def _handle(self, pod: Manifest, endpoint: str) -> RigHandle:
        meta = pod.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        labels = {key: value for key, value in annotations.items() if key.startswith(LABEL_PREFIX)}
        return RigHandle(id=meta.get("name", ""), name=meta.get("name", ""), endpoint=endpoint, labels=labels)

    async def wait_ready(self, handle: RigHandle, timeout: float) -> None:
        await wait_until_ready(self, handle, timeout)

    def stream_artifacts(self, handle: RigHandle, token: str, dest: Path) -> ArtifactMirror:
        return ArtifactMirror(handle.endpoint, token, dest)

    async def status(self, handle: RigHandle) -> ContainerState:
        pod = await anyio.to_thread.run_sync(self._read_pod, handle.name)
        if not pod:
            return ContainerState(running=False, detail="gone (deleted from outside)")
        if pod["metadata"].get("deletionTimestamp"):
            return ContainerState(running=False, detail="being deleted")
        terminated = _container_state(pod).get("terminated") or {}
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running" and not terminated:
            return ContainerState(running=True, detail="running")
        detail = _describe(pod)
        if terminated.get("reason") == "OOMKilled":
            detail = f"killed by the OOM killer (memory limit {self._config.mem_limit})"
        return ContainerState(running=False, detail=detail, exit_code=terminated.get("exitCode"))

    async def logs(self, handle: RigHandle, tail: int | None = None) -> str:
        return await anyio.to_thread.run_sync(self._logs, handle.name, tail)

    def _logs(self, name: str, tail: int | None) -> str:
        api, settings = self._core()
        extra = {} if tail is None else {"tail_lines": tail}
        try:
            text = api.read_namespaced_pod_log(name, settings.namespace, container=RIG_CONTAINER, **extra)
        except _errors() as exc:
            if getattr(exc, "status", None) in (400, 404):  # gone, or its container never started
                return ""
            raise _api_error(exc, f"read the log of pod {name}") from exc
        return str(text or "")

    async def destroy(self, handle: RigHandle) -> None:
        await anyio.to_thread.run_sync(self._destroy_names, handle.name)

    def _destroy_names(self, name: str) -> None:
        """The pod, and (without waiting for the garbage collector) its Secret and Service."""
        _, settings = self._core()
        namespace = settings.namespace
        self._delete(f"delete pod {name}", lambda api: api.delete_namespaced_pod(name, namespace))
        self._delete(
            f"delete secret of {name}",
            lambda api: api.delete_namespaced_secret(token_secret_name(name), namespace),
        )
        if settings.endpoint == "node-port":
            self._delete(f"delete service {name}", lambda api: api.delete_namespaced_service(name, namespace))

    async def list_by_label(self, labels: dict[str, str]) -> list[RigHandle]:
        return await anyio.to_thread.run_sync(self._list_by_label, labels)

    def _list_by_label(self, labels: dict[str, str]) -> list[RigHandle]:
        label_selector = selector(labels)
        _, settings = self._core()
        found = self._call(
            "list rig pods",
            lambda api: api.list_namespaced_pod(settings.namespace, label_selector=label_selector),
        )
        node_ports = self._node_ports(label_selector) if settings.endpoint == "node-port" else {}
        handles = []
        for pod in self._plain(found).get("items") or []:
            if pod["metadata"].get("deletionTimestamp"):
                continue  # being deleted (its grace period): gone, as far as sessions go
            handle = self._handle(pod, "")
            if not _carries(handle, labels):
                continue
            status = pod.get("status") or {}
            if settings.endpoint == "pod-ip":
                endpoint = _url(status.get("podIP", ""), RIG_PORT)
            else:
                port = node_ports.get(handle.name)
                endpoint = _url(status.get("hostIP", ""), port) if port else ""
            handles.append(RigHandle(handle.id, handle.name, endpoint, handle.labels))
        return handles

    async def list_leftovers(self, labels: dict[str, str]) -> list[Leftover]:
        """Token Secrets carrying ``labels`` that no Pod owns and whose Pod does not exist (see the
        module docstring); the runtime's :meth:`destroy` of their handle removes them."""
        return await anyio.to_thread.run_sync(self._list_leftovers, labels)

    def _list_leftovers(self, labels: dict[str, str]) -> list[Leftover]:
        label_selector = selector(labels)
        namespace = self._core()[1].namespace
        try:  # before the pods: a Secret made after this listing is not judged now
            secrets = self._call(
                "list rig token Secrets",
                lambda api: api.list_namespaced_secret(
                    namespace, label_selector=label_selector, _headers={"Accept": METADATA_ONLY}
                ),
            )
        except DeskrigError as exc:
            if (exc.details or {}).get("status") != 403:
                raise
            if not self._said_secrets_unlisted:
                self._said_secrets_unlisted = True
                log.warning("%s: leftover token Secrets are not reaped. %s", exc.message, exc.remediation)
            return []
        pods = self._call(
            "list rig pods", lambda api: api.list_namespaced_pod(namespace, label_selector=label_selector)
        )
        rigs = {pod["metadata"]["name"] for pod in self._plain(pods).get("items") or []}
        leftovers = []
        for rig, secret in ownerless_token_secrets(self._plain(secrets).get("items") or [], rigs).items():
            meta = secret["metadata"]
            handle = self._handle({"metadata": {**meta, "name": rig}}, "")
            if _carries(handle, labels):
                created = created_epoch(meta.get("creationTimestamp"))
                leftovers.append(Leftover(f"Secret {meta['name']}", handle, created))
        return leftovers

    async def close(self) -> None:
        api, self._api, self._settings = self._api, None, None
        client = getattr(api, "api_client", None)
        if client is not None and hasattr(client, "close"):
            client.close()


def kubernetes_runtime(config: OrchestratorConfig, **options: Any) -> KubernetesRuntime:
    """The runtime for ``--runtime kubernetes`` (options: see :class:`KubernetesRuntime`). In the
    cluster, the pod the orchestrator runs in (named by the variables its Deployment sets) owns
    the rigs."""
    owner = owner_from_environment(dict(os.environ))
    if owner is not None and "settings" not in options:
        options["settings"] = RigPodSettings(owner=owner)
    return KubernetesRuntime(config, **options)


def _carries(handle: RigHandle, labels: dict[str, str]) -> bool:
    """Whether the rig carries every pair of ``labels``, those the selector could not carry (an
    annotation only) too."""
    return all(handle.labels.get(key) == value for key, value in labels.items())


def _url(host: str, port: int | None) -> str:
    if not host or not port:
        return ""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _container_state(pod: Manifest) -> Manifest:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == RIG_CONTAINER:
            state = status.get("state") or {}
            return state if isinstance(state, dict) else {}
    return {}


def _describe(pod: Manifest) -> str:
    """What the pod's status says, in one line: phase, its reason, the container's state."""
    status = pod.get("status") or {}
    parts = [str(status.get("phase") or "Unknown")]
    if status.get("reason") == "DeadlineExceeded":
        parts.append("killed at its activeDeadlineSeconds (the session's max duration)")
    elif status.get("reason") or status.get("message"):
        parts.append(f"{status.get('reason', '')} {status.get('message', '')}".strip())
    state = _container_state(pod)
    if state.get("terminated"):
        terminated = state["terminated"]
        parts.append(
            f"exited with code {terminated.get('exitCode')}"
            + (f" ({terminated['reason']})" if terminated.get("reason") else "")
        )
    elif state.get("waiting"):
        waiting = state["waiting"]
        parts.append(f"waiting: {waiting.get('reason', '')} {waiting.get('message', '')}".strip())
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            parts.append(f"not scheduled: {condition.get('message') or condition.get('reason')}")
    return ": ".join(parts)
