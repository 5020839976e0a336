"""The Kubernetes runtime against a cluster: start, ready, endpoint, labels, stop, reaping orphans
and the token Secrets of creates that died; and, on a real cluster only, what a kubelet does: the
rig's own log, a crashed app's exit code, the pod's deadline, an image that cannot be pulled.

Which cluster: the one ``KUBECONFIG`` names, when it is set. Otherwise (no Kubernetes server can be
installed on the machines this project's CI runs on) the shipped fake API
(``deskrig.orchestrator.kubernetes_fake``) served over real HTTP on a loopback port, which the
official client reaches through a generated kubeconfig, as it would a cluster: the objects'
lifecycle, labels, ownerReferences, the API's answers and errors, graceful pod deletion and the
reaping run against it, every body checked against the Kubernetes schemas. The fake runs no
containers: its pods answer HTTP as a stand-in rig (readiness, the token, the Host check), so
the tests that need a real kubelet run on a real cluster only, and say so when skipped.

On a real cluster the tests run outside it, so rigs are reached through NodePort Services on
their node's IP (``DESKRIG_TEST_K8S_ENDPOINT=pod-ip`` when the test runner runs in the cluster).
The nodes must be able to pull the rig image: ``deskrig images push --registry HOST:PORT`` and
``DESKRIG_REGISTRY=HOST:PORT``, or an image the cluster has (kind: ``kind load docker-image``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from tests.orchestrator.apiserver import serving, write_kubeconfig
from tests.orchestrator.conftest import RIG_IMAGE
from tests.orchestrator.helpers import labels_of, validate

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.kubernetes_fake import FakeCoreV1Api
from deskrig.orchestrator.kubernetes_objects import RigPodSettings, token_secret
from deskrig.orchestrator.kubernetes_runtime import KubernetesRuntime, kubernetes_runtime, load_core_api
from deskrig.orchestrator.models import OrchestratorConfig, SessionSpec, SessionState
from deskrig.orchestrator.reaper import Lease, Reaper
from deskrig.orchestrator.runtime import LABEL_ORCHESTRATOR, LABEL_SESSION, RigRequest, managed_labels

pytestmark = [pytest.mark.anyio]

#: Whether the tests run against a real cluster (else the fake API server).
REAL_CLUSTER = bool(os.environ.get("KUBECONFIG"))
needs_a_kubelet = pytest.mark.skipif(
    not REAL_CLUSTER,
    reason="needs a real kubelet to run the rig's container (set KUBECONFIG to a cluster); the "
    "fake API server these tests use without one runs no containers, and none can be installed here",
)
#: The fake's namespace, as its kubeconfig context names it.
FAKE_NAMESPACE = "rigs"
IMAGE = os.environ.get("DESKRIG_TEST_K8S_IMAGE", RIG_IMAGE)
#: How the tests reach rigs (the fake's pods answer either way), and their namespace (default:
#: the kubeconfig context's).
ENDPOINT = os.environ.get("DESKRIG_TEST_K8S_ENDPOINT", "node-port")
TEST_NAMESPACE = os.environ.get("DESKRIG_TEST_K8S_NAMESPACE") or None
#: Pulling the rig image onto a node the first time takes a while.
START_TIMEOUT = 600.0


@pytest.fixture
def cluster_config(config: OrchestratorConfig) -> OrchestratorConfig:
    return config.model_copy(
        update={"registry": os.environ.get("DESKRIG_REGISTRY") or None, "ready_timeout": 120}
    )


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCoreV1Api | None]:
    """The cluster ``KUBECONFIG`` names (None), else the fake API served over HTTP (yielded, for
    the tests to look inside) with ``KUBECONFIG`` pointing at it. Its deleted pods terminate as a
    real cluster's do: marked, and gone only after their grace period (which never ends here)."""
    if REAL_CLUSTER:
        yield None
        return
    fake = FakeCoreV1Api(graceful=True, validate=validate)
    try:
        with serving(fake) as server:
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url, FAKE_NAMESPACE)
            monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
            yield fake
    finally:
        fake.close()


@pytest.fixture
async def runtime(
    cluster_config: OrchestratorConfig, cluster: FakeCoreV1Api | None
) -> AsyncIterator[KubernetesRuntime]:
    assert ENDPOINT in ("pod-ip", "node-port")
    rt = kubernetes_runtime(
        cluster_config,
        namespace=TEST_NAMESPACE,
        endpoint=ENDPOINT,
        start_timeout=START_TIMEOUT,
    )
    yield rt
    ours = {**managed_labels(), LABEL_ORCHESTRATOR: "k8s-test"}
    leftovers = [leftover.handle for leftover in await rt.list_leftovers(ours)]
    for handle in [*await rt.list_by_label(ours), *leftovers]:  # a failed test's
        await rt.destroy(handle)
    await rt.close()


def rig(
    session: str,
    command: list[str] | None = None,
    expires_at: float | None = None,
    lease: Path | None = None,
) -> RigRequest:
    env = {"DESKRIG_TOKEN": "cluster-test", "DESKRIG_ALLOWED_HOSTS": "127.0.0.1,localhost"}
    labels = labels_of("k8s-test", session, expires_at=expires_at, lease=lease)
    return RigRequest(session, IMAGE, command, env, labels)


def cluster_api() -> tuple[Any, str]:
    """The cluster's CoreV1Api, loaded as the runtime loads it, and the tests' namespace."""
    api, _, context_namespace = load_core_api()
    return api, TEST_NAMESPACE or context_namespace or RigPodSettings().namespace


async def test_a_session_starts_serves_and_stops(
    cluster_config: OrchestratorConfig, runtime: KubernetesRuntime
) -> None:
    """Its Secret (and its NodePort Service) name its Pod as their owner, for the garbage collector."""
    async with Orchestrator(cluster_config, runtime) as orchestrator:
        info = await orchestrator.start(SessionSpec(image=IMAGE))
        assert info.state is SessionState.READY and info.mcp_url and info.token
        (handle,) = await runtime.list_by_label(managed_labels(info.id))
        assert handle.labels[LABEL_SESSION] == info.id
        api, namespace = cluster_api()
        pod = api.read_namespaced_pod(handle.name, namespace)
        owned = [api.read_namespaced_secret(f"{handle.name}-token", namespace)]
        if ENDPOINT == "node-port":
            owned.append(api.read_namespaced_service(handle.name, namespace))
        for obj in owned:
            owners = [(ref.kind, ref.name, ref.uid) for ref in obj.metadata.owner_references]
            assert owners == [("Pod", handle.name, pod.metadata.uid)], obj.metadata.name
        base = info.mcp_url.removesuffix("/mcp")
        async with httpx2.AsyncClient() as http:
            assert (await http.get(f"{base}/readyz")).status_code == 200
            status = await http.get(f"{base}/status", headers={"Authorization": f"Bearer {info.token}"})
            assert status.status_code == 200
            assert (await http.get(f"{base}/status")).status_code == 401
        stopped = await orchestrator.stop(info.id)
        assert stopped.state is SessionState.STOPPED, stopped.reason
    assert await runtime.list_by_label(managed_labels(info.id)) == []


@needs_a_kubelet
@pytest.mark.slow
async def test_the_rig_log_is_the_containers_output(
    cluster_config: OrchestratorConfig, runtime: KubernetesRuntime
) -> None:
    async with Orchestrator(cluster_config, runtime) as orchestrator:
        info = await orchestrator.start(SessionSpec(image=IMAGE))
        await orchestrator.stop(info.id)
    assert "MCP over HTTP" in (Path(info.artifacts_dir) / "rig.log").read_text()


async def test_the_reaper_removes_a_dead_orchestrators_rig(runtime: KubernetesRuntime) -> None:
    handle = await runtime.create(rig("sorphan1"))
    reaped = await Reaper(runtime, "someone-else", set).sweep()
    assert handle.name in {r.handle.name for r in reaped}
    assert await runtime.list_by_label(managed_labels("sorphan1")) == []  # terminating pods are gone


class DiesBeforeThePod:
    """The cluster's API as an orchestrator sees it that dies as it would send its Pod: the Secret
    reaches the cluster, nothing after it does (nor the create's own clean-up)."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def create_namespaced_pod(self, *args: object, **kwargs: object) -> None:
        raise ConnectionAbortedError("the orchestrator died here")

    delete_namespaced_secret = create_namespaced_pod


async def test_the_reaper_removes_the_token_secret_of_a_create_that_died(
    cluster_config: OrchestratorConfig, runtime: KubernetesRuntime, tmp_path: Path
) -> None:
    """A Secret whose Pod never came goes: at once when its orchestrator on this host is dead,
    whoever made it once older than the grace (none here); until then one made elsewhere stays,
    and a live rig's and one without deskrig's labels always do."""
    api, namespace = cluster_api()
    dying = KubernetesRuntime(
        cluster_config, api=DiesBeforeThePod(api), namespace=namespace, endpoint="pod-ip"
    )
    dead_here = labels_of("k8s-test", "sleftover1")
    made_elsewhere = labels_of("k8s-test", "sleftover2", host="another-host")
    unlabelled = token_secret(RigRequest("sforeign1", IMAGE, None, {"DESKRIG_TOKEN": "t"}, {}), namespace)
    with contextlib.ExitStack() as stack:

        @stack.callback
        def remove_unlabelled() -> None:
            with contextlib.suppress(Exception):  # not made, or gone already
                api.delete_namespaced_secret(unlabelled["metadata"]["name"], namespace)

        for labels in (dead_here, made_elsewhere):
            request = RigRequest(labels[LABEL_SESSION], IMAGE, None, {"DESKRIG_TOKEN": "t"}, labels)
            with pytest.raises(DeskrigError):
                await dying.create(request)
        api.create_namespaced_secret(namespace, unlabelled)
        living = Lease(tmp_path, "k8s-test")  # the live rig's orchestrator, on this host
        living.acquire()
        stack.callback(living.release)
        live = await runtime.create(rig("slive1", lease=living.path.resolve()))

        def reaper(**options: float) -> Reaper:
            return Reaper(runtime, "k8s-reaper", set, **options)

        reaped = {r.handle.name for r in await reaper().sweep()}
        assert "deskrig-sleftover1" in reaped and "deskrig-sleftover2" not in reaped
        # Without a grace, once the API server's clock (the creation time's) has moved on.
        with anyio.fail_after(30):
            while "deskrig-sleftover2" not in {r.handle.name for r in await reaper(leftover_grace=0).sweep()}:
                await anyio.sleep(1)
        names = {secret.metadata.name for secret in api.list_namespaced_secret(namespace).items}
        assert not names & {"deskrig-sleftover1-token", "deskrig-sleftover2-token"}
        assert {f"{live.name}-token", unlabelled["metadata"]["name"]} <= names
        assert (await runtime.status(live)).running


@needs_a_kubelet
@pytest.mark.slow
async def test_a_crashed_app_fails_the_pod_with_its_code(runtime: KubernetesRuntime) -> None:
    handle = await runtime.create(rig("scrash1", ["sh", "-c", "sleep 5; exit 3"]))
    with anyio.fail_after(120):
        while (state := await runtime.status(handle)).running:
            await anyio.sleep(1)
    assert state.exit_code == 3, state.detail
    await runtime.destroy(handle)


@needs_a_kubelet
@pytest.mark.slow
async def test_the_pods_deadline_ends_it(runtime: KubernetesRuntime) -> None:
    """activeDeadlineSeconds: the session's deadline plus the owner's grace (about a minute here)."""
    handle = await runtime.create(rig("sdeadline1", expires_at=time.time() + 1))
    with anyio.fail_after(180):
        while (state := await runtime.status(handle)).running:
            await anyio.sleep(2)
    assert "activeDeadlineSeconds" in state.detail, state.detail
    await runtime.destroy(handle)


@needs_a_kubelet
@pytest.mark.slow
async def test_an_image_that_cannot_be_pulled_fails_and_leaves_nothing(runtime: KubernetesRuntime) -> None:
    request = RigRequest(
        "snopull1", "deskrig/no-such-image:never", None, {}, labels_of("k8s-test", "snopull1")
    )
    with pytest.raises(DeskrigError) as raised:
        await runtime.create(request)
    assert raised.value.code is ErrorCode.RIG_FAILED
    assert await runtime.list_by_label(managed_labels("snopull1")) == []
