"""The Kubernetes runtime without a cluster: every rendered object validated against the Kubernetes
1.37 schemas (kubernetes-validate, strict: no unknown fields), and the runtime's logic over the
in-memory CoreV1Api stand-in (deskrig.orchestrator.kubernetes_fake), whose pods answer as rigs over
real HTTP. The same runtime against a real cluster: test_kubernetes_cluster.py (needs KUBECONFIG).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import kubernetes_validate
import pytest
import yaml
from tests.orchestrator.apiserver import serving, write_kubeconfig
from tests.orchestrator.helpers import deskrig, eventually, labels_of, validate

from deskrig.errors import ConfigError, DeskrigError, ErrorCode
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.docker_backend import hardening
from deskrig.orchestrator.kubernetes_fake import FakeCoreV1Api
from deskrig.orchestrator.kubernetes_objects import (
    NODE_PORT_RULES,
    RUNTIME_RULES,
    Endpoint,
    RigPodSettings,
    manifests,
    owned_by,
    rig_pod,
    rig_service,
    token_secret,
)
from deskrig.orchestrator.kubernetes_runtime import METADATA_ONLY, KubernetesRuntime, kubernetes_runtime
from deskrig.orchestrator.models import OrchestratorConfig, SessionSpec, SessionState
from deskrig.orchestrator.reaper import EXPIRY_GRACE, LEFTOVER_GRACE, Reaper
from deskrig.orchestrator.runtime import LABEL_LEASE, RigRequest, managed_labels

pytestmark = pytest.mark.anyio

NAMESPACE = "rigs"
TOKEN = "s3cret-token-value"
ORCHESTRATOR_POD = {
    "metadata": {"name": "deskrig-orchestrator-7d9f-x2", "uid": "0f4c3a5e-1d2b-4c6d-9e8f-0a1b2c3d4e5f"}
}


def request(
    session: str = "sabc123", *, expires_at: float | None = None, command: list[str] | None = None
) -> RigRequest:
    env = {
        "DESKRIG_TOKEN": TOKEN,
        "DESKRIG_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DESKRIG_RECORD": "/artifacts",
        "GREETING": "costs $(HOME)",
    }
    labels = labels_of("o1", session, lease=Path("/state/leases/o1.lock"), expires_at=expires_at)
    return RigRequest(session, "deskrig/rig:latest", command, env, labels)


@pytest.fixture
def fake() -> Iterator[FakeCoreV1Api]:
    api = FakeCoreV1Api(validate=validate)
    yield api
    api.close()


@pytest.fixture(params=["pod-ip", "node-port"])
def endpoint(request: pytest.FixtureRequest) -> Endpoint:
    mode: Endpoint = request.param
    return mode


@pytest.fixture
async def runtime(
    config: OrchestratorConfig, fake: FakeCoreV1Api, endpoint: Endpoint
) -> AsyncIterator[KubernetesRuntime]:
    rt = kubernetes_runtime(config, api=fake, namespace=NAMESPACE, endpoint=endpoint, start_timeout=10)
    yield rt
    await rt.close()


# --- rendered objects, offline -------------------------------------------------------------------


def rendered(config: OrchestratorConfig) -> list[tuple[str, dict[str, Any]]]:
    settings = RigPodSettings(namespace=NAMESPACE)
    with_deadline = request(expires_at=time.time() + 600, command=["gtk3-widget-factory", "--x"])
    objects = [
        ("pod", rig_pod(request(), config, settings)),
        (
            "pod-with-deadline-and-app",
            rig_pod(with_deadline, config.model_copy(update={"registry": "reg:5000"}), settings),
        ),
        ("pod-owned-by-the-orchestrator", rig_pod(request(), config, RigPodSettings(owner=ORCHESTRATOR_POD))),
        ("secret", token_secret(request(), NAMESPACE)),
        ("service", rig_service(request(), NAMESPACE)),
    ]
    for obj in manifests("ghcr.io/team/deskrig:1", "ci-rigs", registry="reg.example:5000"):
        objects.append((f"manifest-{obj['kind']}", obj))
    return objects


def test_every_rendered_object_is_valid_against_the_kubernetes_schemas(config: OrchestratorConfig) -> None:
    objects = rendered(config)
    assert {kind for kind, _ in objects} >= {
        "manifest-Namespace",
        "manifest-ServiceAccount",
        "manifest-Role",
        "manifest-RoleBinding",
        "manifest-Deployment",
        "manifest-Service",
    }
    for _, obj in objects:
        validate(obj)


def test_the_validator_refuses_what_the_cluster_would() -> None:
    """The check has teeth: a misspelt field and a wrong type both fail."""
    pod = rig_pod(request(), OrchestratorConfig(), RigPodSettings())
    pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesytem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pod)
    pod = rig_pod(request(), OrchestratorConfig(), RigPodSettings())
    pod["spec"]["activeDeadlineSeconds"] = "soon"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pod)


def test_the_pod_is_hardened_like_the_docker_rig(config: OrchestratorConfig) -> None:
    now = time.time()
    pod = rig_pod(request(expires_at=now + 600), config, RigPodSettings(namespace=NAMESPACE), now=now)
    spec = pod["spec"]
    (container,) = spec["containers"]
    security = container["securityContext"]
    assert security == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["automountServiceAccountToken"] is False
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == 600 + EXPIRY_GRACE
    # The same writable dirs as the Docker rig's tmpfs, in memory, of the same sizes.
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v["emptyDir"] for v in spec["volumes"]}
    assert sorted(mounts.values()) == sorted(hardening(config)["tmpfs"])
    assert {mounts[name]: volume["sizeLimit"] for name, volume in volumes.items()} == {
        "/tmp": "256Mi",
        "/run/user/1000": "64Mi",
        "/home/rig": "256Mi",
        "/artifacts": "1Gi",
    }
    assert all(volume["medium"] == "Memory" for volume in volumes.values())
    assert container["resources"]["limits"]["memory"] == "2Gi"
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    probe = container["readinessProbe"]["httpGet"]
    assert (probe["path"], probe["port"]) == ("/readyz", 8765)
    # The token only by reference; the rest of the environment as given ($( escaped).
    assert TOKEN not in json.dumps(pod)
    env = {var["name"]: var for var in container["env"]}
    assert env["DESKRIG_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "deskrig-sabc123-token"
    assert env["GREETING"]["value"] == "costs $$(HOME)"
    assert "args" not in container  # no app given: the image's CMD


def test_labels_are_the_projects_labels(config: OrchestratorConfig) -> None:
    """Every rig label is an annotation; the ones Kubernetes accepts as label values are labels too
    (the lease path is not one)."""
    rig = request()
    pod = rig_pod(rig, config, RigPodSettings())
    meta = pod["metadata"]
    assert meta["annotations"] == rig.labels
    assert LABEL_LEASE not in meta["labels"]
    assert meta["labels"] == {k: v for k, v in rig.labels.items() if k != LABEL_LEASE}


def test_the_registry_prefix_names_the_pods_image(config: OrchestratorConfig) -> None:
    registered = config.model_copy(update={"registry": "localhost:5000"})
    pod = rig_pod(request(), registered, RigPodSettings())
    assert pod["spec"]["containers"][0]["image"] == "localhost:5000/deskrig/rig:latest"


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(resource, verb) pairs that RBAC ``rules`` allow."""
    return {(r, v) for rule in rules for r in rule["resources"] for v in rule["verbs"]}


def assert_calls_granted(fake: FakeCoreV1Api, endpoint: Endpoint) -> None:
    """Every call the runtime made is one the manifests' Role grants."""
    rules = RUNTIME_RULES + (NODE_PORT_RULES if endpoint == "node-port" else [])
    assert {(resource, verb) for verb, resource in fake.calls} <= granted(rules)


def test_the_role_grants_only_what_the_runtime_uses() -> None:
    (role,) = [obj for obj in manifests("img") if obj["kind"] == "Role"]
    assert role["rules"] == RUNTIME_RULES
    assert ("secrets", "get") not in granted(role["rules"])  # listed by their metadata only


def test_manifests_command_prints_valid_yaml_without_a_yaml_library(tmp_path: Path) -> None:
    no_yaml = tmp_path / "no-yaml"
    no_yaml.mkdir()
    (no_yaml / "yaml.py").write_text('raise ImportError("a plain install has no PyYAML")\n')
    path = os.pathsep.join([str(no_yaml), os.environ.get("PYTHONPATH", "")])
    done = deskrig(
        tmp_path,
        "k8s",
        "manifests",
        "--image",
        "ghcr.io/team/deskrig:1",
        "--namespace",
        "ci",
        PYTHONPATH=path,
    )
    assert done.returncode == 0, done.stderr
    documents = list(yaml.safe_load_all(done.stdout))
    assert documents == manifests("ghcr.io/team/deskrig:1", "ci")
    assert [d["kind"] for d in documents] == [
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
    ]
    for document in documents:
        validate(document)
    assert {d["metadata"].get("namespace", d["metadata"]["name"]) for d in documents} == {"ci"}
    assert "&id" not in done.stdout  # plain YAML, no anchors
    (orchestrator,) = documents[4]["spec"]["template"]["spec"]["containers"]
    # `kubectl exec ... deskrig session start` finds the service through the same variables.
    assert {"DESKRIG_STATE_DIR", "DESKRIG_ARTIFACTS_ROOT"} <= {var["name"] for var in orchestrator["env"]}


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--image", "x", "--namespace", "Bad_NS"], "is not a DNS label"),
        (["--namespace", "ci"], "needs --image"),
        (["--image", "x", "--registry", "http://reg"], "is not HOST or HOST:PORT"),
    ],
    ids=["namespace", "no-image", "registry"],
)
def test_manifests_command_refuses_bad_input(tmp_path: Path, args: list[str], problem: str) -> None:
    done = deskrig(tmp_path, "k8s", "manifests", *args)
    assert done.returncode != 0
    assert done.stdout == ""
    assert problem in done.stderr


# --- the runtime over the stand-in API -----------------------------------------------------------


def left(fake: FakeCoreV1Api) -> dict[str, list[str]]:
    return {kind: sorted(name for _, name in objects) for kind, objects in fake.objects.items() if objects}


async def test_start_ready_endpoint_labels_stop(
    runtime: KubernetesRuntime, fake: FakeCoreV1Api, endpoint: Endpoint
) -> None:
    rig = request()
    handle = await runtime.create(rig)
    pod = fake.pod(handle.name)
    assert handle.name == "deskrig-sabc123"
    assert handle.labels == rig.labels  # read back from the annotations, the lease path too
    ip = pod["status"]["podIP"]
    if endpoint == "pod-ip":
        assert handle.endpoint == f"http://{ip}:8765"
    else:
        (service,) = fake.objects["services"].values()
        assert handle.endpoint == f"http://127.0.0.1:{service['spec']['ports'][0]['nodePort']}"
        assert service["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    secret = fake.objects["secrets"][(NAMESPACE, "deskrig-sabc123-token")]
    assert secret["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    await runtime.wait_ready(handle, timeout=10)
    if endpoint == "pod-ip":  # the rig let the orchestrator in by the pod's IP ($(DESKRIG_POD_IP))
        assert ("GET", "/readyz", f"{ip}:8765") in fake.rig_requests(handle.name)
    assert (await runtime.status(handle)).running
    assert await runtime.list_by_label(managed_labels("sabc123")) == [handle]
    assert await runtime.list_by_label(managed_labels("sother")) == []
    await runtime.destroy(handle)
    assert left(fake) == {}
    assert not (await runtime.status(handle)).running
    await runtime.destroy(handle)  # already gone: not an error
    assert_calls_granted(fake, endpoint)


async def test_ready_waits_for_the_app(runtime: KubernetesRuntime, fake: FakeCoreV1Api) -> None:
    fake.app_ready = False
    handle = await runtime.create(request())
    with pytest.raises(DeskrigError) as raised:
        await runtime.wait_ready(handle, timeout=0.5)
    assert raised.value.code is ErrorCode.RIG_FAILED
    assert "HTTP 503" in raised.value.message
    fake.set_ready(handle.name, True)
    await runtime.wait_ready(handle, timeout=10)


async def test_a_crashed_app_fails_the_pod(runtime: KubernetesRuntime, fake: FakeCoreV1Api) -> None:
    handle = await runtime.create(request())
    fake.pod_logs[handle.name] = ["rig: app exited with code 3"]
    fake.crash(handle.name, exit_code=3)
    state = await runtime.status(handle)
    assert (state.running, state.exit_code) == (False, 3)
    assert "exited with code 3" in state.detail
    assert await runtime.logs(handle, 5) == "rig: app exited with code 3\n"
    fake.crash(handle.name, exit_code=137, reason="OOMKilled")
    assert (await runtime.status(handle)).detail == "killed by the OOM killer (memory limit 2g)"


async def test_the_deadline_ends_the_pod(runtime: KubernetesRuntime, fake: FakeCoreV1Api) -> None:
    handle = await runtime.create(request(expires_at=time.time() + 30))
    assert fake.pod(handle.name)["spec"]["activeDeadlineSeconds"] > 30
    fake.exceed_deadline(handle.name)
    state = await runtime.status(handle)
    assert not state.running
    assert "activeDeadlineSeconds" in state.detail and "Failed" in state.detail


async def test_reaper_removes_orphans_by_label(runtime: KubernetesRuntime, fake: FakeCoreV1Api) -> None:
    """A rig of a dead orchestrator on this host (its lease file gone) and an expired one go; a
    live one of this orchestrator stays."""
    mine = await runtime.create(
        RigRequest("slive", "img", None, {"DESKRIG_TOKEN": "t"}, labels_of("o1", "slive"))
    )
    orphan = await runtime.create(
        RigRequest("sdead", "img", None, {"DESKRIG_TOKEN": "t"}, labels_of("o2", "sdead"))
    )
    expired = await runtime.create(
        RigRequest(
            "sold", "img", None, {}, labels_of("o3", "sold", expires_at=time.time() - EXPIRY_GRACE - 5)
        )
    )
    reaper = Reaper(runtime, "o1", lambda: {"slive"})
    reaped = {r.handle.name: r.reason for r in await reaper.sweep()}
    assert set(reaped) == {orphan.name, expired.name}
    assert left(fake)["pods"] == [mine.name]


def leave_token_secret(fake: FakeCoreV1Api, rig: RigRequest, *, age: float = 0.0) -> str:
    """The rig's token Secret as the runtime creates it, without its Pod (the create died there)."""
    secret = fake.create_namespaced_secret(NAMESPACE, token_secret(rig, NAMESPACE))
    fake.backdate("secrets", secret.metadata.name, age)
    return str(secret.metadata.name)


def rig_request(owner: str, session: str, **labels: Any) -> RigRequest:
    return RigRequest(session, "img", None, {"DESKRIG_TOKEN": "t"}, labels_of(owner, session, **labels))


async def test_the_reaper_removes_the_token_secret_of_a_create_that_died(
    runtime: KubernetesRuntime, fake: FakeCoreV1Api, endpoint: Endpoint
) -> None:
    """The API went away between the Secret and the Pod, so the create could not remove its
    Secret either: nothing owns it. The reaper takes it once it is older than a create in flight
    can be, whoever made it; a younger one, one its Pod still has to take over, a live rig's, one
    that names an owner and anything without deskrig's labels stay."""
    elsewhere = {"host": "another-host"}  # whose orchestrator's lease no reaper here can judge
    fake.refuse("create", "pods", 500)
    fake.refuse("delete", "secrets", 500)
    with pytest.raises(DeskrigError):
        await runtime.create(rig_request("o2", "sdied", **elsewhere))
    fake.refusals.clear()
    (died,) = left(fake)["secrets"]
    fake.backdate("secrets", died, LEFTOVER_GRACE + 5)
    young = leave_token_secret(fake, rig_request("o2", "syoung", **elsewhere), age=LEFTOVER_GRACE - 60)
    # Between the Pod's create and the Secret's hand-over: the Pod exists, so the Secret is its.
    handing = rig_request("o2", "shanding", **elsewhere)
    handing_secret = leave_token_secret(fake, handing, age=LEFTOVER_GRACE + 5)
    fake.create_namespaced_pod(NAMESPACE, rig_pod(handing, OrchestratorConfig(), RigPodSettings(NAMESPACE)))
    live = await runtime.create(rig_request("o1", "slive"))
    fake.backdate("secrets", f"{live.name}-token", LEFTOVER_GRACE + 5)
    # Owned by another object: the garbage collector's, which removes it with its owner.
    owned = leave_token_secret(fake, rig_request("o2", "sowned", **elsewhere), age=LEFTOVER_GRACE + 5)
    owner = {"metadata": {"ownerReferences": owned_by(fake.pod(live.name))}}
    fake.patch_namespaced_secret(owned, NAMESPACE, owner)
    unlabelled = token_secret(rig_request("o2", "sforeign", **elsewhere), NAMESPACE)
    unlabelled["metadata"]["labels"] = {"app": "not-deskrig"}
    fake.create_namespaced_secret(NAMESPACE, unlabelled)
    fake.backdate("secrets", unlabelled["metadata"]["name"], LEFTOVER_GRACE + 5)
    fake.calls.clear()

    reaped = await Reaper(runtime, "o1", lambda: {"slive"}).sweep()
    assert [(r.handle.name, r.handle.session_id) for r in reaped] == [("deskrig-sdied", "sdied")]
    assert reaped[0].reason.startswith("Secret deskrig-sdied-token, left without its rig: ")
    assert "older than a create in flight can be" in reaped[0].reason
    assert left(fake)["secrets"] == sorted(
        [young, handing_secret, f"{live.name}-token", owned, "deskrig-sforeign-token"]
    )
    assert (await runtime.status(live)).running
    assert_calls_granted(fake, endpoint)


async def test_a_leftover_is_judged_by_its_labels_as_a_rig_is(
    runtime: KubernetesRuntime, fake: FakeCoreV1Api
) -> None:
    """Before its grace is over: a dead orchestrator's on this host (its lease gone) goes at once;
    a create this orchestrator still has in flight stays."""
    leave_token_secret(fake, rig_request("o2", "sdead"))
    in_flight = leave_token_secret(fake, rig_request("o1", "sstarting"))
    reaped = await Reaper(runtime, "o1", lambda: {"sstarting"}).sweep()
    assert [r.handle.name for r in reaped] == ["deskrig-sdead"]
    assert "orchestrator o2 is gone" in reaped[0].reason
    assert left(fake)["secrets"] == [in_flight]


async def test_without_the_right_to_list_secrets_the_reaper_still_reaps_rigs(
    runtime: KubernetesRuntime, fake: FakeCoreV1Api, caplog: pytest.LogCaptureFixture
) -> None:
    """An orchestrator under an older Role (no list on secrets) keeps working, saying what it
    cannot do."""
    orphan = await runtime.create(rig_request("o2", "sorphan"))
    leftover = leave_token_secret(
        fake, rig_request("o2", "sdead", host="another-host"), age=LEFTOVER_GRACE + 5
    )
    fake.refuse("list", "secrets", 403)
    reaped = await Reaper(runtime, "o1", set).sweep()
    assert [r.handle.name for r in reaped] == [orphan.name]
    assert left(fake) == {"secrets": [leftover]}
    await Reaper(runtime, "o1", set).sweep()
    assert caplog.text.count("leftover token Secrets are not reaped") == 1  # said once


#: An orchestrator's create in a process of its own, the cluster named by ``$KUBECONFIG``.
CREATE_IN_A_PROCESS = """
import json, sys, anyio
from deskrig.orchestrator.kubernetes_runtime import kubernetes_runtime
from deskrig.orchestrator.models import OrchestratorConfig
from deskrig.orchestrator.runtime import RigRequest
session, labels = sys.argv[1], json.loads(sys.argv[2])
runtime = kubernetes_runtime(OrchestratorConfig(), endpoint="pod-ip")
anyio.run(runtime.create, RigRequest(session, "img", None, {"DESKRIG_TOKEN": "t"}, labels))
"""


async def test_an_orchestrator_killed_between_secret_and_pod_leaves_nothing_after_a_sweep(
    config: OrchestratorConfig, fake: FakeCoreV1Api, tmp_path: Path
) -> None:
    """The crash for real: an orchestrator process, through the official client over HTTP, is
    SIGKILLed as its Pod's create arrives (which the "API server" then drops). Its Secret is
    left, owned by nothing; the next orchestrator on this host removes it as it starts (its
    owner's lease is gone), listing Secrets by their metadata only."""
    from kubernetes import client

    with serving(fake) as server:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url, NAMESPACE)
        labels = labels_of("odead", "skilled", lease=tmp_path / "state" / "leases" / "odead.lock")
        orchestrator = subprocess.Popen(
            [sys.executable, "-c", CREATE_IN_A_PROCESS, "skilled", json.dumps(labels)],
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        )

        def killed() -> None:
            orchestrator.kill()
            orchestrator.wait()
            raise ConnectionAbortedError("its orchestrator died before the Pod's create arrived")

        fake.on_call("create", "pods", killed)
        try:
            assert await anyio.to_thread.run_sync(orchestrator.wait, 60) == -signal.SIGKILL
        finally:
            orchestrator.kill()
        assert left(fake) == {"secrets": ["deskrig-skilled-token"]}
        configuration = client.Configuration()
        configuration.host = server.url
        api = client.CoreV1Api(client.ApiClient(configuration))
        runtime = KubernetesRuntime(config, api=api, namespace=NAMESPACE, endpoint="pod-ip")
        async with Orchestrator(config, runtime):  # its start-up sweep
            assert left(fake) == {}
    secret_lists = [
        accept
        for (method, path, _, _), accept in zip(server.requests, server.accepts, strict=True)
        if method == "GET" and path.endswith("/secrets")
    ]
    assert secret_lists == [METADATA_ONLY]


async def test_a_pod_that_cannot_start_is_removed_with_its_objects(config: OrchestratorConfig) -> None:
    fake = FakeCoreV1Api(start_pods=False, validate=validate)
    runtime = KubernetesRuntime(config, api=fake, namespace=NAMESPACE, endpoint="node-port", start_timeout=10)
    try:
        async with anyio.create_task_group() as tg:

            async def pull_fails() -> None:
                await eventually("the pod", lambda: fake.objects["pods"])
                fake.wait("deskrig-sabc123", "ImagePullBackOff", 'Back-off pulling image "nope"')

            tg.start_soon(pull_fails)
            with pytest.raises(DeskrigError) as raised:
                await runtime.create(request())
        assert raised.value.code is ErrorCode.RIG_FAILED
        assert "ImagePullBackOff" in raised.value.message
        assert left(fake) == {}
    finally:
        await runtime.close()
        fake.close()


async def test_an_unschedulable_pod_times_out_saying_why(config: OrchestratorConfig) -> None:
    fake = FakeCoreV1Api(start_pods=False)
    runtime = KubernetesRuntime(config, api=fake, namespace=NAMESPACE, endpoint="pod-ip", start_timeout=1.5)
    try:
        async with anyio.create_task_group() as tg:

            async def no_room() -> None:
                await eventually("the pod", lambda: fake.objects["pods"])
                fake.unschedulable("deskrig-sabc123")

            tg.start_soon(no_room)
            with pytest.raises(DeskrigError) as raised:
                await runtime.create(request())
        assert "Insufficient memory" in raised.value.message
        assert left(fake) == {}
    finally:
        await runtime.close()
        fake.close()


async def test_a_pod_in_its_grace_period_counts_as_gone(config: OrchestratorConfig) -> None:
    """Deleting a pod lets its rig tear down for a while; the reaper and status see it gone at once."""
    fake = FakeCoreV1Api(graceful=True)
    runtime = KubernetesRuntime(config, api=fake, namespace=NAMESPACE, endpoint="pod-ip")
    try:
        handle = await runtime.create(request())
        await runtime.destroy(handle)
        assert fake.objects["pods"]  # still terminating
        assert await runtime.list_by_label(managed_labels()) == []
        assert (await runtime.status(handle)).detail == "being deleted"
        fake.finish_deletion(handle.name)
        assert left(fake) == {}
    finally:
        await runtime.close()
        fake.close()


@pytest.mark.parametrize("session", ["Bad_Id", "s" * 70, ""])
async def test_bad_input_changes_nothing(
    runtime: KubernetesRuntime, fake: FakeCoreV1Api, session: str
) -> None:
    with pytest.raises(DeskrigError) as raised:
        await runtime.create(RigRequest(session, "img", None, {}, labels_of("o1", "x")))
    assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    assert fake.calls == []


async def test_a_taken_name_is_refused_and_the_first_rig_stays(
    runtime: KubernetesRuntime, fake: FakeCoreV1Api
) -> None:
    first = await runtime.create(request())
    with pytest.raises(DeskrigError) as raised:
        await runtime.create(request())
    assert raised.value.code is ErrorCode.RIG_FAILED
    assert "409" in raised.value.message
    assert (await runtime.status(first)).running


async def test_a_taken_pod_name_leaves_the_other_pod_alone(
    runtime: KubernetesRuntime, fake: FakeCoreV1Api
) -> None:
    """The pod exists but not its Secret (someone else's pod): the runtime's Secret goes again."""
    other = rig_pod(request(), OrchestratorConfig(), RigPodSettings(namespace=NAMESPACE))
    fake.create_namespaced_pod(NAMESPACE, other)
    with pytest.raises(DeskrigError) as raised:
        await runtime.create(request())
    assert raised.value.code is ErrorCode.RIG_FAILED
    assert left(fake) == {"pods": ["deskrig-sabc123"]}


@pytest.mark.parametrize(
    ("verb", "resource", "status", "code"),
    [
        ("create", "secrets", 403, ErrorCode.RUNTIME_UNAVAILABLE),
        ("create", "pods", 403, ErrorCode.RUNTIME_UNAVAILABLE),
        ("patch", "secrets", 500, ErrorCode.RUNTIME_UNAVAILABLE),
        ("create", "pods", 422, ErrorCode.RIG_FAILED),
    ],
)
async def test_a_refused_call_fails_the_rig_and_leaves_nothing(
    runtime: KubernetesRuntime, fake: FakeCoreV1Api, verb: str, resource: str, status: int, code: ErrorCode
) -> None:
    fake.refuse(verb, resource, status)
    with pytest.raises(DeskrigError) as raised:
        await runtime.create(request())
    assert raised.value.code is code
    if status == 403:
        assert "Role" in (raised.value.remediation or "")
    assert left(fake) == {}


async def test_the_orchestrators_pod_owns_its_rigs(
    config: OrchestratorConfig, fake: FakeCoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the cluster, deleting the orchestrator's pod deletes its rigs and their Secrets: a new
    orchestrator pod could neither adopt nor reap them (its journal and lease were the old pod's)."""
    own = fake.create_namespaced_pod(
        NAMESPACE,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "deskrig-orchestrator-1"},
            "spec": {"containers": [{"name": "o", "image": "i"}]},
        },
    )
    monkeypatch.setenv("DESKRIG_POD_NAME", own.metadata.name)
    monkeypatch.setenv("DESKRIG_POD_UID", own.metadata.uid)
    runtime = kubernetes_runtime(config, api=fake, namespace=NAMESPACE, endpoint="pod-ip")
    try:
        handle = await runtime.create(request())
        (owner,) = fake.pod(handle.name)["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", own.metadata.name, own.metadata.uid)
        fake.delete_namespaced_pod(own.metadata.name, NAMESPACE)
        assert left(fake) == {}
    finally:
        await runtime.close()


def test_a_bad_namespace_is_refused(config: OrchestratorConfig) -> None:
    with pytest.raises(ConfigError):
        KubernetesRuntime(config, namespace="Not A Namespace")


async def test_a_session_through_the_orchestrator(config: OrchestratorConfig, fake: FakeCoreV1Api) -> None:
    """The session core over the Kubernetes runtime: ready, its MCP URL the pod's, then stopped
    with nothing left in the cluster."""
    runtime = KubernetesRuntime(config, api=fake, namespace=NAMESPACE, endpoint="pod-ip")
    async with Orchestrator(config, runtime) as orchestrator:
        info = await orchestrator.start(
            SessionSpec(image="deskrig/rig:latest", record=True, ready_timeout=10)
        )
        assert info.state is SessionState.READY
        pod = fake.pod(f"deskrig-{info.id}")
        assert info.mcp_url == f"http://{pod['status']['podIP']}:8765/mcp"
        stopped = await orchestrator.stop(info.id)
        assert stopped.state is SessionState.STOPPED, stopped.reason
    assert left(fake) == {}


def test_the_client_is_imported_only_when_used() -> None:
    import subprocess

    code = (
        "import sys, deskrig.orchestrator.core, deskrig.orchestrator.kubernetes_runtime; "
        "print('kubernetes' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("mode", ["pod-ip", "node-port"])
async def test_the_real_client_over_http(
    config: OrchestratorConfig, fake: FakeCoreV1Api, mode: Endpoint
) -> None:
    """The runtime through the official client, over HTTP to the stand-in behind the API's REST
    paths: the client takes the rendered bodies, sends them as the API expects, and the runtime
    reads its answers and errors."""
    from kubernetes import client

    with serving(fake) as server:
        configuration = client.Configuration()
        configuration.host = server.url
        api = client.CoreV1Api(client.ApiClient(configuration))
        runtime = KubernetesRuntime(config, api=api, namespace=NAMESPACE, endpoint=mode)
        try:
            handle = await runtime.create(request())
            await runtime.wait_ready(handle, timeout=10)
            assert handle.labels == request().labels
            assert await runtime.list_by_label(managed_labels("sabc123")) == [handle]
            fake.pod_logs[handle.name] = ["first", "last"]
            assert await runtime.logs(handle, 1) == "last\n"
            fake.crash(handle.name, exit_code=4)
            assert (await runtime.status(handle)).exit_code == 4
            with pytest.raises(DeskrigError) as raised:
                await runtime.create(request())  # the name is taken: 409 from the "server"
            assert raised.value.code is ErrorCode.RIG_FAILED
            await runtime.destroy(handle)
            await runtime.destroy(handle)  # 404s: already gone
            assert not (await runtime.status(handle)).running
        finally:
            await runtime.close()
    assert left(fake) == {}
    # A dict body patched as a merge patch (a JSON patch would be a list of operations).
    patches = [content_type for method, _, _, content_type in server.requests if method == "PATCH"]
    assert patches and all("merge-patch+json" in content_type for content_type in patches)
    assert {path for _, path, _, _ in server.requests} >= {
        f"/api/v1/namespaces/{NAMESPACE}/pods/deskrig-sabc123/log"
    }
