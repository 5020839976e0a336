"""Recording in the compose rig, under X11 and sway: turn folders on the host, and an mp4 that
survives `docker stop`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.container.conftest import (
    DOCKER_POLL_S,
    GTK_SERVICE,
    STACK_TIMEOUT_S,
    ComposeStack,
    call_tool,
    docker,
    running_stack,
)
from tests.polling import poll
from tests.recording.conftest import ffprobe_duration

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module", params=list(GTK_SERVICE))
def video_stack(
    request: pytest.FixtureRequest, rig_images: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComposeStack]:
    """The GTK example recording video, under each backend (its frames from the rig's own captures, piped into ffmpeg)."""
    with running_stack(tmp_path_factory, GTK_SERVICE[request.param], DESKRIG_RECORD_VIDEO="1") as stack:
        yield stack


def turns(artifacts: Path) -> list[Path]:
    return sorted(p for p in artifacts.glob("turn-*") if (p / "action.json").exists())


def test_actions_become_turn_folders_on_the_host(video_stack: ComposeStack) -> None:
    before = len(turns(video_stack.artifacts))
    for x, y in [(50, 60), (70, 80)]:
        assert not call_tool(video_stack.url, video_stack.token, "click", {"x": x, "y": y}).is_error

    def two_more() -> list[Path] | None:
        folders = turns(video_stack.artifacts)
        return folders if len(folders) >= before + 2 else None

    folders = poll("two new turn folders", two_more, STACK_TIMEOUT_S, DOCKER_POLL_S)
    action = json.loads((folders[-1] / "action.json").read_text())
    assert action["tool"] == "click" and action["arguments"] == {"x": 70, "y": 80}
    assert (folders[-1] / "click.png").stat().st_size > 0 and (folders[-1] / "after.png").exists()


def test_docker_stop_leaves_a_decodable_video(video_stack: ComposeStack) -> None:
    container = video_stack.container()
    video = video_stack.artifacts / "recording.mp4"
    poll(
        "the video to grow",
        lambda: video.exists() and video.stat().st_size > 10_000,
        STACK_TIMEOUT_S,
        DOCKER_POLL_S,
    )
    assert docker("stop", "-t", "15", container).returncode == 0
    # Decoded as every other video test decodes (each frame at its own time: the rate varies).
    assert ffprobe_duration(video) > 0.5
