"""An in-memory stand-in for the part of the ``kubernetes`` client's ``CoreV1Api`` that the
Kubernetes runtime calls (and the reads of single objects a test looks at), shipped with it (as ``memory_runtime`` ships with the interface): the
runtime's logic runs on the objects it really renders, without a cluster.

What makes it faithful where it matters:
- every body goes through the client's own model classes (``V1Pod.model_validate``, then the
  client's serialization), so the stored object is what the real client would send; answers are
  the client's model objects; errors are its ``ApiException`` with the API's status codes (404,
  409); ``validate`` (the tests pass ``kubernetes-validate``) checks every body against the schemas;
- the kubelet's part: a started pod gets an IP, its environment is resolved as the kubelet does
  (``fieldRef`` status.podIP/hostIP, ``secretKeyRef`` from the stored Secret, ``$(NAME)``
  references), and a stand-in rig answers on ``<pod IP>:8765`` (pod IPs are loopback addresses,
  127.77.x.y) with the rig's Host check and bearer token, so readiness and endpoints are tested
  over real HTTP; a NodePort Service gets a node port on 127.0.0.1 that reaches the same rig;
- the garbage collector: deleting a pod deletes what names it in ``ownerReferences``;
- every object's ``creationTimestamp``, which :meth:`backdate` moves back (an object left from
  before); a list asked for as ``PartialObjectMetadataList`` (the ``Accept`` header) answers
  metadata only, as the API server does.

Every call is recorded as ``(verb, resource)`` in :attr:`FakeCoreV1Api.calls`, for checking the
runtime's calls against the RBAC Role of ``deskrig k8s manifests``; :meth:`refuse` makes chosen
calls fail as a server would (403 Forbidden, 500), and :meth:`on_call` runs a test's action as a
chosen call arrives. Tests script pods with
:meth:`run`, :meth:`crash`, :meth:`exceed_deadline`, :meth:`wait`, :meth:`unschedulable`,
:meth:`set_ready`, :meth:`vanish`, and graceful deletion (``graceful``, :meth:`finish_deletion`).
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from deskrig.guard import host_allowed, host_patterns
from deskrig.orchestrator.models import RIG_PORT
from deskrig.orchestrator.rig_client import EVENTS, FINALIZE, READYZ, STATUS

Obj = dict[str, Any]
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
NODE_IP = "127.0.0.1"


TIMESTAMP = "%Y-%m-%dT%H:%M:%SZ"
#: The ``Accept`` type that asks a list for its objects' metadata only.
METADATA_LIST = "as=PartialObjectMetadataList"


def _timestamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime(TIMESTAMP)


def _now() -> str:
    return datetime.now(UTC).strftime(TIMESTAMP)


def _api_exception(status: int, reason: str) -> Exception:
    from kubernetes.client.exceptions import ApiException

    return ApiException(status=status, reason=reason)


class _StandInRig:
    """A pod's HTTP face, as the rig answers it: /readyz public, the rest behind the token."""

    def __init__(self, env: dict[str, str], address: tuple[str, int]) -> None:
        self.ready = True
        self.token = env.get("DESKRIG_TOKEN", "")
        self.hosts = host_patterns([h for h in env.get("DESKRIG_ALLOWED_HOSTS", "").split(",") if h])
        self.requests: list[tuple[str, str, str]] = []  # (method, path, Host)
        self.server = ThreadingHTTPServer(address, self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        rig = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

            def _answer(self) -> None:
                path = self.path.partition("?")[0]
                host = self.headers.get("Host", "")
                rig.requests.append((self.command, path, host))
                if not host_allowed(host, rig.hosts):
                    self._send(421, {"error": f"Host {host!r} is not allowed"})
                elif path == READYZ:
                    self._send(200 if rig.ready else 503, {"ready": rig.ready})
                elif self.headers.get("Authorization") != f"Bearer {rig.token}":
                    self._send(401, {"error": "bad token"})
                elif path == STATUS:
                    self._send(200, {"last_activity": None})
                elif path == FINALIZE:
                    self._send(200, {"finalized": True})
                elif path == EVENTS:
                    self._send(200, None, "text/event-stream")
                else:
                    self._send(404, {"error": f"no {path}"})

            def _send(self, code: int, body: object, content_type: str = "application/json") -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


class FakeCoreV1Api:
    """See the module docstring. ``start_pods``: created pods run at once (else they stay Pending
    until :meth:`run`); ``validate``: called with every body the runtime sends."""

    def __init__(
        self,
        *,
        start_pods: bool = True,
        graceful: bool = False,
        validate: Callable[[Obj], object] | None = None,
    ) -> None:
        from kubernetes.client import ApiClient

        self.api_client: Any = ApiClient()
        self.start_pods = start_pods
        #: Deleted pods stay, marked with a deletionTimestamp, until :meth:`finish_deletion` (as
        #: during their grace period); else they go at once.
        self.graceful = graceful
        self.validate = validate
        self.calls: list[tuple[str, str]] = []
        self.objects: dict[str, dict[tuple[str, str], Obj]] = {"pods": {}, "secrets": {}, "services": {}}
        self.pod_logs: dict[str, list[str]] = {}
        #: What /readyz says for pods started from now on.
        self.app_ready = True
        #: Calls the "API server" refuses: (verb, resource) -> HTTP status, see :meth:`refuse`.
        self.refusals: dict[tuple[str, str], int] = {}
        #: What runs as a call arrives, before the "API server" acts on it: see :meth:`on_call`.
        self.arrivals: dict[tuple[str, str], Callable[[], None]] = {}
        self._rigs: dict[str, _StandInRig] = {}
        self._node_ports: dict[str, _StandInRig] = {}
        self._ips = (f"127.77.{n // 250}.{n % 250 + 2}" for n in itertools.count())
        self._lock = threading.Lock()

    # --- scripting the cluster --------------------------------------------------------------------

    def pod(self, name: str) -> Obj:
        return next(obj for (_, n), obj in self.objects["pods"].items() if n == name)

    def run(self, name: str) -> None:
        """The kubelet starts the pod: an IP, its container running, a rig answering on it."""
        pod = self.pod(name)
        env = self._resolve_env(pod)
        if env is None:
            self.wait(name, "CreateContainerConfigError", "secret not found")
            return
        while True:
            ip = next(self._ips)
            env = self._resolve_env(pod, pod_ip=ip) or {}
            try:
                rig = _StandInRig(env, (ip, RIG_PORT))
            except OSError:  # that address's port is taken on this machine: the next one
                continue
            break
        rig.ready = self.app_ready
        self._rigs[name] = rig
        pod["status"] = {
            "phase": "Running",
            "podIP": ip,
            "hostIP": NODE_IP,
            "startTime": _now(),
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [self._container({"running": {"startedAt": _now()}}, ready=True)],
        }

    def set_ready(self, name: str, ready: bool) -> None:
        """What the rig's /readyz answers (the app's window mapped, MCP up)."""
        self._rigs[name].ready = ready

    def rig_requests(self, name: str) -> list[tuple[str, str, str]]:
        return self._rigs[name].requests

    def wait(self, name: str, reason: str, message: str = "") -> None:
        """The container waits (``ImagePullBackOff``...); the pod stays Pending."""
        self._stop_rig(name)
        self.pod(name)["status"] = {
            "phase": "Pending",
            "containerStatuses": [self._container({"waiting": {"reason": reason, "message": message}})],
        }

    def unschedulable(
        self, name: str, message: str = "0/3 nodes are available: 3 Insufficient memory."
    ) -> None:
        self.pod(name)["status"] = {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
            ],
        }

    def crash(self, name: str, exit_code: int = 1, reason: str = "Error") -> None:
        """The app (so the rig) exited: restartPolicy Never makes the pod Failed."""
        self._terminate(name, {"phase": "Failed"}, exit_code, reason)

    def exceed_deadline(self, name: str) -> None:
        """The kubelet kills the pod at its activeDeadlineSeconds."""
        status = {
            "phase": "Failed",
            "reason": "DeadlineExceeded",
            "message": "Pod was active on the node longer than the specified deadline",
        }
        self._terminate(name, status, 137, "Error")

    def backdate(self, resource: str, name: str, seconds: float) -> None:
        """The object was created ``seconds`` earlier than it was."""
        meta = next(obj["metadata"] for (_, n), obj in self.objects[resource].items() if n == name)
        created = datetime.strptime(meta["creationTimestamp"], TIMESTAMP).replace(tzinfo=UTC)
        meta["creationTimestamp"] = _timestamp(created.timestamp() - seconds)

    def finish_deletion(self, name: str) -> None:
        """A gracefully deleted pod's grace period ends: it goes, and what it owns with it."""
        self._delete("pods", self.pod(name)["metadata"]["namespace"], name)

    def vanish(self, name: str) -> None:
        """Deleted from outside the orchestrator (``kubectl delete pod``)."""
        self._delete("pods", self.pod(name)["metadata"]["namespace"], name)

    def _terminate(self, name: str, status: Obj, exit_code: int, reason: str) -> None:
        self._stop_rig(name)
        pod = self.pod(name)
        state = {"terminated": {"exitCode": exit_code, "reason": reason, "finishedAt": _now()}}
        pod["status"] = {**(pod.get("status") or {}), **status, "containerStatuses": [self._container(state)]}

    def _container(self, state: Obj, ready: bool = False) -> Obj:
        return {"name": "rig", "image": "", "imageID": "", "ready": ready, "restartCount": 0, "state": state}

    def _stop_rig(self, name: str) -> None:
        rig = self._rigs.pop(name, None)
        if rig is not None:
            rig.stop()

    def _resolve_env(self, pod: Obj, pod_ip: str = "") -> dict[str, str] | None:
        """The container's environment as the kubelet builds it; None when a Secret is missing."""
        env: dict[str, str] = {}
        namespace = pod["metadata"]["namespace"]
        for var in pod["spec"]["containers"][0].get("env") or []:
            source = var.get("valueFrom")
            if source is None:
                value = _VAR.sub(
                    lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), var["value"]
                )
            elif "fieldRef" in source:
                value = {"status.podIP": pod_ip, "status.hostIP": NODE_IP}[source["fieldRef"]["fieldPath"]]
            else:
                ref = source["secretKeyRef"]
                secret = self.objects["secrets"].get((namespace, ref["name"]))
                if secret is None:
                    return None
                value = (secret.get("stringData") or {}).get(ref["key"]) or base64.b64decode(
                    (secret.get("data") or {}).get(ref["key"], "")
                ).decode()
            env[var["name"]] = value
        return env

    def close(self) -> None:
        for name in list(self._rigs):
            self._stop_rig(name)
        for rig in self._node_ports.values():
            rig.stop()
        self._node_ports.clear()
        self.api_client.close()

    # --- the API surface ----------------------------------------------------------------------------

    def refuse(self, verb: str, resource: str, status: int = 403) -> None:
        """Calls of ``verb`` on ``resource`` fail with ``status`` (403: RBAC does not allow it)."""
        self.refusals[(verb, resource)] = status

    def on_call(self, verb: str, resource: str, action: Callable[[], None]) -> None:
        """``action()`` runs as each call of ``verb`` on ``resource`` arrives (a test kills its
        caller there); when it raises, the call is not carried out and fails with that error."""
        self.arrivals[(verb, resource)] = action

    def _record(self, verb: str, resource: str) -> None:
        self.calls.append((verb, resource))
        arrival = self.arrivals.get((verb, resource))
        if arrival is not None:
            arrival()
        status = self.refusals.get((verb, resource))
        if status is not None:
            raise _api_exception(
                status, {403: "Forbidden", 500: "Internal Server Error"}.get(status, "Refused")
            )

    def _store(self, resource: str, model: str, namespace: str, body: Any) -> Any:
        from kubernetes import client

        obj = self.api_client.sanitize_for_serialization(
            getattr(client, model).model_validate(body) if isinstance(body, dict) else body
        )
        if self.validate is not None:
            self.validate(obj)
        meta = obj.setdefault("metadata", {})
        meta.update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=_now())
        key = (namespace, meta["name"])
        with self._lock:
            if key in self.objects[resource]:
                raise _api_exception(409, "AlreadyExists")
            self.objects[resource][key] = obj
        return obj

    def _get(self, resource: str, namespace: str, name: str) -> Obj:
        try:
            return self.objects[resource][(namespace, name)]
        except KeyError:
            raise _api_exception(404, "NotFound") from None

    def _answer(self, obj: Any, model: str) -> Any:
        return self.api_client.deserialize(json.dumps(obj), model, None)

    def _list(self, resource: str, namespace: str, label_selector: str) -> list[Obj]:
        wanted = dict(pair.split("=", 1) for pair in label_selector.split(",") if pair)
        return [
            obj
            for (ns, _), obj in self.objects[resource].items()
            if ns == namespace
            and all((obj["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]

    def _delete(self, resource: str, namespace: str, name: str) -> None:
        obj = self.objects[resource].pop((namespace, name), None)
        if obj is None:
            raise _api_exception(404, "NotFound")
        if resource == "pods":
            self._stop_rig(name)
            uid = obj["metadata"]["uid"]
            for kind, objects in self.objects.items():  # the garbage collector
                for key, owned in list(objects.items()):
                    if any(ref.get("uid") == uid for ref in owned["metadata"].get("ownerReferences") or []):
                        self._delete(kind, *key)
        if resource == "services" and name in self._node_ports:
            self._node_ports.pop(name).stop()

    def create_namespaced_secret(self, namespace: str, body: Any, **_: Any) -> Any:
        self._record("create", "secrets")
        return self._answer(self._store("secrets", "V1Secret", namespace, body), "V1Secret")

    def patch_namespaced_secret(self, name: str, namespace: str, body: Obj, **_: Any) -> Any:
        self._record("patch", "secrets")
        secret = self._get("secrets", namespace, name)
        secret["metadata"].update(body.get("metadata") or {})
        return self._answer(secret, "V1Secret")

    def list_namespaced_secret(
        self, namespace: str, label_selector: str = "", _headers: dict[str, str] | None = None, **_: Any
    ) -> Any:
        self._record("list", "secrets")
        items = self._list("secrets", namespace, label_selector)
        if METADATA_LIST in (_headers or {}).get("Accept", ""):
            meta = {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata"}
            items = [{**meta, "metadata": secret["metadata"]} for secret in items]
        return self._answer({"items": items}, "V1SecretList")

    def read_namespaced_secret(self, name: str, namespace: str, **_: Any) -> Any:
        self._record("get", "secrets")
        return self._answer(self._get("secrets", namespace, name), "V1Secret")

    def delete_namespaced_secret(self, name: str, namespace: str, **_: Any) -> None:
        self._record("delete", "secrets")
        self._delete("secrets", namespace, name)

    def create_namespaced_pod(self, namespace: str, body: Any, **_: Any) -> Any:
        self._record("create", "pods")
        pod = self._store("pods", "V1Pod", namespace, body)
        pod["status"] = {"phase": "Pending"}
        answer = self._answer(pod, "V1Pod")
        if self.start_pods:
            self.run(pod["metadata"]["name"])
        return answer

    def read_namespaced_pod(self, name: str, namespace: str, **_: Any) -> Any:
        self._record("get", "pods")
        return self._answer(self._get("pods", namespace, name), "V1Pod")

    def list_namespaced_pod(self, namespace: str, label_selector: str = "", **_: Any) -> Any:
        self._record("list", "pods")
        return self._answer({"items": self._list("pods", namespace, label_selector)}, "V1PodList")

    def delete_namespaced_pod(self, name: str, namespace: str, **_: Any) -> None:
        self._record("delete", "pods")
        if self.graceful:
            pod = self._get("pods", namespace, name)
            pod["metadata"].setdefault("deletionTimestamp", _now())
            return
        self._delete("pods", namespace, name)

    def read_namespaced_pod_log(
        self, name: str, namespace: str, container: str = "", tail_lines: int | None = None, **_: Any
    ) -> str:
        self._record("get", "pods/log")
        self._get("pods", namespace, name)
        lines = self.pod_logs.get(name, [])
        lines = lines if tail_lines is None else lines[-tail_lines:] if tail_lines else []
        return "".join(line + "\n" for line in lines)

    def create_namespaced_service(self, namespace: str, body: Any, **_: Any) -> Any:
        self._record("create", "services")
        service = self._store("services", "V1Service", namespace, body)
        pods = self._list(
            "pods", namespace, ",".join(f"{k}={v}" for k, v in service["spec"]["selector"].items())
        )
        rig = self._rigs.get(pods[0]["metadata"]["name"]) if pods else None
        if service["spec"].get("type") == "NodePort" and rig is not None:
            # The node's port: another listener on the same stand-in rig, as kube-proxy forwards.
            node_port = _StandInRig({}, (NODE_IP, 0))
            node_port.server.RequestHandlerClass = rig.server.RequestHandlerClass
            self._node_ports[service["metadata"]["name"]] = node_port
            service["spec"]["ports"][0]["nodePort"] = node_port.server.server_address[1]
        return self._answer(service, "V1Service")

    def read_namespaced_service(self, name: str, namespace: str, **_: Any) -> Any:
        self._record("get", "services")
        return self._answer(self._get("services", namespace, name), "V1Service")

    def list_namespaced_service(self, namespace: str, label_selector: str = "", **_: Any) -> Any:
        self._record("list", "services")
        return self._answer({"items": self._list("services", namespace, label_selector)}, "V1ServiceList")

    def delete_namespaced_service(self, name: str, namespace: str, **_: Any) -> None:
        self._record("delete", "services")
        self._delete("services", namespace, name)
