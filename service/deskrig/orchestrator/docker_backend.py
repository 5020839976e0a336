"""The Docker runtime: one hardened container per session, through the ``docker`` SDK.

The SDK is blocking; every call runs in a worker thread. The client negotiates the API version
with the engine (Debian's 20.10 engine speaks 1.41). Docker and transport errors are translated
here, at the backend's boundary: RUNTIME_UNAVAILABLE when the engine cannot be reached, RIG_FAILED
when a rig cannot be created.

The image's HEALTHCHECK is turned off, as on swarm: readiness is the orchestrator's own ``/readyz``
wait and a session's watch sees the container stop, so nothing reads the engine's health status,
while each probe is a ``docker exec`` (runc, the shim, the engine and a bash in the rig) every
2 s: about 30 ms of CPU a second per idle rig, nine tenths of what an idle rig burnt, and on two
cores the limit on how many idle rigs answer in time.

Every session's watch asks for its rig's status each ``watch_interval``; those questions share one
listing of the running rigs (:class:`RunningRigs`) instead of an inspect each, which cost this
process about 2 ms of CPU and the engine about 1 ms per rig per second.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.images import image_reference
from deskrig.orchestrator.mirror import ArtifactMirror
from deskrig.orchestrator.models import RIG_PORT, RIG_UID, OrchestratorConfig, rig_scratch_dirs
from deskrig.orchestrator.runtime import LABEL_MANAGED, ContainerState, RigHandle, RigRequest
from deskrig.orchestrator.waits import wait_until_ready

log = logging.getLogger("deskrig.orchestrator.docker")

ENGINE_ERRORS = (DockerException, requests.RequestException)
_WILDCARD_BINDS = {"0.0.0.0", "::", ""}


def hardening(config: OrchestratorConfig) -> dict[str, Any]:
    """The container options of the rig-images issue: least privilege, read-only, bounded."""
    owner = f",uid={RIG_UID},gid={RIG_UID}"
    return {
        "user": f"{RIG_UID}:{RIG_UID}",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "privileged": False,
        "read_only": True,
        "tmpfs": {
            scratch.path: f"rw,nosuid,nodev,size={scratch.size},mode={scratch.mode}{owner if scratch.owned else ''}"
            for scratch in rig_scratch_dirs(config.tmpfs_size)
        },
        "mem_limit": config.mem_limit,
        "pids_limit": config.pids_limit,
        "network_mode": "bridge",
    }


def engine_down(exc: Exception) -> DeskrigError:
    return DeskrigError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        f"cannot talk to the Docker engine: {exc}",
        details={"error": type(exc).__name__},
    )


def connect_engine() -> docker.DockerClient:
    """A client of the engine ``$DOCKER_HOST`` names (else the local socket), checked by a ping."""
    try:
        client = docker.from_env(max_pool_size=64, timeout=60)
        client.ping()
    except ENGINE_ERRORS as exc:
        raise engine_down(exc) from exc
    return client


def url_host(address: str) -> str:
    """``address`` as the host part of a URL: a wildcard bind means loopback, IPv6 is bracketed."""
    host = "127.0.0.1" if address in _WILDCARD_BINDS else address
    return f"[{host}]" if ":" in host else host


class RunningRigs:
    """The ids of the engine's running rigs, listed once for every question asked within
    ``max_age`` seconds of the listing: N sessions watching their rigs cost one engine request per
    interval, not N. A rig missing from the listing is looked at closely by the caller (it may
    have stopped since, or started after it), so a listing's age only delays seeing a rig stop;
    one found running then joins the listing (newer than the rest of it) until the next."""

    def __init__(self, list_running: Callable[[], frozenset[str]], max_age: float) -> None:
        self._list_running = list_running
        self._max_age = max_age
        self._ids: frozenset[str] = frozenset()
        self._listed_at = -math.inf
        self._lock: anyio.Lock | None = None

    async def include(self, rig_id: str) -> bool:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:  # one listing at a time; who waited for it uses it
            if time.monotonic() - self._listed_at > self._max_age:
                listed_at = time.monotonic()  # the listing is as old as the moment it was asked for
                self._ids = await anyio.to_thread.run_sync(self._list_running)
                self._listed_at = listed_at
            return rig_id in self._ids

    def note_running(self, rig_id: str) -> None:
        self._ids |= {rig_id}


class DockerRuntime:
    name = "docker"

    def __init__(self, config: OrchestratorConfig, client: docker.DockerClient | None = None) -> None:
        self._config = config
        self._client = client
        # Half an interval: a rig that stops is seen within one and a half of its watch's intervals.
        self._running = RunningRigs(self._list_running, max_age=config.watch_interval / 2)

    # --- the engine ------------------------------------------------------------------------------

    def _docker(self) -> docker.DockerClient:
        if self._client is None:
            self._client = connect_engine()
        return self._client

    def _container(self, handle: RigHandle) -> Container:
        return self._docker().containers.get(handle.id)

    def _ensure_image(self, image: str) -> None:
        client = self._docker()
        try:
            client.images.get(image)
            return
        except ImageNotFound:
            pass
        log.info("pulling %s", image)
        try:
            client.images.pull(image)
        except ENGINE_ERRORS as exc:
            raise DeskrigError(
                ErrorCode.RIG_FAILED,
                f"image {image} is not here and cannot be pulled: {exc}",
                details={"image": image},
                remediation="Build the rig images with scripts/build-images, or name an image that exists.",
            ) from exc

    # --- the Runtime protocol ----------------------------------------------------------------------

    async def capacity(self, per_node: int) -> int:
        return per_node  # one node: this engine's

    async def create(self, request: RigRequest) -> RigHandle:
        return await anyio.to_thread.run_sync(self._create, request)

    def _create(self, request: RigRequest) -> RigHandle:
        image = image_reference(request.image, self._config.registry)
        self._ensure_image(image)
        name = f"deskrig-{request.session_id}"
        try:
            container = self._docker().containers.run(
                image,
                request.command,
                name=name,
                detach=True,
                environment=request.env,
                labels=request.labels,
                ports={f"{RIG_PORT}/tcp": (self._config.bind_address, None)},
                healthcheck={"test": ["NONE"]},
                **hardening(self._config),
            )
            container.reload()
        except ENGINE_ERRORS as exc:
            if isinstance(exc, APIError) and exc.is_client_error():
                raise DeskrigError(
                    ErrorCode.RIG_FAILED,
                    f"the engine refused to create the rig: {exc.explanation or exc}",
                    details={"image": image},
                ) from exc
            raise engine_down(exc) from exc
        bindings = (container.ports or {}).get(f"{RIG_PORT}/tcp") or []
        if not bindings:
            # It exited before its port was published: say why (wait_ready would only see "gone").
            logs = container.logs(tail=30).decode("utf-8", "replace").splitlines()
            container.remove(force=True)
            raise DeskrigError(
                ErrorCode.RIG_FAILED,
                f"rig container {name} exited right after it started",
                details={"image": image, "logs": logs},
            )
        port = bindings[0]["HostPort"]
        endpoint = f"http://{url_host(self._config.bind_address)}:{port}"
        return RigHandle(id=container.id or name, name=name, endpoint=endpoint, labels=dict(request.labels))

    async def wait_ready(self, handle: RigHandle, timeout: float) -> None:
        await wait_until_ready(self, handle, timeout)

    def stream_artifacts(self, handle: RigHandle, token: str, dest: Path) -> ArtifactMirror:
        return ArtifactMirror(handle.endpoint, token, dest)

    async def status(self, handle: RigHandle) -> ContainerState:
        if await self._running.include(handle.id):
            return ContainerState(running=True, detail="running")
        state = await anyio.to_thread.run_sync(self._status, handle)
        if state.running:
            self._running.note_running(handle.id)
        return state

    def _list_running(self) -> frozenset[str]:
        try:
            found = self._docker().api.containers(quiet=True, filters={"label": f"{LABEL_MANAGED}=1"})
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        return frozenset(entry["Id"] for entry in found)

    def _status(self, handle: RigHandle) -> ContainerState:
        try:
            container = self._container(handle)
        except NotFound:
            return ContainerState(running=False, detail="gone (removed from outside)")
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        state = container.attrs.get("State", {})
        if state.get("Running"):
            return ContainerState(running=True, detail="running")
        code = state.get("ExitCode")
        if state.get("OOMKilled"):
            detail = f"killed by the OOM killer (memory limit {self._config.mem_limit})"
        elif code is not None:
            detail = f"{state.get('Status', 'exited')} with code {code}"
        else:
            detail = str(state.get("Status", "not running"))
        if state.get("Error"):
            detail += f": {state['Error']}"
        return ContainerState(running=False, detail=detail, exit_code=code)

    async def logs(self, handle: RigHandle, tail: int | None = None) -> str:
        return await anyio.to_thread.run_sync(self._logs, handle, tail)

    def _logs(self, handle: RigHandle, tail: int | None) -> str:
        try:
            raw = self._container(handle).logs(stdout=True, stderr=True, tail="all" if tail is None else tail)
        except NotFound:
            return ""
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        return bytes(raw).decode("utf-8", "replace")

    async def destroy(self, handle: RigHandle) -> None:
        await anyio.to_thread.run_sync(self._destroy, handle)

    def _destroy(self, handle: RigHandle) -> None:
        try:
            self._container(handle).remove(force=True)
        except NotFound:
            return
        except APIError as exc:
            if exc.status_code == 409:  # removal already in progress
                return
            raise engine_down(exc) from exc
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc

    async def list_by_label(self, labels: dict[str, str]) -> list[RigHandle]:
        return await anyio.to_thread.run_sync(self._list_by_label, labels)

    def _list_by_label(self, labels: dict[str, str]) -> list[RigHandle]:
        # The low-level list: one call, no inspect per container (which races with removals).
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
        try:
            found = self._docker().api.containers(all=True, filters=filters)
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        handles = []
        for entry in found:
            ports = [
                p
                for p in entry.get("Ports") or []
                if p.get("PrivatePort") == RIG_PORT and p.get("PublicPort")
            ]
            host = url_host(self._config.bind_address)
            handles.append(
                RigHandle(
                    id=entry["Id"],
                    name=(entry.get("Names") or ["/"])[0].lstrip("/"),
                    endpoint=f"http://{host}:{ports[0]['PublicPort']}" if ports else "",
                    labels=dict(entry.get("Labels") or {}),
                )
            )
        return handles

    async def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
