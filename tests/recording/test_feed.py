"""Recording from boot (--record --record-video) and the orchestrator's HTTP feed of it."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from tests.orchestrator.helpers import eventually
from tests.polling import poll
from tests.recording.conftest import ffmpeg_writing, ffprobe_duration, load_json, video_to_keep
from tests.server.rigproc import FormRig, RigProcess, color_app, read_events

from deskrig import feed
from deskrig.errors import ErrorCode, http_error_info
from deskrig.orchestrator.mirror import ArtifactMirror
from deskrig.recording.session import Wakeups

GREEN = "#20c040"


class BootRig:
    def __init__(self, rig: RigProcess, folder: Path, app: dict[str, Any]) -> None:
        self.rig = rig
        self.folder = folder
        self.app = app
        self.http = httpx.Client(
            base_url=rig.base, headers={"Authorization": f"Bearer {rig.token}"}, timeout=20
        )

    def click(self, dx: int = 0) -> None:
        result = self.rig.call("click", {"x": self.app["x"] + 40 + dx, "y": self.app["y"] + 40})
        assert not result.is_error, result.structured_content

    def status(self) -> dict[str, Any]:
        response = self.http.get("/status")
        assert response.status_code == 200
        return response.json()  # type: ignore[no-any-return]

    def wait_turns(self, count: int) -> None:
        poll(f"{count} turns", lambda: self.status()["recording"]["turns"] >= count)

    def events(self, count: int, **request: Any) -> list[dict[str, Any]]:
        with self.http.stream("GET", "/recording/events", **request) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            return read_sse(response.iter_lines(), count)


def read_sse(lines: Iterator[str], count: int) -> list[dict[str, Any]]:
    """The next ``count`` events (comments skipped) as {"id"?, "event", "data"} dicts."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in lines:
        if not line:
            if current:
                events.append(current)
                current = {}
                if len(events) == count:
                    return events
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        current[field] = value[1:] if value.startswith(" ") else value
    raise AssertionError(f"stream ended after {len(events)} events")


@pytest.fixture(scope="module")
def boot_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BootRig]:
    tmp = tmp_path_factory.mktemp("rec-boot")
    log = tmp / "green.log"
    folder = tmp / "boot"
    rig = RigProcess(
        app=color_app("Fixture Green", GREEN, log, size="300x200", pos="100,120"),
        extra=["--record", str(folder), "--record-video"],
    ).start(tmp)
    boot = BootRig(rig, folder, poll("app ready", lambda: read_events(log, "ready"))[-1])
    yield boot
    boot.http.close()
    rig.stop()
    assert not ffmpeg_writing(folder / "recording.mp4")


def test_turn_events_in_order_with_correct_hashes_and_resumable(boot_rig: BootRig) -> None:
    for dx in range(3):
        boot_rig.click(dx)
    events = boot_rig.events(3, params={"after": 0})
    assert [(e["id"], e["event"]) for e in events] == [("1", "turn"), ("2", "turn"), ("3", "turn")]
    for number, event in enumerate(events, start=1):
        data = json.loads(event["data"])
        assert data["seq"] == number and data["turn"] == f"turn-{number:05d}"
        paths = {f["path"] for f in data["files"]}
        assert f"turn-{number:05d}/action.json" in paths and f"turn-{number:05d}/click.png" in paths
        for entry in data["files"]:
            body = boot_rig.http.get(f"/recording/files/{entry['path']}").content
            assert len(body) == entry["size"]
            assert hashlib.sha256(body).hexdigest() == entry["sha256"]
            assert (boot_rig.folder / entry["path"]).read_bytes() == body

    # Resume: Last-Event-ID (as EventSource sends it) or after=; then live turns, without gaps.
    (resumed,) = boot_rig.events(1, headers={"Last-Event-ID": "2"})
    assert resumed["id"] == "3"
    with boot_rig.http.stream("GET", "/recording/events", params={"after": 3}) as response:
        boot_rig.click(5)
        (live,) = read_sse(response.iter_lines(), 1)
    assert live["id"] == "4" and load_json(boot_rig.folder / "turn-00004" / "action.json")["tool"] == "click"

    status = boot_rig.status()
    assert abs(status["last_activity"] - time.time()) < 30
    assert status["recording"]["scope"] == "boot" and status["recording"]["turns"] == 4


def test_file_downloads_stay_inside_the_recording_folder(boot_rig: BootRig, tmp_path: Path) -> None:
    boot_rig.click()
    boot_rig.wait_turns(1)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-42")
    (boot_rig.folder / "escape.txt").symlink_to(secret)
    (boot_rig.folder / "escape-dir").symlink_to(tmp_path, target_is_directory=True)
    get = boot_rig.http.get
    assert get("/recording/files/turn-00001/evidence.json").status_code == 200
    for path, status in [
        ("..%2Fsecret.txt", 404),
        ("turn-00001%2F..%2F..%2F" + "..%2F" * 8 + "etc%2Fpasswd", 404),
        ("%2Fetc%2Fpasswd", 404),
        ("/etc/passwd", 404),
        ("escape.txt", 403),
        ("escape-dir/secret.txt", 403),
        (".hidden", 404),
        ("turn-99999/action.json", 404),
    ]:
        response = get(f"/recording/files/{path}")
        assert response.status_code == status, (path, response.status_code)
        assert b"TOP-SECRET-42" not in response.content and b"root:" not in response.content
    unauthenticated = httpx.get(f"{boot_rig.rig.base}/recording/files/turn-00001/action.json", timeout=10)
    assert unauthenticated.status_code == 401


def test_feed_refusals_are_deskrig_errors_with_remediation(boot_rig: BootRig, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("outside")
    (boot_rig.folder / "outside-link.txt").symlink_to(tmp_path / "outside.txt")
    for path, status, code in [
        ("/recording/files/..%2Fsecret.txt", 404, ErrorCode.INVALID_PATH),
        ("/recording/files/turn-99999/action.json", 404, ErrorCode.INVALID_PATH),
        ("/recording/files/outside-link.txt", 403, ErrorCode.PERMISSION_DENIED),
    ]:
        response = boot_rig.http.get(path)
        error = http_error_info(response.text)
        assert (response.status_code, error and error.code) == (status, code), path
        assert error is not None and error.remediation and error.details, path
    bad_resume = boot_rig.http.get("/recording/events", headers={"Last-Event-ID": "seven"})
    error = http_error_info(bad_resume.text)
    assert bad_resume.status_code == 400 and error is not None and error.code is ErrorCode.INVALID_ARGUMENT
    assert error.details == {"last_event_id": "seven"} and error.remediation


def test_the_mirror_notes_a_feed_refusal_by_code_and_message(form_rig: FormRig, tmp_path: Path) -> None:
    """A rig not recording from boot refuses its feed; the mirror's report says so in one line
    (not a cut-off JSON body), and it keeps retrying."""

    async def refusals() -> list[str]:
        mirror = ArtifactMirror(form_rig.rig.base, form_rig.rig.token, tmp_path / "copy", retry_delay=0.05)
        async with anyio.create_task_group() as group:
            group.start_soon(mirror.run)
            await eventually("two refused attempts", lambda: mirror.report.reconnects >= 2 or None)
            mirror.close()
        return mirror.report.errors

    assert anyio.run(refusals) == [
        "feed: FeedError: GET /recording/events: HTTP 404 RECORDING_ERROR: "
        "this rig is not recording from boot (start it with --record DIR)"
    ]


def test_video_survives_sigkill_of_ffmpeg_and_is_announced_when_final(boot_rig: BootRig) -> None:
    video = boot_rig.folder / "recording.mp4"
    (pid,) = poll("boot ffmpeg", lambda: ffmpeg_writing(video))
    # Some video to keep (an idle screen sends a heartbeat frame a second).
    poll("some video to keep written", lambda: video_to_keep(video))
    os.kill(pid, signal.SIGKILL)
    poll("last_error", lambda: boot_rig.status()["recording"]["last_error"])
    assert "unexpectedly" in boot_rig.status()["recording"]["last_error"]
    assert ffprobe_duration(video) > 1.0

    response = boot_rig.http.post("/recording/finalize")
    assert response.status_code == 200
    state = response.json()
    assert state["video_path"] == str(video) and state["video_recording"] is False
    assert state["recording"] is True  # turns go on
    before = boot_rig.status()["recording"]["turns"]
    events = boot_rig.events(1, params={"after": before})
    (announced,) = events
    assert announced["event"] == "video" and "id" not in announced
    data = json.loads(announced["data"])
    assert data == {
        "path": "recording.mp4",
        "size": video.stat().st_size,
        "sha256": hashlib.sha256(video.read_bytes()).hexdigest(),
    }
    boot_rig.click()
    boot_rig.wait_turns(before + 1)


class _IdleRecording:
    """A recording nothing happens to, counting how often the feed reads its turns."""

    def __init__(self) -> None:
        self.wakeups = Wakeups()
        self.video_event = None
        self.reads = 0

    def events_after(self, seq: int) -> list[Any]:
        self.reads += 1
        return []


def test_an_idle_feed_sends_keepalives_without_reading_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each keepalive of an idle stream looked for turns again (a worker thread's read, a wake-up
    of the rig every 10 s per open feed); only a wakeup means there may be new ones."""
    monkeypatch.setattr(feed, "KEEPALIVE_SECONDS", 0.02)
    recording = _IdleRecording()

    async def first_chunks(count: int) -> list[bytes]:
        stream = feed.turn_stream(recording, 0)  # type: ignore[arg-type]
        try:
            return [await anext(stream) for _ in range(count)]
        finally:
            await stream.aclose()

    assert anyio.run(first_chunks, 5) == [b": keepalive\n\n"] * 5
    assert recording.reads == 1
