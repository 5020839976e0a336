"""The in-memory CoreV1Api stand-in behind the Kubernetes REST paths, on a loopback port: the real
``kubernetes`` client talks to it over HTTP, so a test covers what the stand-in alone cannot (the
client's URL paths and query parameters, its serialisation of the runtime's bodies, its patch
content type, its deserialisation of the answers and its ApiException on errors)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from deskrig.orchestrator.kubernetes_fake import FakeCoreV1Api

_PATH = re.compile(
    r"^/api/v1/namespaces/(?P<ns>[^/]+)/(?P<kind>pods|secrets|services)(?:/(?P<name>[^/]+))?(?P<log>/log)?$"
)
_SINGULAR = {"pods": "pod", "secrets": "secret", "services": "service"}


class ApiServer:
    """Serves ``fake`` at ``url``; ``requests`` holds every (method, path, query, content type), and
    ``accepts`` the ``Accept`` header of each."""

    def __init__(self, fake: FakeCoreV1Api) -> None:
        self.fake = fake
        self.requests: list[tuple[str, str, dict[str, list[str]], str]] = []
        self.accepts: list[str] = []
        self._lock = threading.Lock()  # a request's entries at the same index of both lists
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def _dispatch(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, accept: str
    ) -> tuple[int, Any]:
        match = _PATH.match(path)
        if match is None:
            return 404, {"kind": "Status", "code": 404, "message": f"no route {path}"}
        ns, kind, name = match["ns"], match["kind"], match["name"]
        one = _SINGULAR[kind]
        fake = self.fake
        selector = query.get("labelSelector", [""])[0]
        calls: dict[tuple[str, bool], Callable[[], Any]] = {
            ("POST", False): lambda: getattr(fake, f"create_namespaced_{one}")(ns, body),
            ("GET", False): lambda: getattr(fake, f"list_namespaced_{one}")(
                ns, label_selector=selector, _headers={"Accept": accept}
            ),
            ("GET", True): lambda: (
                fake.read_namespaced_pod_log(
                    name,
                    ns,
                    container=query.get("container", [""])[0],
                    tail_lines=int(query["tailLines"][0]) if "tailLines" in query else None,
                )
                if match["log"]
                else getattr(fake, f"read_namespaced_{one}")(name, ns)
            ),
            ("PATCH", True): lambda: getattr(fake, f"patch_namespaced_{one}")(name, ns, body),
            ("DELETE", True): lambda: self._delete(one, ns, name),
        }
        call = calls.get((method, name is not None))
        if call is None:
            return 405, {"kind": "Status", "code": 405, "message": f"{method} {path}"}
        try:
            result = call()
        except Exception as exc:  # the stand-in's ApiException: its status, as the server answers
            status = getattr(exc, "status", 500)
            return status, {"kind": "Status", "code": status, "reason": getattr(exc, "reason", "")}
        if isinstance(result, str):
            return 200, result
        return (201 if method == "POST" else 200), fake.api_client.sanitize_for_serialization(result)

    def _delete(self, one: str, ns: str, name: str) -> Any:
        """As the API answers a delete: the object for pods and services, a Status for secrets."""
        kind = one + "s"
        gone = self.fake.objects[kind].get((ns, name))
        getattr(self.fake, f"delete_namespaced_{one}")(name, ns)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success"} if kind == "secrets" else gone

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                accept = self.headers.get("Accept", "")
                with api._lock:
                    api.requests.append((self.command, url.path, query, self.headers.get("Content-Type", "")))
                    api.accepts.append(accept)
                status, answer = api._dispatch(self.command, url.path, query, body, accept)
                text = answer if isinstance(answer, str) else json.dumps(answer)
                data = text.encode()
                self.send_response(status)
                self.send_header(
                    "Content-Type", "text/plain" if isinstance(answer, str) else "application/json"
                )
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _serve

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

        return Handler


@contextmanager
def serving(fake: FakeCoreV1Api) -> Iterator[ApiServer]:
    api = ApiServer(fake)
    thread = threading.Thread(target=api.server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield api
    finally:
        api.server.shutdown()
        api.server.server_close()


def write_kubeconfig(path: Path, server_url: str, namespace: str) -> Path:
    """A kubeconfig whose current context is the API server at ``server_url`` and ``namespace``,
    as ``kubectl config`` writes one (JSON is YAML); the client loads it from ``KUBECONFIG``."""
    context = {"cluster": "fake", "user": "orchestrator", "namespace": namespace}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server_url}}],
        "users": [{"name": "orchestrator", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": context}],
        "current-context": "fake",
    }
    path.write_text(json.dumps(config))
    return path
