"""Sessions on real rigs: endpoints and tokens, hardening, live turn folders, stop, a killed rig."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import docker
import httpx
import pytest
from tests.orchestrator.helpers import CuttableProxy, call, clicks, containers, eventually, turn_folders
from tests.server.rigproc import INITIALIZE

from deskrig.errors import ErrorCode
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.mirror import ArtifactMirror
from deskrig.orchestrator.models import OrchestratorConfig, SessionInfo, SessionSpec, SessionState
from deskrig.orchestrator.runtime import LABEL_EXPIRES, LABEL_ORCHESTRATOR, LABEL_SESSION

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def _port(info: SessionInfo) -> int:
    assert info.mcp_url is not None
    return httpx.URL(info.mcp_url).port or 0


async def test_three_concurrent_sessions_get_distinct_endpoints_and_tokens(
    rig_image: str, config: OrchestratorConfig, docker_client: docker.DockerClient
) -> None:
    async with Orchestrator(config) as orchestrator:
        started: list[SessionInfo] = []

        async def start() -> None:
            started.append(await orchestrator.start(SessionSpec(image=rig_image, record=False)))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(start)

        assert len({info.mcp_url for info in started}) == 3
        assert len({info.token for info in started}) == 3
        assert len(containers(docker_client, orchestrator=orchestrator.id)) == 3
        for info in started:
            assert info.state is SessionState.READY
            assert info.mcp_url and info.mcp_url.startswith("http://127.0.0.1:")
            assert info.token
            await call(info.mcp_url, info.token, "list_windows", {})

        async with httpx.AsyncClient() as http:
            for rig in started:
                for other in started:
                    if other is rig:
                        continue
                    refused = await http.post(
                        rig.mcp_url or "",
                        json=INITIALIZE,
                        headers={
                            "Authorization": f"Bearer {other.token}",
                            "Accept": "application/json, text/event-stream",
                        },
                    )
                    assert refused.status_code == 401, refused.text
                anonymous = await http.post(rig.mcp_url or "", json=INITIALIZE)
                assert anonymous.status_code == 401

        # The hardening of the rig-images issue, as the engine sees it.
        attrs = docker_client.containers.get(started[0].container or "").attrs
        host = attrs["HostConfig"]
        assert host["CapDrop"] == ["ALL"]
        assert host["ReadonlyRootfs"] is True
        assert "no-new-privileges:true" in host["SecurityOpt"]
        assert host["Privileged"] is False
        assert host["NetworkMode"] not in ("host",)
        assert host["Memory"] > 0 and host["PidsLimit"] > 0
        assert "/tmp" in host["Tmpfs"]
        assert not any("docker.sock" in mount.get("Source", "") for mount in attrs["Mounts"])
        assert attrs["Config"]["User"] == "1000:1000"
        assert {b["HostIp"] for b in host["PortBindings"]["8765/tcp"]} == {"127.0.0.1"}
        labels = attrs["Config"]["Labels"]
        assert labels[LABEL_ORCHESTRATOR] == orchestrator.id
        assert labels[LABEL_SESSION] == started[0].id
        assert float(labels[LABEL_EXPIRES]) > started[0].created_at

    assert containers(docker_client, orchestrator=orchestrator.id) == []


async def test_click_turns_reach_the_host_while_the_session_runs_and_stop_leaves_no_container(
    rig_image: str, config: OrchestratorConfig, docker_client: docker.DockerClient
) -> None:
    async with Orchestrator(config) as orchestrator:
        info = await orchestrator.start(SessionSpec(image=rig_image, video=True))
        assert info.mcp_url and info.token
        directory = Path(info.artifacts_dir)
        assert directory == config.artifacts_root.resolve() / info.id

        await clicks(info.mcp_url, info.token, [(100, 100), (300, 200), (500, 300)])
        await eventually("three turn folders on the host", lambda: len(turn_folders(directory)) == 3)
        running = orchestrator.get(info.id)
        assert running.state is SessionState.READY
        assert running.mirror.turns == 3 and running.mirror.gaps == []
        assert turn_folders(directory) == ["turn-00001", "turn-00002", "turn-00003"]
        action = json.loads((directory / "turn-00002" / "action.json").read_text())
        assert action["tool"] == "click"
        assert (directory / "turn-00002" / "after.png").read_bytes()[:4] == b"\x89PNG"

        stopped = await orchestrator.stop(info.id)
        assert stopped.state is SessionState.STOPPED
        assert stopped.reason == "stopped by request"
        assert containers(docker_client, session=info.id) == []

    video = directory / "recording.mp4"
    assert stopped.mirror.video == str(video)
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "stream=codec_type", "-of", "csv=p=0", str(video)],
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 0 and "video" in probe.stdout, probe.stderr
    assert "MCP over HTTP" in (directory / "rig.log").read_text()
    saved = json.loads((directory / "session.json").read_text())
    assert saved["state"] == "stopped" and "token" not in saved
    assert not (directory / ".incoming").exists()


async def test_killed_rig_keeps_streamed_turns_and_fails_with_the_reason(
    rig_image: str, config: OrchestratorConfig, docker_client: docker.DockerClient
) -> None:
    async with Orchestrator(config) as orchestrator:
        info = await orchestrator.start(SessionSpec(image=rig_image))
        assert info.mcp_url and info.token
        directory = Path(info.artifacts_dir)
        await clicks(info.mcp_url, info.token, [(50, 50), (80, 80)])
        await eventually("two turns mirrored", lambda: len(turn_folders(directory)) == 2)

        docker_client.containers.get(info.container or "").kill()

        failed = await eventually(
            "the session to fail", lambda: (s := orchestrator.get(info.id)).state is SessionState.FAILED and s
        )
        assert failed.error is not None and failed.error.code is ErrorCode.RIG_FAILED
        assert "exited with code 137" in (failed.reason or "")
        assert turn_folders(directory) == ["turn-00001", "turn-00002"]
        await eventually("the container removed", lambda: containers(docker_client, session=info.id) == [])
        with pytest.raises(Exception) as raised:
            await orchestrator.wait(info.id)
        assert getattr(raised.value, "code", None) is ErrorCode.RIG_FAILED


async def test_mirror_resumes_after_a_dropped_connection_without_gaps_or_duplicates(
    rig_image: str, config: OrchestratorConfig, tmp_path: Path
) -> None:
    async with Orchestrator(config) as orchestrator:
        info = await orchestrator.start(SessionSpec(image=rig_image))
        assert info.mcp_url and info.token
        proxy = CuttableProxy(_port(info))
        copy = tmp_path / "copy"
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.serve)
            mirror = ArtifactMirror(proxy.endpoint, info.token, copy, retry_delay=0.05)
            tg.start_soon(mirror.run)

            await clicks(info.mcp_url, info.token, [(10, 10), (20, 20)])
            await eventually("two turns through the proxy", lambda: mirror.report.turns == 2)

            proxy.refusing = True
            await proxy.cut()
            await clicks(info.mcp_url, info.token, [(30, 30), (40, 40), (50, 50)])
            proxy.refusing = False
            await eventually("the rest after reconnecting", lambda: mirror.report.turns == 5)
            mirror.close()
            tg.cancel_scope.cancel()

        assert mirror.report.reconnects >= 1
        assert mirror.report.gaps == []
        assert turn_folders(copy) == [f"turn-0000{n}" for n in range(1, 6)]
        original = Path(info.artifacts_dir)
        await eventually("the orchestrator's own copy", lambda: len(turn_folders(original)) == 5)
        for turn in turn_folders(copy):
            for path in (copy / turn).iterdir():
                assert path.read_bytes() == (original / turn / path.name).read_bytes()


async def test_a_sway_session_serves_the_apps_window_and_streams_its_turns(
    gtk_image: str, config: OrchestratorConfig, docker_client: docker.DockerClient
) -> None:
    async with Orchestrator(config) as orchestrator:
        info = await orchestrator.start(SessionSpec(image=gtk_image, backend="sway"))
        assert info.state is SessionState.READY and info.mcp_url and info.token
        attrs = docker_client.containers.get(info.container or "").attrs
        assert "DESKRIG_BACKEND=sway" in attrs["Config"]["Env"]
        assert attrs["Config"]["User"] == "1000:1000" and attrs["HostConfig"]["ReadonlyRootfs"] is True

        displays = (await call(info.mcp_url, info.token, "list_displays", {})).structured_content
        assert [display["name"] for display in displays["displays"]] == ["HEADLESS-1"]
        windows = (await call(info.mcp_url, info.token, "list_windows", {})).structured_content
        assert "deskrig GTK example" in [window["title"] for window in windows["windows"]]
        await clicks(info.mcp_url, info.token, [(100, 100)])
        directory = Path(info.artifacts_dir)
        await eventually(
            "the click's turn folder on the host", lambda: turn_folders(directory) == ["turn-00001"]
        )
        assert (await orchestrator.stop(info.id)).state is SessionState.STOPPED
