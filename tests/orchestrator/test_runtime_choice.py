"""The runtime choice (table, flags, variable, plugin option), capacity from a cluster's nodes, and
the swarm runtime's service options and task states, without an engine (test_swarm.py and
test_runtime_contract.py run them on a real single-node swarm)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import get_args

import anyio
import pytest
from pydantic import ValidationError
from tests.orchestrator.helpers import BACKEND_TESTS, eventually, labels_of, run_user_tests

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.memory_runtime import MemoryRuntime
from deskrig.orchestrator.models import OrchestratorConfig, RuntimeName, SessionSpec, SessionState
from deskrig.orchestrator.runtime import RigRequest
from deskrig.orchestrator.runtimes import RUNTIMES, make_runtime
from deskrig.orchestrator.swarm_backend import (
    SWARM_RECORD_DIR,
    TOKENS_FILE,
    active_nodes,
    service_options,
    task_state,
    token_secret,
)


def test_every_runtime_name_has_a_line_in_the_table() -> None:
    assert set(RUNTIMES) == set(get_args(RuntimeName)) == {"docker", "swarm", "kubernetes"}
    assert OrchestratorConfig().runtime == "docker"


def test_kubernetes_without_a_cluster_is_a_structured_error(
    config: OrchestratorConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    runtime = make_runtime(config.model_copy(update={"runtime": "kubernetes"}))  # nothing reached yet
    with pytest.raises(DeskrigError) as raised:
        anyio.run(runtime.list_by_label, {})
    assert raised.value.code is ErrorCode.RUNTIME_UNAVAILABLE
    assert raised.value.message.startswith("no Kubernetes configuration")


def test_placement_preferences_must_be_spreads() -> None:
    assert OrchestratorConfig(placement_preferences=["spread=node.labels.zone"]).placement_preferences
    with pytest.raises(ValidationError, match="want spread=LABEL"):
        OrchestratorConfig(placement_preferences=["binpack=node.id"])


def deskrig(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deskrig.cli", *args],
        env={**os.environ, "DESKRIG_STATE_DIR": str(tmp_path / "state"), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_cli_says_which_runtimes_exist(tmp_path: Path) -> None:
    bad_variable = deskrig(tmp_path, "session", "start", DESKRIG_RUNTIME="podman")
    assert bad_variable.returncode == 2
    assert (
        "$DESKRIG_RUNTIME='podman' is not valid: want one of docker, swarm, kubernetes" in bad_variable.stderr
    )
    bad_flag = deskrig(tmp_path, "orchestrator", "serve", "--runtime", "podman")
    assert bad_flag.returncode == 2 and "invalid choice: 'podman'" in bad_flag.stderr

    kubernetes = deskrig(
        tmp_path, "orchestrator", "serve", DESKRIG_RUNTIME="kubernetes", KUBECONFIG=str(tmp_path / "absent")
    )
    assert kubernetes.returncode == 1
    assert "deskrig: RUNTIME_UNAVAILABLE: no Kubernetes configuration" in kubernetes.stderr
    assert not (tmp_path / "state" / "orchestrator.json").exists()


@pytest.mark.parametrize("given_by", ["flag", "ini"])
def test_the_plugins_runtime_option_reaches_the_orchestrator(
    tmp_path: Path, given_by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))  # this machine has no cluster
    if given_by == "ini":
        (tmp_path / "pytest.ini").write_text("[pytest]\ndeskrig_runtime = kubernetes\n")
        args: list[str] = []
    else:
        args = ["--deskrig-runtime", "kubernetes"]
    run = run_user_tests(tmp_path, "def test_rig(deskrig_rig):\n    pass\n", *args, timeout=60)
    assert "runtime=kubernetes" in run.stdout
    assert "RUNTIME_UNAVAILABLE" in run.stdout and "no Kubernetes configuration" in run.stdout, run.stdout


def test_a_bad_plugin_runtime_is_a_usage_error(tmp_path: Path) -> None:
    run = run_user_tests(tmp_path, BACKEND_TESTS, "--deskrig-runtime", "podman", timeout=60)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--deskrig-runtime wants one of docker, swarm, kubernetes, got 'podman'" in run.stderr


@pytest.mark.anyio
async def test_capacity_is_per_node_times_the_nodes_and_follows_them(config: OrchestratorConfig) -> None:
    runtime = MemoryRuntime()
    runtime.nodes = 2
    fast = config.model_copy(update={"max_sessions": 1, "reap_interval": 0.1, "watch_interval": 0.05})
    spec = SessionSpec(image="deskrig/rig:memory", record=False)
    async with Orchestrator(fast, runtime) as orch:
        assert orch.capacity == 2
        first, second = await orch.start(spec), await orch.start(spec)
        third = await orch.start(spec, wait=False)
        assert orch.get(third.id).queue_position == 1
        assert (first.state, second.state) == (SessionState.READY, SessionState.READY)

        runtime.nodes = 3  # a node joins: its slot goes to the line
        await eventually("the third ready", lambda: orch.get(third.id).state is SessionState.READY, 5.0)
        assert orch.capacity == 3


def request(**env: str) -> RigRequest:
    return RigRequest(
        "s1",
        "deskrig/rig:latest",
        ["xkbvleds", "-geometry", "+10+10"],
        {
            "DESKRIG_TOKEN": "t",
            "DESKRIG_RECORD": "/artifacts",
            "DESKRIG_ALLOWED_HOSTS": "127.0.0.1,localhost",
            **env,
        },
        labels_of("o1", "s1"),
    )


def test_a_swarm_service_runs_the_rig_with_the_app_as_its_arguments(config: OrchestratorConfig) -> None:
    placed = config.model_copy(
        update={
            "placement_constraints": ["node.role==worker"],
            "placement_preferences": ["spread=node.labels.zone"],
        }
    )
    options = service_options(request(), placed, ["10.0.0.2", "127.0.0.1"])
    assert options["args"] == ["xkbvleds", "-geometry", "+10+10"] and "command" not in options
    env = dict(item.split("=", 1) for item in options["env"])
    assert env["DESKRIG_RECORD"] == SWARM_RECORD_DIR and env["HOME"] == "/tmp"
    assert env["DESKRIG_ALLOWED_DIRS"] == SWARM_RECORD_DIR
    assert env["DESKRIG_ALLOWED_HOSTS"] == "127.0.0.1,localhost,10.0.0.2"
    assert options["constraints"] == ["node.role==worker"]
    assert options["preferences"] == [("spread", "node.labels.zone")]
    assert options["labels"]["io.deskrig.session"] == "s1"


def test_a_swarm_rigs_token_is_its_tokens_file_not_a_variable(config: OrchestratorConfig) -> None:
    secret = token_secret(request())
    assert (
        secret is not None and secret["data"] == b"default=t\n" and secret["labels"] == labels_of("o1", "s1")
    )
    options = service_options(request(), config, [], secret_id="sec1")
    env = dict(item.split("=", 1) for item in options["env"])
    assert "DESKRIG_TOKEN" not in env and env["DESKRIG_TOKENS_FILE"] == TOKENS_FILE
    (reference,) = options["secrets"]
    assert reference["SecretID"] == "sec1"
    assert reference["File"] == {"Name": "deskrig-tokens", "UID": "1000", "GID": "1000", "Mode": 0o400}
    assert token_secret(request(DESKRIG_TOKEN="")) is None


def test_a_swarm_rig_not_recording_stays_so(config: OrchestratorConfig) -> None:
    options = service_options(request(DESKRIG_RECORD=""), config, [])
    assert "DESKRIG_RECORD=" in options["env"]


def test_task_states_read_as_the_core_reads_a_container() -> None:
    def task(state: str, **status: object) -> dict[str, object]:
        return {"Status": {"State": state, **status}}

    assert task_state(None).running
    assert task_state(task("starting")).detail == "task starting"
    assert task_state(task("running")).detail == "running"
    failed = task_state(task("failed", ContainerStatus={"ExitCode": 137}, Err="task: non-zero exit (137)"))
    assert (failed.running, failed.detail, failed.exit_code) == (False, "exited with code 137", 137)
    rejected = task_state(task("rejected", Err="No such image: nope"))
    assert rejected.detail == "rejected by the cluster: No such image: nope"
    assert task_state(task("orphaned")).detail == "lost with its node"


def test_only_ready_active_nodes_take_rigs() -> None:
    nodes = [
        {"Status": {"State": "ready"}, "Spec": {"Availability": "active"}},
        {"Status": {"State": "ready"}, "Spec": {"Availability": "drain"}},
        {"Status": {"State": "down"}, "Spec": {"Availability": "active"}},
    ]
    assert len(active_nodes(nodes)) == 1
