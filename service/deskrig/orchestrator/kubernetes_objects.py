"""The Kubernetes objects of deskrig, rendered as plain API dicts (what ``kubectl apply`` and the
official client both take): a rig's Pod, its token Secret and its NodePort Service, and the
manifests that run the orchestrator in a cluster (``deskrig k8s manifests``).

Rendering is separate from the runtime so that every object can be checked offline against the
Kubernetes schemas (the tests use ``kubernetes-validate``) and so that the manifests' RBAC Role
grants exactly the calls the runtime makes (:data:`RUNTIME_RULES`).

Labels: Kubernetes label values are at most 63 characters of ``[A-Za-z0-9._-]``, so a rig's lease
path cannot be one. Every rig label (``runtime.rig_labels``) is therefore written as an
annotation, the full record the reaper reads back, and those that are valid label values are
labels too, for the API's label selectors.
"""

from __future__ import annotations

import copy
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from deskrig.orchestrator.images import image_reference
from deskrig.orchestrator.models import RIG_PORT, RIG_UID, OrchestratorConfig, rig_scratch_dirs
from deskrig.orchestrator.reaper import EXPIRY_GRACE
from deskrig.orchestrator.rig_client import READYZ
from deskrig.orchestrator.runtime import LABEL_EXPIRES, LABEL_MANAGED, LABEL_SESSION, RigRequest

Manifest = dict[str, Any]

#: How the orchestrator reaches a rig: in-cluster by the pod's IP; from outside the cluster by a
#: NodePort Service on the node the pod runs on.
Endpoint = Literal["pod-ip", "node-port"]

#: The rig's container name in its pod (logs are read from it).
RIG_CONTAINER = "rig"
TOKEN_KEY = "token"
TOKEN_SECRET_SUFFIX = "-token"
#: Environment variables the kubelet fills from the downward API, named in DESKRIG_ALLOWED_HOSTS
#: as ``$(NAME)``: clients reach the rig by the pod's or the node's IP, so its Host header is one.
POD_IP_VAR = "DESKRIG_POD_IP"
NODE_IP_VAR = "DESKRIG_NODE_IP"
ORCHESTRATOR_NAME = "deskrig-orchestrator"
ORCHESTRATOR_PORT = 8780

_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^([0-9]+)([kmg]?)b?$", re.I)


@dataclass(frozen=True)
class RigPodSettings:
    """What a rig's pod gets besides the orchestrator's settings: its namespace, how it is reached,
    its CPU and memory requests (the memory limit is the orchestrator's ``mem_limit``), and the
    orchestrator's own pod when it runs in the cluster (``owner``: its metadata, name and uid)."""

    namespace: str = "deskrig"
    endpoint: Endpoint = "pod-ip"
    cpu_request: str = "250m"
    cpu_limit: str = "2"
    memory_request: str = "256Mi"
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    owner: Manifest | None = None


def is_dns_label(name: str) -> bool:
    return bool(_DNS_LABEL.match(name))


def is_label_value(value: str) -> bool:
    return bool(_LABEL_VALUE.match(value))


def quantity(docker_size: str) -> str:
    """A Docker size (``2g``, ``512m``, ``1024``) as a Kubernetes quantity (``2Gi``, ``512Mi``)."""
    match = _QUANTITY.match(docker_size.strip())
    if not match:
        raise ValueError(f"not a size like 512m or 2g: {docker_size!r}")
    number, unit = match.groups()
    return number + {"": "", "k": "Ki", "m": "Mi", "g": "Gi"}[unit.lower()]


def selector(labels: dict[str, str]) -> str:
    """A label selector for the pairs of ``labels`` that can be labels (the rest: see the docstring)."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()) if is_label_value(value))


def rig_metadata(request: RigRequest, name: str, namespace: str) -> Manifest:
    return {
        "name": name,
        "namespace": namespace,
        "labels": {key: value for key, value in request.labels.items() if is_label_value(value)},
        "annotations": dict(request.labels),
    }


def rig_name(request: RigRequest) -> str:
    return f"deskrig-{request.session_id}"


def token_secret_name(pod_name: str) -> str:
    return pod_name + TOKEN_SECRET_SUFFIX


def ownerless_token_secrets(secrets: list[Manifest], rig_names: set[str]) -> dict[str, Manifest]:
    """The rig token Secrets among ``secrets`` (named as :func:`token_secret_name` names them) that
    name no owner and whose rig is not among ``rig_names`` (the pods that exist), by the name of
    that rig: what a create that died before handing its Secret to its Pod left. An owned Secret
    is the garbage collector's, which removes it with its pod."""
    leftovers = {}
    for secret in secrets:
        meta = secret.get("metadata") or {}
        name = str(meta.get("name", ""))
        rig = name.removesuffix(TOKEN_SECRET_SUFFIX)
        if name.endswith(TOKEN_SECRET_SUFFIX) and not meta.get("ownerReferences") and rig not in rig_names:
            leftovers[rig] = secret
    return leftovers


#: The downward-API variables that tell an in-cluster orchestrator its own pod.
OWNER_NAME_VAR = "DESKRIG_POD_NAME"
OWNER_UID_VAR = "DESKRIG_POD_UID"


def owner_from_environment(environ: dict[str, str]) -> Manifest | None:
    """The orchestrator's own pod's metadata, from the variables its Deployment sets; else None."""
    name, uid = environ.get(OWNER_NAME_VAR, ""), environ.get(OWNER_UID_VAR, "")
    return {"metadata": {"name": name, "uid": uid}} if name and uid else None


def owned_by(pod: Manifest) -> list[Manifest]:
    """ownerReferences to ``pod`` (as the API returned it): the garbage collector removes what the
    pod owns with it, even when no orchestrator is left to."""
    meta = pod["metadata"]
    return [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}]


def token_secret(request: RigRequest, namespace: str) -> Manifest:
    """The rig's bearer token, so that it is never in the pod spec in clear."""
    name = token_secret_name(rig_name(request))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": rig_metadata(request, name, namespace),
        "type": "Opaque",
        "stringData": {TOKEN_KEY: request.env.get("DESKRIG_TOKEN", "")},
    }


def active_deadline(request: RigRequest, now: float) -> int | None:
    """The pod's ``activeDeadlineSeconds``: the session's deadline, plus the grace its owner gets to
    stop it first (finalizing the video), as the reaper allows; None without a deadline."""
    expires = float(request.labels.get(LABEL_EXPIRES, "0") or 0)
    if not expires:
        return None
    return max(1, math.ceil(expires - now)) + int(EXPIRY_GRACE)


def _env(request: RigRequest, secret_name: str) -> list[Manifest]:
    def field(path: str) -> Manifest:
        return {"fieldRef": {"fieldPath": path}}

    env: list[Manifest] = [
        {"name": POD_IP_VAR, "valueFrom": field("status.podIP")},
        {"name": NODE_IP_VAR, "valueFrom": field("status.hostIP")},
        {"name": "DESKRIG_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret_name, "key": TOKEN_KEY}}},
    ]
    for key, value in request.env.items():
        if key not in ("DESKRIG_TOKEN", "DESKRIG_ALLOWED_HOSTS"):
            # Literal: the kubelet would expand a $(NAME) in it.
            env.append({"name": key, "value": value.replace("$(", "$$(")})
    given = [host for host in request.env.get("DESKRIG_ALLOWED_HOSTS", "").split(",") if host]
    hosts = ",".join([*given, f"$({POD_IP_VAR})", f"$({NODE_IP_VAR})"])
    return [*env, {"name": "DESKRIG_ALLOWED_HOSTS", "value": hosts}]


def rig_pod(
    request: RigRequest, config: OrchestratorConfig, settings: RigPodSettings, *, now: float | None = None
) -> Manifest:
    """The rig's Pod: one hardened container, scratch dirs in memory, readiness on /readyz."""
    name = rig_name(request)
    scratch = rig_scratch_dirs(config.tmpfs_size)
    volume_names = {dir.path: f"scratch-{index}" for index, dir in enumerate(scratch)}
    hardened = {
        "runAsNonRoot": True,
        "runAsUser": RIG_UID,
        "runAsGroup": RIG_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container: Manifest = {
        "name": RIG_CONTAINER,
        "image": image_reference(request.image, config.registry),
        "imagePullPolicy": settings.image_pull_policy,
        "ports": [{"name": "http", "containerPort": RIG_PORT, "protocol": "TCP"}],
        "env": _env(request, token_secret_name(name)),
        "securityContext": {
            **hardened,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {
            "requests": {"cpu": settings.cpu_request, "memory": settings.memory_request},
            "limits": {"cpu": settings.cpu_limit, "memory": quantity(config.mem_limit)},
        },
        # The kubelet probes by the pod's IP; the rig accepts loopback Host names anywhere.
        "readinessProbe": {
            "httpGet": {
                "path": READYZ,
                "port": RIG_PORT,
                "httpHeaders": [{"name": "Host", "value": "localhost"}],
            },
            "periodSeconds": 2,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
        },
        "volumeMounts": [{"name": volume_names[dir.path], "mountPath": dir.path} for dir in scratch],
    }
    if request.command:
        container["args"] = list(request.command)  # like Docker's CMD: the image's entrypoint stays
    spec: Manifest = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,  # a rig has no business with the Kubernetes API
        "enableServiceLinks": False,
        "securityContext": {**hardened, "fsGroup": RIG_UID},
        "containers": [container],
        "volumes": [
            {
                "name": volume_names[dir.path],
                "emptyDir": {"medium": "Memory", "sizeLimit": quantity(dir.size)},
            }
            for dir in scratch
        ],
    }
    deadline = active_deadline(request, time.time() if now is None else now)
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    metadata = rig_metadata(request, name, settings.namespace)
    if settings.owner is not None:
        # The orchestrator's pod owns its rigs: deleting it (a new Deployment revision, a drained
        # node) deletes them too, where a new orchestrator could neither adopt nor reap them.
        metadata["ownerReferences"] = owned_by(settings.owner)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def rig_service(request: RigRequest, namespace: str) -> Manifest:
    """A NodePort Service to the rig, for an orchestrator outside the cluster."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": rig_metadata(request, rig_name(request), namespace),
        "spec": {
            "type": "NodePort",
            "selector": {LABEL_MANAGED: "1", LABEL_SESSION: request.session_id},
            "ports": [{"name": "http", "port": RIG_PORT, "targetPort": RIG_PORT, "protocol": "TCP"}],
            # Routed before the kubelet's probe passes: the orchestrator's own wait reads /readyz.
            "publishNotReadyAddresses": True,
        },
    }


#: The API calls the Kubernetes runtime makes in pod-ip mode, as RBAC rules; node-port mode adds
#: :data:`NODE_PORT_RULES`. Tests check the runtime's calls against them.
RUNTIME_RULES: list[Manifest] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    # list: the reaper finds the token Secrets of creates that died before their Pod owned them,
    # asking for their metadata only (the Role cannot say so: with patch, which answers the whole
    # object, it could already read a Secret it can name).
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "list", "patch", "delete"]},
]
NODE_PORT_RULES: list[Manifest] = [
    {"apiGroups": [""], "resources": ["services"], "verbs": ["create", "list", "delete"]},
]


def manifests(image: str, namespace: str = "deskrig", *, registry: str | None = None) -> list[Manifest]:
    """Everything that runs the orchestrator in ``namespace``, its rigs beside it (pod-ip mode)."""
    meta = {"name": ORCHESTRATOR_NAME, "namespace": namespace}
    labels = {"app.kubernetes.io/name": ORCHESTRATOR_NAME, "app.kubernetes.io/part-of": "deskrig"}
    hardened = {
        "runAsNonRoot": True,
        "runAsUser": RIG_UID,
        "runAsGroup": RIG_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    command = ["deskrig", "orchestrator", "serve", "--runtime", "kubernetes"]
    command += ["--listen", f"0.0.0.0:{ORCHESTRATOR_PORT}"]
    # By variables, not flags: `kubectl exec ... deskrig session start` finds the service by them.
    env = [
        {"name": OWNER_NAME_VAR, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": OWNER_UID_VAR, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "DESKRIG_STATE_DIR", "value": "/var/lib/deskrig/state"},
        {"name": "DESKRIG_ARTIFACTS_ROOT", "value": "/var/lib/deskrig/sessions"},
        *([{"name": "DESKRIG_REGISTRY", "value": registry}] if registry else []),
    ]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "labels": labels}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {**meta, "labels": labels},
            "rules": copy.deepcopy(RUNTIME_RULES),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {**meta, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ORCHESTRATOR_NAME},
            "subjects": [{"kind": "ServiceAccount", "name": ORCHESTRATOR_NAME, "namespace": namespace}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {**meta, "labels": labels},
            "spec": {
                "replicas": 1,  # one orchestrator owns its sessions; a second would be a second service
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": ORCHESTRATOR_NAME,
                        "securityContext": {**hardened, "fsGroup": RIG_UID},
                        "containers": [
                            {
                                "name": "orchestrator",
                                "image": image,
                                "command": command,
                                "env": env,
                                "ports": [{"name": "api", "containerPort": ORCHESTRATOR_PORT}],
                                # Its API takes loopback Host names only (kubectl port-forward
                                # keeps them); the kubelet's probe says localhost too.
                                "readinessProbe": {
                                    "httpGet": {
                                        "path": "/healthz",
                                        "port": ORCHESTRATOR_PORT,
                                        "httpHeaders": [{"name": "Host", "value": "localhost"}],
                                    },
                                    "periodSeconds": 5,
                                },
                                "securityContext": {
                                    **hardened,
                                    "readOnlyRootFilesystem": True,
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "resources": {
                                    "requests": {"cpu": "100m", "memory": "256Mi"},
                                    "limits": {"cpu": "1", "memory": "1Gi"},
                                },
                                "volumeMounts": [
                                    {"name": "data", "mountPath": "/var/lib/deskrig"},
                                    {"name": "tmp", "mountPath": "/tmp"},
                                ],
                            }
                        ],
                        # Session artifacts live as long as the pod; mount a PersistentVolumeClaim
                        # here to keep them longer.
                        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {**meta, "labels": labels},
            "spec": {
                "selector": labels,
                "ports": [{"name": "api", "port": ORCHESTRATOR_PORT, "targetPort": ORCHESTRATOR_PORT}],
            },
        },
    ]
