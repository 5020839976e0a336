"""The Docker Swarm runtime: one service per session, one replica, never restarted, on any node.

Through the same ``docker`` SDK (and engine connection) as the Docker runtime; the engine must be
a swarm manager. Each rig is a service whose labels are the session's :func:`~deskrig.orchestrator.
runtime.rig_labels`, so the reaper and the restart recovery find rigs by label on every node. Its
container port is published in **host mode** on whichever node runs it, and its endpoint is that
node's address and port, read from the task's status: no overlay network, and no ingress routing
mesh, whose IPVS hop every request would cross (its port would also open on every node). The
port is dynamic, so any number of rigs share a node.

Hardening as the Docker runtime's, as far as a swarm service can say it (API 1.41): uid 1000,
read-only root, every capability dropped, tmpfs for the writable paths, memory and pids limits.
A service cannot set ``no-new-privileges``: the rig image has no setuid or file-capability
programs to gain privileges from (its build strips them). Nor can it own a tmpfs by uid 1000, so
a swarm rig writes only to /tmp (see :func:`tmpfs_mounts`).
The image's HEALTHCHECK is turned off: swarm would kill a rig that a loaded node makes slow to
answer it, and readiness is the orchestrator's ``/readyz`` wait, as with Docker.

The rig's token is a swarm secret (one per session, removed with its service), mounted as the
rig's tokens file, readable by the rig user only (mode 0400, uid 1000: the rig refuses a tokens
file others may read, and a secret's default is 0444 root): in the service's environment, anyone
who may inspect services would read it. The secret carries the rig's labels and is created just
before its service: an orchestrator that dies in between leaves a secret alone, which
:meth:`SwarmRuntime.list_leftovers` lists (no service of its session, none mounting it) for the
reaper, which removes it as it removes rigs, and whoever made it once older than
``reaper.LEFTOVER_GRACE``, as Kubernetes' token Secrets.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import docker
from docker.errors import APIError, NotFound
from docker.types import (
    EndpointSpec,
    Healthcheck,
    Mount,
    Resources,
    RestartPolicy,
    SecretReference,
    ServiceMode,
)
from docker.utils import parse_bytes

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.docker_backend import (
    ENGINE_ERRORS,
    connect_engine,
    engine_down,
    url_host,
)
from deskrig.orchestrator.images import image_reference
from deskrig.orchestrator.mirror import ArtifactMirror
from deskrig.orchestrator.models import RIG_PORT, RIG_UID, OrchestratorConfig, rig_scratch_dirs
from deskrig.orchestrator.reaper import Leftover, created_epoch
from deskrig.orchestrator.runtime import (
    LABEL_LEASE,
    LABEL_ORCHESTRATOR,
    LABEL_SESSION,
    ContainerState,
    RigHandle,
    RigRequest,
)
from deskrig.orchestrator.waits import Probe, poll, wait_until_ready

log = logging.getLogger("deskrig.orchestrator.swarm")

#: Task states after which a task never runs again (restart condition none: nor does its service).
TERMINAL_STATES = frozenset({"complete", "failed", "shutdown", "rejected", "orphaned", "remove"})
#: How often ``create`` looks whether the cluster has started the rig's task.
PLACEMENT_POLL = 0.1
#: The engine's error for a task whose container could not publish its port: a socket took the
#: host port the engine had picked for it before its proxy bound it. Seen on a loaded single-node
#: swarm, about one start in ten here (the picked port is one the kernel also hands out to
#: outgoing connections); the engine does not pick again for a swarm task, so ``create`` asks
#: for a new task (see :class:`Placement`).
PORT_TAKEN = "address already in use"
#: Tasks a rig's service gets in all while each fails on a taken port.
PLACEMENT_ATTEMPTS = 3
#: How long ``destroy`` waits for another node to stop a removed service's container: the rig's
#: stop grace period (the engine's default, 10 s) and the swarm's own delays. A node that is down
#: keeps its task longer: ``destroy`` then says so in the log and returns.
TASKS_STOPPED_TIMEOUT = 15.0
#: Where a swarm rig records, and its home: on its one writable tmpfs (see :func:`tmpfs_mounts`).
SWARM_RECORD_DIR = "/tmp/artifacts"
RIG_TMP_HOME = "/tmp"
#: Where the rig reads its token: the session's secret, as a tokens file (``default=TOKEN``).
TOKENS_FILE = "/run/secrets/deskrig-tokens"
#: Only the rig user may read it.
TOKENS_FILE_MODE = 0o400


def tmpfs_mounts(config: OrchestratorConfig) -> list[Mount]:
    """One tmpfs, at /tmp, holding what the Docker runtime's several hold (its sizes added up).

    A service's tmpfs cannot be owned by uid 1000, and Debian's 20.10 engine ignores a mode given
    for one: it takes the mode of the directory it covers and is owned by root. The image's /tmp
    is world-writable with the sticky bit, so a tmpfs there is too; /artifacts and /home/rig are
    the rig user's 0755 directories, so tmpfs over them would be root's, and the rig could not
    write. The recording and ``HOME`` move under /tmp instead (:func:`service_env`)."""
    size = sum(parse_bytes(scratch.size) for scratch in rig_scratch_dirs(config.tmpfs_size))
    return [Mount("/tmp", "", type="tmpfs", tmpfs_size=size)]


def service_env(request: RigRequest, node_hosts: list[str]) -> dict[str, str]:
    """The rig's environment: the request's, with what a service's one writable tmpfs and
    node addresses change."""
    env = {**request.env, "HOME": RIG_TMP_HOME}
    if env.pop("DESKRIG_TOKEN", ""):
        env["DESKRIG_TOKENS_FILE"] = TOKENS_FILE  # the secret (:func:`token_secret`)
    if env.get("DESKRIG_RECORD"):
        env["DESKRIG_RECORD"] = SWARM_RECORD_DIR
    env.setdefault("DESKRIG_ALLOWED_DIRS", SWARM_RECORD_DIR)
    # Clients reach the rig at its node's address, which its Host check must accept.
    hosts = [*filter(None, env.get("DESKRIG_ALLOWED_HOSTS", "").split(",")), *node_hosts]
    env["DESKRIG_ALLOWED_HOSTS"] = ",".join(dict.fromkeys(hosts))
    return env


def resources(config: OrchestratorConfig) -> Resources:
    """Reservations (what the scheduler places by) and limits (what the node enforces)."""
    nano = 1_000_000_000
    spec = Resources(
        cpu_limit=int(config.cpu_limit * nano) or None,
        mem_limit=parse_bytes(config.mem_limit),
        cpu_reservation=int(config.cpu_reservation * nano) or None,
        mem_reservation=parse_bytes(config.mem_reservation),
    )
    spec.setdefault("Limits", {})["Pids"] = config.pids_limit  # API 1.41; the SDK has no argument
    return spec


def service_name(session_id: str) -> str:
    """The name of a session's rig service."""
    return f"deskrig-{session_id}"


def token_secret(request: RigRequest) -> dict[str, Any] | None:
    """What ``secrets.create`` gets for the rig's token: its tokens file; None without a token."""
    token = request.env.get("DESKRIG_TOKEN", "")
    if not token:
        return None
    return {
        "name": f"{service_name(request.session_id)}-tokens",
        "data": f"default={token}\n".encode(),
        "labels": request.labels,
    }


def service_options(
    request: RigRequest, config: OrchestratorConfig, node_hosts: list[str], secret_id: str | None = None
) -> dict[str, Any]:
    """Everything ``services.create`` gets for one rig, but the image; ``secret_id``: the rig's
    token secret (:func:`token_secret`)."""
    env = service_env(request, node_hosts)
    secrets = []
    if secret_id is not None:
        secret = SecretReference(
            secret_id,
            f"deskrig-{request.session_id}-tokens",
            filename=Path(TOKENS_FILE).name,
            uid=str(RIG_UID),
            gid=str(RIG_UID),
            mode=TOKENS_FILE_MODE,
        )
        secrets.append(secret)
    preferences = [tuple(preference.split("=", 1)) for preference in config.placement_preferences]
    return {
        # A service's "command" replaces the image's ENTRYPOINT (the rig); its "args", the CMD (the app).
        "args": request.command,
        "name": service_name(request.session_id),
        "env": [f"{name}={value}" for name, value in env.items()],
        "labels": request.labels,
        # Enough to find a rig's container with `docker ps`; without io.deskrig.managed, so that a
        # Docker runtime's reaper on the node leaves the swarm's containers to the swarm runtime.
        "container_labels": {
            key: request.labels[key] for key in (LABEL_SESSION, LABEL_ORCHESTRATOR, LABEL_LEASE)
        },
        "user": f"{RIG_UID}:{RIG_UID}",
        "read_only": True,
        "cap_drop": ["ALL"],
        "mounts": tmpfs_mounts(config),
        "secrets": secrets,
        "healthcheck": Healthcheck(test=["NONE"]),
        "resources": resources(config),
        "mode": ServiceMode("replicated", replicas=1),
        "restart_policy": RestartPolicy(condition="none"),
        "constraints": config.placement_constraints,
        "preferences": preferences,
        "endpoint_spec": EndpointSpec(
            ports=[{"Protocol": "tcp", "TargetPort": RIG_PORT, "PublishMode": "host"}]
        ),
    }


def task_state(task: dict[str, Any] | None) -> ContainerState:
    """A service's task as the session core reads a container: running or how it ended."""
    if task is None:
        return ContainerState(running=True, detail="waiting for the cluster to create its task")
    status = task.get("Status", {})
    state = status.get("State", "unknown")
    if state not in TERMINAL_STATES:
        return ContainerState(running=True, detail="running" if state == "running" else f"task {state}")
    code = status.get("ContainerStatus", {}).get("ExitCode")
    error = status.get("Err") or status.get("Message") or ""
    if state in ("failed", "complete") and code is not None:
        # The engine's reason, unless it only repeats the code ("task: non-zero exit (1)").
        reason = status.get("Err") or ""
        detail = f"exited with code {code}" + (
            f": {reason}" if reason and "non-zero exit" not in reason else ""
        )
    elif state == "rejected":
        detail = f"rejected by the cluster: {error}"
    elif state == "orphaned":
        detail = "lost with its node"
    else:
        detail = f"task {state}" + (f": {error}" if error else "")
    return ContainerState(running=False, detail=detail, exit_code=code)


def newest_task(tasks: list[dict[str, Any]]) -> dict[str, Any] | None:
    return max(tasks, key=lambda task: task.get("CreatedAt", ""), default=None)


def published_port(task: dict[str, Any]) -> int | None:
    for port in task.get("Status", {}).get("PortStatus", {}).get("Ports") or []:
        if port.get("TargetPort") == RIG_PORT and port.get("PublishedPort"):
            return int(port["PublishedPort"])
    return None


def task_endpoint(task: dict[str, Any], hosts: dict[str, str]) -> str:
    """Where the task's rig is reached: its node's host (``hosts``: node id -> host) and its
    published port; "" until both are known."""
    port = published_port(task)
    host = hosts.get(task.get("NodeID", ""))
    return f"http://{host}:{port}" if port and host else ""


@dataclass
class Placement:
    """A rig's service while ``create`` waits for its task to run: the nodes' hosts (node id ->
    host), the endpoint once known, and the tasks given up on.

    A task whose container could not publish its port (:data:`PORT_TAKEN`) is replaced by a new
    one (the caller sees :attr:`wants_new_task`), :data:`PLACEMENT_ATTEMPTS` tasks in all; any
    other end of a task is the rig's, and fatal."""

    service_id: str
    hosts: dict[str, str]
    endpoint: str = ""
    state: ContainerState = field(default_factory=lambda: task_state(None))  # no task yet
    replaced: set[str] = field(default_factory=set)
    wants_new_task: bool = False

    def look(self, task: dict[str, Any] | None) -> Probe:
        """Whether ``task`` (the service's newest) runs with its port published."""
        if task is not None and task.get("ID") in self.replaced:  # newest until its successor exists
            return Probe(done=False, observed=f"task {self.state.detail}; waiting for its replacement")
        self.state = task_state(task)
        if self.state.running:
            self.endpoint = task_endpoint(task, self.hosts) if task is not None else ""
            return Probe(done=bool(self.endpoint), observed=self.state.detail)
        if (
            task is not None
            and PORT_TAKEN in self.state.detail
            and len(self.replaced) + 1 < PLACEMENT_ATTEMPTS
        ):
            self.replaced.add(str(task.get("ID")))
            self.wants_new_task = True
            return Probe(done=False, observed=f"task {self.state.detail}")
        return Probe(done=False, observed=self.state.detail, fatal=True)


def label_filter(labels: dict[str, str]) -> dict[str, list[str]]:
    """The engine's list filter for what carries every pair of ``labels``."""
    return {"label": [f"{key}={value}" for key, value in labels.items()]}


def secrets_in_use(services: list[dict[str, Any]]) -> set[str]:
    """The ids of the secrets ``services`` mount: the engine refuses to remove those."""
    return {
        reference["SecretID"]
        for service in services
        for reference in service["Spec"].get("TaskTemplate", {}).get("ContainerSpec", {}).get("Secrets") or []
    }


def secrets_without_service(secrets: list[dict[str, Any]], services: list[dict[str, Any]]) -> list[Leftover]:
    """Token secrets that no service mounts and whose session has no service (see the module's
    docstring), as leftovers whose handle's id is the service's name, which
    :meth:`SwarmRuntime.destroy` finds gone and then removes the secret; ``services``: all of them."""
    served = {(service["Spec"].get("Labels") or {}).get(LABEL_SESSION) for service in services}
    used = secrets_in_use(services)
    leftovers = []
    for secret in secrets:
        labels = dict(secret["Spec"].get("Labels") or {})
        session_id = labels.get(LABEL_SESSION, "")
        if session_id and session_id not in served and secret["ID"] not in used:
            name = secret["Spec"]["Name"]
            handle = RigHandle(id=service_name(session_id), name=name, endpoint="", labels=labels)
            leftovers.append(Leftover(f"secret {name}", handle, created_epoch(secret.get("CreatedAt"))))
    return leftovers


def active_nodes(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes the scheduler may place a rig on now: ready and not paused or drained."""
    return [
        node
        for node in nodes
        if node.get("Status", {}).get("State") == "ready"
        and node.get("Spec", {}).get("Availability") == "active"
    ]


class SwarmRuntime:
    name = "swarm"

    def __init__(self, config: OrchestratorConfig, client: docker.DockerClient | None = None) -> None:
        self._config = config
        self._client = client
        self._node_id: str | None = None  # this engine's node in the swarm, once asked

    # --- the cluster -----------------------------------------------------------------------------

    def _docker(self) -> docker.DockerClient:
        if self._client is None:
            client = connect_engine()
            try:
                swarm = client.info().get("Swarm", {})
            except ENGINE_ERRORS as exc:
                client.close()
                raise engine_down(exc) from exc
            manager = bool(swarm.get("ControlAvailable"))
            self._node_id = str(swarm.get("NodeID", ""))
            if not manager:
                client.close()
                raise DeskrigError(
                    ErrorCode.RUNTIME_UNAVAILABLE,
                    "the Docker engine is not a swarm manager: the swarm runtime creates services",
                    remediation="Run the orchestrator against a manager (DOCKER_HOST), or make this "
                    "engine one: `docker swarm init --advertise-addr ADDR`.",
                )
            self._client = client
        return self._client

    def _own_node(self) -> str:
        """This engine's node id (where ``destroy`` removes a task's container itself)."""
        if self._node_id is None:
            self._node_id = str(self._docker().info().get("Swarm", {}).get("NodeID", ""))
        return self._node_id

    def _node_hosts(self) -> dict[str, str]:
        """Each node's id and the address its published ports are reached at."""
        return {
            node["ID"]: url_host(node.get("Status", {}).get("Addr", ""))
            for node in self._docker().api.nodes()
        }

    def _tasks(self, service_id: str) -> list[dict[str, Any]]:
        tasks: list[dict[str, Any]] = self._docker().api.tasks(filters={"service": service_id})
        return tasks

    # --- the Runtime protocol ----------------------------------------------------------------------

    async def capacity(self, per_node: int) -> int:
        return await anyio.to_thread.run_sync(self._capacity, per_node)

    def _capacity(self, per_node: int) -> int:
        try:
            return per_node * len(active_nodes(self._docker().api.nodes()))
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc

    async def create(self, request: RigRequest) -> RigHandle:
        service_id, hosts = await anyio.to_thread.run_sync(self._create_service, request)
        pending = RigHandle(
            id=service_id, name=service_name(request.session_id), endpoint="", labels=dict(request.labels)
        )
        try:
            return await self._placed(pending, request.image, hosts)
        except BaseException:
            with anyio.CancelScope(shield=True):  # a stop while placing: the service must not stay
                await self.destroy(pending)
            raise

    def _create_service(self, request: RigRequest) -> tuple[str, dict[str, str]]:
        """The new service's id, and the nodes' hosts as listed for it (``_node_hosts``)."""
        secret_id = None
        try:
            hosts = self._node_hosts()
            # Every node pulls the image itself: with --registry, from there.
            image = image_reference(request.image, self._config.registry)
            secret = token_secret(request)
            if secret is not None:
                secret_id = str(self._docker().secrets.create(**secret).id)
            options = service_options(request, self._config, sorted(set(hosts.values())), secret_id)
            service = self._docker().services.create(image, **options)
        except ENGINE_ERRORS as exc:
            if secret_id is not None:
                with contextlib.suppress(DeskrigError):  # the engine's error is the one to tell
                    self._remove_secrets(request.session_id)
            if isinstance(exc, APIError) and exc.is_client_error():
                raise DeskrigError(
                    ErrorCode.RIG_FAILED,
                    f"the swarm refused to create the rig's service: {exc.explanation or exc}",
                    details={"image": request.image},
                ) from exc
            raise engine_down(exc) from exc
        return str(service.id), hosts

    async def _placed(self, pending: RigHandle, image: str, hosts: dict[str, str]) -> RigHandle:
        """The handle once the cluster runs the rig's task (its node and port are known), polled
        every :data:`PLACEMENT_POLL` with one task listing (see :class:`Placement`)."""
        placement = Placement(pending.id, hosts)
        probe = await poll(
            lambda: anyio.to_thread.run_sync(self._place, placement),
            self._config.ready_timeout,
            PLACEMENT_POLL,
        )
        if probe.done:
            log.info("%s runs at %s (%s)", pending.name, placement.endpoint, probe.observed)
            return RigHandle(
                id=pending.id, name=pending.name, endpoint=placement.endpoint, labels=pending.labels
            )
        if probe.fatal:
            logs = (await self.logs(pending, 30)).splitlines()
            raise DeskrigError(
                ErrorCode.RIG_FAILED,
                f"rig service {pending.name} did not start: its task {probe.observed}",
                details={"image": image, "exit_code": placement.state.exit_code, "logs": logs},
            )
        raise DeskrigError(
            ErrorCode.RIG_FAILED,
            f"rig service {pending.name} not placed within {self._config.ready_timeout:g} s: "
            f"{probe.observed}",
            details={"image": image, "observed": probe.observed},
            remediation="Check `docker service ps` for why: no node has the resources the "
            "rig reserves, or none matches the placement constraints.",
        )

    def _place(self, placement: Placement) -> Probe:
        """One look at the service's task (:meth:`Placement.look`); the nodes are listed again only
        when the task is on one not listed yet, and the service asked for a new task when the
        engine could not publish the old one's port."""
        try:
            task = newest_task(self._tasks(placement.service_id))
            if task is not None and task.get("NodeID") and task["NodeID"] not in placement.hosts:
                placement.hosts = self._node_hosts()
            probe = placement.look(task)
            if placement.wants_new_task:
                log.warning("service %s: %s; asking for a new task", placement.service_id, probe.observed)
                self._docker().services.get(placement.service_id).force_update()
                placement.wants_new_task = False
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        return probe

    async def wait_ready(self, handle: RigHandle, timeout: float) -> None:
        await wait_until_ready(self, handle, timeout)

    def stream_artifacts(self, handle: RigHandle, token: str, dest: Path) -> ArtifactMirror:
        return ArtifactMirror(handle.endpoint, token, dest)

    async def status(self, handle: RigHandle) -> ContainerState:
        return await anyio.to_thread.run_sync(self._status, handle)

    def _status(self, handle: RigHandle) -> ContainerState:
        try:
            tasks = self._tasks(handle.id)
            if not tasks:
                self._docker().api.inspect_service(handle.id)
        except NotFound:
            return ContainerState(running=False, detail="gone (removed from outside)")
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        return task_state(newest_task(tasks))

    async def logs(self, handle: RigHandle, tail: int | None = None) -> str:
        return await anyio.to_thread.run_sync(self._logs, handle, tail)

    def _logs(self, handle: RigHandle, tail: int | None) -> str:
        try:
            chunks = self._docker().api.service_logs(
                handle.id, stdout=True, stderr=True, tail="all" if tail is None else tail
            )
            raw = b"".join(chunks)
        except NotFound:
            return ""
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        return raw.decode("utf-8", "replace")

    async def destroy(self, handle: RigHandle) -> None:
        """Remove the service, its secret and its task's container. On this engine's node the
        container is removed at once, as the Docker runtime removes its rigs; on another node the
        swarm stops it, a second or two after the service goes, and this waits for that: until
        then the rig still runs, and its session's slot would be free for the next rig beside it."""
        elsewhere = await anyio.to_thread.run_sync(self._destroy, handle)
        if elsewhere:
            probe = await poll(
                lambda: anyio.to_thread.run_sync(self._tasks_stopped, handle, elsewhere),
                TASKS_STOPPED_TIMEOUT,
                PLACEMENT_POLL,
            )
            if not probe.done:
                log.warning(
                    "%s removed, its task not stopped after %g s: %s",
                    handle.name,
                    TASKS_STOPPED_TIMEOUT,
                    probe.observed,
                )

    def _destroy(self, handle: RigHandle) -> set[str]:
        """Remove what ``destroy`` says; the ids of the service's tasks that other nodes still run."""
        client = self._docker()
        try:
            tasks = self._tasks(handle.id)
            client.api.remove_service(handle.id)
        except NotFound:
            tasks = []
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        elsewhere = set()
        for task in tasks:
            if not task_state(task).running:
                continue
            container = task.get("Status", {}).get("ContainerStatus", {}).get("ContainerID")
            if container and task.get("NodeID") == self._own_node():
                self._remove_container(container)
            else:
                elsewhere.add(str(task.get("ID")))
        session_id = handle.labels.get(LABEL_SESSION)
        if session_id:
            self._remove_secrets(session_id)
        return elsewhere

    def _remove_container(self, container: str) -> None:
        """A task's container on this engine, killed and removed (the swarm, whose service is
        gone, then marks its task ended)."""
        try:
            self._docker().api.remove_container(container, force=True)
        except NotFound:
            pass
        except APIError as exc:
            if exc.status_code != 409:  # removal already in progress
                raise engine_down(exc) from exc
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc

    def _tasks_stopped(self, handle: RigHandle, task_ids: set[str]) -> Probe:
        """Whether the removed service's tasks ``task_ids`` have ended (their containers stopped)
        or are gone. A removed service's tasks are found by name, not by service."""
        try:
            tasks = self._docker().api.tasks(filters={"name": handle.name})
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        left = [
            task["Status"].get("State", "unknown")
            for task in tasks
            if task.get("ID") in task_ids and task_state(task).running
        ]
        return Probe(done=not left, observed=f"tasks {', '.join(left)}" if left else "tasks ended")

    def _remove_secrets(self, session_id: str) -> None:
        """The session's token secret, once no service uses it."""
        try:
            for secret in self._docker().api.secrets(filters=label_filter({LABEL_SESSION: session_id})):
                self._docker().api.remove_secret(secret["ID"])
        except NotFound:
            return
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc

    async def list_by_label(self, labels: dict[str, str]) -> list[RigHandle]:
        return await anyio.to_thread.run_sync(self._list_by_label, labels)

    def _list_by_label(self, labels: dict[str, str]) -> list[RigHandle]:
        # Three calls whatever the number of rigs: the services, every running task, the nodes.
        filters = label_filter(labels)
        try:
            services = self._docker().api.services(filters=filters)
            running = self._docker().api.tasks(filters={"desired-state": "running"}) if services else []
            hosts = self._node_hosts() if services else {}
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        tasks = {task.get("ServiceID"): task for task in running}
        rigs = [
            RigHandle(
                id=service["ID"],
                name=service["Spec"]["Name"],
                endpoint=task_endpoint(tasks[service["ID"]], hosts) if service["ID"] in tasks else "",
                labels=dict(service["Spec"].get("Labels") or {}),
            )
            for service in services
        ]
        return rigs

    async def list_leftovers(self, labels: dict[str, str]) -> list[Leftover]:
        """Token secrets carrying ``labels`` left without their service (see the module docstring);
        the runtime's :meth:`destroy` of their handle removes them."""
        return await anyio.to_thread.run_sync(self._list_leftovers, labels)

    def _list_leftovers(self, labels: dict[str, str]) -> list[Leftover]:
        filters = label_filter(labels)
        try:  # before the services: a secret made after this listing is not judged now
            secrets = self._docker().api.secrets(filters=filters)
            services = self._docker().api.services() if secrets else []
        except ENGINE_ERRORS as exc:
            raise engine_down(exc) from exc
        return secrets_without_service(secrets, services)

    async def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
