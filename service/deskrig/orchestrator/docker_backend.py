"""The Docker runtime: one hardened container per session, through the ``docker`` SDK.

The SDK is blocking; every call runs in a worker thread. The client negotiates the API version
with the engine (Debian's 20.10 engine speaks 1.41). Docker and transport errors are translated
here, at the backend's boundary: RUNTIME_UNAVAILABLE when the engine cannot be reached, RIG_FAILED
when a rig cannot be created.
"""

from __future__ import annotations

import logging
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
from deskrig.orchestrator.runtime import ContainerState, RigHandle, RigRequest
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


class DockerRuntime:
    name = "docker"

    def __init__(self, config: OrchestratorConfig, client: docker.DockerClient | None = None) -> None:
        self._config = config
        self._client = client

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
        return await anyio.to_thread.run_sync(self._status, handle)

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
