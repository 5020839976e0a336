"""Turn folders of a session recording, over MCP against a real rig running the GTK form."""

from __future__ import annotations

import ctypes
import hashlib
import io
import json
import os
import time
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from PIL import Image, ImageDraw
from tests.frames import bgrx_frame, desktop_like, forget_frames
from tests.polling import poll
from tests.recording.conftest import (
    FormRig,
    Session,
    ffmpeg_writing,
    ffprobe_duration,
    in_session,
    load_json,
    mp4_boxes,
    session,
    video_frames,
)
from tests.recording.helpers import STALE_ELEMENT, element, turns

from deskrig import imaging, png
from deskrig.a11y.tree import Element, ElementQuery, ElementRef, Snapshot
from deskrig.grabs import Grab, KeptFrames
from deskrig.model import Bounds, Point
from deskrig.recording.session import Recording
from deskrig.recording.turns import (
    Moment,
    TurnImage,
    TurnRecord,
    TurnTree,
    after_inodes,
    captured,
    taken_over,
    turn_name,
    unavailable,
    write_turn,
)

RED = (255, 0, 0)
ARTIFACTS = {
    "before_state.json",
    "after_state.json",
    "before.png",
    "after.png",
    "app_state.json",
    "screenshot.png",
    "click.png",
}
ACTION_FIELDS = {
    "tool",
    "arguments",
    "result",
    "is_error",
    "error",
    "pid",
    "click_point",
    "timestamp",
    "duration_ms",
}
#: Every key action.json has, on every backend.
ACTION_KEYS = ACTION_FIELDS | {"window_id", "window_title", "element", "client_id"}
#: A recorded click's folder, on every backend.
CLICK_FOLDER = {*ARTIFACTS, "action.json", "action.sig", "evidence.json"}


def test_recorded_turns_hold_every_documented_file(form_rig: FormRig) -> None:
    out = form_rig.allowed / "contract"
    entry = form_rig.widget_center("entry")

    async def record(s: Session) -> dict[str, Any]:
        name_field = {"role": "text", "name": "Name", "pid": form_rig.pid}
        await s.ok("set_value", {"element": name_field, "value": ""})  # not recorded yet
        started = await s.ok("start_recording", {"output_dir": str(out)})
        assert started["recording"] and started["output_dir"] == str(out) and started["first_turn"] == 1
        await s.ok("click", {"x": entry[0], "y": entry[1]})
        await s.ok("type_text", {"text": "hello"})
        await s.ok("hotkey", {"keys": ["ctrl", "a"]})
        stale = await s.error("click", STALE_ELEMENT)
        assert stale["code"] == "ELEMENT_NOT_FOUND"
        return await s.ok("stop_recording")

    stopped = in_session(form_rig.rig, record)
    assert stopped["recording"] is False and stopped["turns"] == 4
    assert stopped["output_dir"] == str(out) and stopped["last_video_path"] is None
    assert stopped["last_error"] is None
    folders = turns(out)
    assert [p.name for p in folders] == [f"turn-0000{n}" for n in (1, 2, 3, 4)]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no half-written turn left

    actions = [load_json(f / "action.json") for f in folders]
    assert [a["tool"] for a in actions] == ["click", "type_text", "hotkey", "click"]
    for action in actions:
        assert action.keys() >= ACTION_FIELDS
        assert action["timestamp"].endswith("Z") and action["duration_ms"] >= 0
    click, typed, hotkey, refused = actions
    assert click["arguments"] == {"x": entry[0], "y": entry[1]}
    assert click["click_point"] == {"x": entry[0], "y": entry[1]}
    assert click["pid"] == form_rig.pid and click["is_error"] is False
    assert click["result"]["target"]["point"] == click["click_point"]
    assert typed["arguments"] == {"text": "hello"} and typed["pid"] == form_rig.pid
    assert hotkey["arguments"] == {"keys": ["ctrl", "a"]} and hotkey["click_point"] is None
    assert refused["arguments"] == STALE_ELEMENT and refused["is_error"] is True
    assert refused["error"]["code"] == "ELEMENT_NOT_FOUND" and refused["pid"] is None

    # Every resolved turn: all files, PNGs the size of the window, JSON with the snapshot.
    window = form_rig.ready
    for folder, action in zip(folders[:3], actions[:3], strict=True):
        evidence = load_json(folder / "evidence.json")
        assert set(evidence) == ARTIFACTS
        is_click = action["tool"] == "click"
        for name in ARTIFACTS - {"click.png"}:
            assert evidence[name]["status"] == "captured", (folder.name, name, evidence[name])
            assert (folder / name).is_file()
        region = evidence["before.png"]["region"]
        assert evidence["before.png"]["source"] == "window"
        for name in ("before.png", "after.png", "screenshot.png"):
            with Image.open(folder / name) as image:
                assert image.size == (region["width"], region["height"])
        assert region["x"] <= window["widgets"]["entry"]["x"] < region["x"] + region["width"]
        for name in ("before_state.json", "after_state.json", "app_state.json"):
            state = load_json(folder / name)
            assert state["pid"] == form_rig.pid and state["elements"] and state["text"]
        assert os.path.samefile(folder / "screenshot.png", folder / "after.png")
        assert os.path.samefile(folder / "app_state.json", folder / "after_state.json")
        if is_click:
            assert evidence["click.png"]["status"] == "captured"
        else:
            assert evidence["click.png"] == {"status": "not_applicable", "classification": "not_a_click"}
            assert not (folder / "click.png").exists()

    # The typed text is in the entry after the type_text turn, not before.
    def entry_text(name: str) -> str | None:
        state = load_json(folders[1] / name)
        return next(e.get("text") for e in state["elements"] if e["role"] == "text" and e["name"] == "Name")

    assert not entry_text("before_state.json")
    assert entry_text("after_state.json") == "hello"

    # click.png: red marker at the click point; before.png has no red there.
    region = load_json(folders[0] / "evidence.json")["click.png"]["region"]
    mx, my = entry[0] - region["x"], entry[1] - region["y"]
    assert load_json(folders[0] / "evidence.json")["click.png"]["marker"] == {"x": mx, "y": my}
    with Image.open(folders[0] / "click.png") as marked, Image.open(folders[0] / "before.png") as before:
        marked, before = marked.convert("RGB"), before.convert("RGB")
        assert marked.size == before.size
        for point in [(mx, my), (mx + 10, my), (mx, my - 15)]:
            assert marked.getpixel(point) == RED, point
            assert before.getpixel(point) != RED, point

    # The refused call: only action.json and evidence.json, every artifact not applicable.
    evidence = load_json(folders[3] / "evidence.json")
    assert {name: e["status"] for name, e in evidence.items()} == dict.fromkeys(ARTIFACTS, "not_applicable")
    assert {e["classification"] for e in evidence.values()} == {"refused_before_target"}
    assert sorted(p.name for p in folders[3].iterdir()) == ["action.json", "action.sig", "evidence.json"]


def test_restart_continues_after_existing_turns_and_never_overwrites(form_rig: FormRig) -> None:
    out = form_rig.allowed / "restart"
    x, y = form_rig.widget_center("check")

    async def record(s: Session) -> list[dict[str, Any]]:
        states = []
        for _ in range(2):
            states.append(await s.ok("start_recording", {"output_dir": str(out)}))
            await s.ok("move_cursor", {"x": x, "y": y})
            states.append(await s.ok("stop_recording"))
        # A second stop is harmless and reports the same.
        states.append(await s.ok("stop_recording"))
        return states

    first_start, first_stop, second_start, second_stop, again = in_session(form_rig.rig, record)
    assert first_start["first_turn"] == 1 and second_start["first_turn"] == 2
    assert first_stop["turns"] == second_stop["turns"] == 1
    assert again == second_stop
    assert [p.name for p in turns(out)] == ["turn-00001", "turn-00002"]


def test_only_the_recording_sessions_turns_are_recorded(form_rig: FormRig) -> None:
    out = form_rig.allowed / "scoped"
    x, y = form_rig.widget_center("status")

    async def two_sessions() -> tuple[dict[str, Any], dict[str, Any]]:
        async with session(form_rig.rig) as recorder, session(form_rig.rig) as other:
            await recorder.ok("start_recording", {"output_dir": str(out)})
            await other.ok("move_cursor", {"x": x + 1, "y": y})
            await recorder.ok("move_cursor", {"x": x + 2, "y": y})
            await other.ok("move_cursor", {"x": x + 3, "y": y})
            other_state = await other.ok("get_recording_state")
            return await recorder.ok("stop_recording"), other_state

    stopped, other_state = anyio.run(two_sessions)
    assert stopped["turns"] == 1 and other_state["recording"] is False
    (only,) = turns(out)
    assert load_json(only / "action.json")["arguments"] == {"x": x + 2, "y": y}


def test_a_recorded_click_gives_the_same_turn_folder_and_a_playing_video_on_every_backend(
    recording_rig: FormRig,
) -> None:
    out = recording_rig.allowed / "shape"
    x, y = recording_rig.widget_center("button")

    times: dict[str, float] = {}

    async def record(s: Session) -> tuple[dict[str, Any], dict[str, Any]]:
        times["start_sent"] = time.time()
        started = await s.ok("start_recording", {"output_dir": str(out), "record_video": True})
        times["started"] = time.time()
        await anyio.sleep(0.5)
        times["click_sent"] = time.time()
        await s.ok("click", {"x": x, "y": y})
        times["clicked"] = time.time()
        await anyio.sleep(0.5)
        return started, await s.ok("stop_recording")

    started, stopped = in_session(recording_rig.rig, record)
    assert started["video_recording"] and not started["last_error"], started
    assert stopped["turns"] == 1 and stopped["last_error"] is None, stopped
    recording_rig.wait_event("button")  # the click landed on the button
    (folder,) = turns(out)
    assert {p.name for p in folder.iterdir()} == CLICK_FOLDER | {"video.json"}
    action = load_json(folder / "action.json")
    assert set(action) == ACTION_KEYS
    assert action["click_point"] == {"x": x, "y": y} and action["pid"] == recording_rig.pid
    evidence = load_json(folder / "evidence.json")
    assert set(evidence) == ARTIFACTS
    assert {name: e["status"] for name, e in evidence.items()} == dict.fromkeys(ARTIFACTS, "captured")
    assert evidence["before.png"]["source"] == "window"
    for name in ("before_state.json", "after_state.json"):
        state = load_json(folder / name)
        assert state["pid"] == recording_rig.pid and state["elements"], name
    video = Path(stopped["last_video_path"])
    assert video == out / "recording.mp4" and mp4_boxes(video)[-1] == "mfra"
    duration = ffprobe_duration(video)
    assert duration > 0.8
    # Where the click is in the video: the video's 0 s lies between start_recording's call and its
    # answer, and the click between its call and its answer.
    place = load_json(folder / "video.json")
    assert place["path"] == "recording.mp4", place
    earliest, latest = times["click_sent"] - times["started"], times["clicked"] - times["start_sent"]
    assert earliest - 0.01 <= place["offset_s"] <= min(latest, duration), (place, times)
    assert video_frames(video) >= 3  # the first screen, the click's changes, the screen at the stop


def test_video_matches_wall_time_and_is_finalised_when_the_client_disconnects(recording_rig: FormRig) -> None:
    out = recording_rig.allowed / "video"
    x, y = recording_rig.widget_center("button")

    async def record(s: Session) -> tuple[dict[str, Any], float]:
        started = await s.ok("start_recording", {"output_dir": str(out), "record_video": True})
        began = time.monotonic()
        for dx in range(8):
            await s.ok("move_cursor", {"x": x + dx * 10, "y": y})
            await anyio.sleep(0.25)
        return started, began

    started, began = in_session(recording_rig.rig, record)  # the session ends here (DELETE), not stopped
    wall = time.monotonic() - began
    video = out / "recording.mp4"
    assert started["video_path"] == str(video) and started["video_recording"] and not started["last_error"]
    poll("ffmpeg to finish", lambda: not ffmpeg_writing(video), timeout=15)
    assert mp4_boxes(video)[-1] == "mfra", mp4_boxes(video)  # closed cleanly by `q`, not killed
    assert abs(ffprobe_duration(video) - wall) < max(0.75, 0.2 * wall)
    poll("the 8 turns", lambda: len(turns(out)) == 8, timeout=10)  # written after the video is final


def test_an_after_still_current_is_the_next_before_and_a_change_from_outside_is_not_missed(
    form_rig: FormRig,
) -> None:
    """One observation per turn, across turns: with nothing changed between two recorded actions,
    the second one's before is the first one's after, taken over whole (the same snapshot, the same
    PNG); after another client types into the form between two recorded actions, the second one's
    before shows the text, in its state and its image."""
    out = form_rig.allowed / "carried"
    entry = form_rig.widget("entry")
    x, y = entry["x"] - 60, entry["y"] + entry["height"] // 2  # on the "Name" label: no hover effect
    name_field = {"role": "text", "name": "Name", "pid": form_rig.pid}
    form_rig.ok("set_value", {"element": name_field, "value": ""})
    form_rig.ok("move_cursor", {"x": x, "y": y})
    shots: list[bytes] = []

    def still() -> bool:
        """The screen shows the same in two screenshots in a row (a row's hover highlight fades out
        for a while after the pointer left it)."""
        shots.append(form_rig.call("screenshot_screen", {"format": "png"}).content[0].data)
        return len(shots) > 1 and shots[-1] == shots[-2]

    poll("the form to stop changing", still)

    async def record() -> None:
        async with session(form_rig.rig) as recorder, session(form_rig.rig) as other:
            await recorder.ok("start_recording", {"output_dir": str(out)})
            await recorder.ok("move_cursor", {"x": x, "y": y})
            await recorder.ok("move_cursor", {"x": x + 1, "y": y})
            await other.ok("set_value", {"element": name_field, "value": "from outside"})
            await recorder.ok("move_cursor", {"x": x + 2, "y": y})
            await recorder.ok("stop_recording")

    anyio.run(record)
    first, second, third = turns(out)

    def name_text(folder: Path, name: str) -> str | None:
        state = load_json(folder / name)
        return next(e.get("text") for e in state["elements"] if e["role"] == "text" and e["name"] == "Name")

    assert (second / "before_state.json").read_bytes() == (first / "after_state.json").read_bytes()
    assert (second / "before.png").read_bytes() == (first / "after.png").read_bytes()
    assert not name_text(second, "after_state.json")
    assert name_text(third, "before_state.json") == "from outside"
    assert (
        load_json(third / "before_state.json")["snapshot_id"]
        != load_json(second / "after_state.json")["snapshot_id"]
    )
    assert (third / "before.png").read_bytes() != (second / "after.png").read_bytes()


RAPID_TURNS = 24


def test_rapid_recorded_actions_leave_every_turn_complete_and_in_order(form_rig: FormRig) -> None:
    """Back to back (each call sent as soon as the last one answered, its after-capture still
    running) and stopped right after the last: every turn is written, whole, in the order of the
    actions, alternating between a click by element (the form's check box) and a pointer move."""
    out = form_rig.allowed / "rapid"
    x, y = form_rig.widget_center("status")

    async def record(s: Session) -> dict[str, Any]:
        box = await element(s, form_rig.pid, "check box", "Subscribe")
        await s.ok("start_recording", {"output_dir": str(out)})
        for number in range(RAPID_TURNS):
            if number % 2:
                await s.ok("move_cursor", {"x": x + number, "y": y})
            else:
                await s.ok("click", {"element": box})
        return await s.ok("stop_recording")

    stopped = in_session(form_rig.rig, record)
    assert stopped["turns"] == RAPID_TURNS and stopped["last_error"] is None
    folders = turns(out)
    assert [p.name for p in folders] == [f"turn-{n:05d}" for n in range(1, RAPID_TURNS + 1)]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    for number, folder in enumerate(folders):
        action = load_json(folder / "action.json")
        clicked = number % 2 == 0
        assert action["tool"] == ("click" if clicked else "move_cursor"), folder.name
        if not clicked:
            assert action["arguments"] == {"x": x + number, "y": y}, folder.name
        expected = CLICK_FOLDER if clicked else CLICK_FOLDER - {"click.png"}
        assert {p.name for p in folder.iterdir()} == expected, folder.name
        evidence = load_json(folder / "evidence.json")
        for name in ("before.png", "after.png", "before_state.json", "after_state.json"):
            assert evidence[name]["status"] == "captured", (folder.name, name, evidence[name])
    # Each click toggled the box: its after-state shows the box as the next click's before-state does.
    checked = [
        "checked"
        in next(e for e in load_json(f / "after_state.json")["elements"] if e["name"] == "Subscribe")[
            "states"
        ]
        for f in folders[::2]
    ]
    assert checked == [checked[0] if n % 2 == 0 else not checked[0] for n in range(len(checked))]


def test_without_a_recording_from_boot_the_feed_is_404_and_status_has_none(form_rig: FormRig) -> None:
    rig = form_rig.rig
    with httpx.Client(base_url=rig.base, headers={"Authorization": f"Bearer {rig.token}"}) as http:
        for response in (
            http.get("/recording/events"),
            http.get("/recording/files/turn-00001/action.json"),
            http.post("/recording/finalize"),
        ):
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "RECORDING_ERROR"
        status = http.get("/status").json()
        assert status["recording"] is None and status["last_activity"] > 0


def app_snapshot(elements: list[Element], **fields: Any) -> Snapshot:
    """A snapshot of the app "Fenêtre" holding ``elements`` (a fresh id each), with ``fields``."""
    return Snapshot(
        snapshot_id=os.urandom(6).hex(),
        pid=42,
        app_name="Fenêtre",
        bus_name="a",
        created_at=datetime.now(UTC),
        fetch_ms=1.25,
        elements=elements,
        **{"truncated": False, **fields},
    )


def test_a_turn_kept_as_taken_is_written_whole(tmp_path: Path) -> None:
    """A moment keeps the grab and the snapshot as taken (converting, encoding and serialising are
    the writer's work, after the reply): the PNGs decode to the grab's pixels exactly, click.png has
    its marker, and the state files hold the snapshot's fields and its text, non-ASCII intact."""
    width, height = 64, 48
    bgrx = bytes(range(256)) * (width * height * 4 // 256)
    region = Bounds(x=100, y=50, width=width, height=height)
    elements = [
        Element(
            index=0,
            parent=None,
            depth=0,
            role="frame",
            name="Fenêtre",
            states=["showing"],
            ref=ElementRef("a", "/0"),
        ),
        Element(
            index=1,
            parent=0,
            depth=1,
            role="push button",
            name="OK",
            states=["enabled"],
            ref=ElementRef("a", "/1"),
        ),
    ]
    snapshot = app_snapshot(elements)
    moment = Moment(
        TurnImage(Grab.from_bgrx(bgrx, width, height), captured(source="window", region=region)),
        TurnTree(snapshot, captured()),
    )
    action = {"tool": "click", "arguments": {"x": 110, "y": 60}, "timestamp": "2026-01-01T00:00:00.000Z"}
    record = TurnRecord("click", action, moment, moment, Point(x=110, y=60))
    write_turn(tmp_path, 1, record)
    folder = tmp_path / "turn-00001"
    expected = Image.frombuffer("RGB", (width, height), bgrx, "raw", "BGRX", 0, 1)
    for name in ("before.png", "after.png"):
        with Image.open(folder / name) as image:
            assert image.mode == "RGB" and image.tobytes() == expected.tobytes(), name
    with Image.open(folder / "click.png") as marked:
        assert marked.convert("RGB").getpixel((10 + imaging.MARKER_ARM, 10)) == RED
    state = load_json(folder / "before_state.json")
    assert state == {**snapshot.model_dump(mode="json"), "text": snapshot.render_text()}
    assert "Fenêtre" in (folder / "after_state.json").read_text("utf-8")
    assert load_json(folder / "action.json") == action


def test_a_state_file_renders_only_the_elements_the_last_one_did_not_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The live mirror hands out the same element objects for the parts of a tree that did not
    change: a state file serialises and renders only the elements the last one did not hold (it
    rendered every element of every tree), and still holds the snapshot's every field, element
    and its text, whatever the fields (a query, a truncated tree)."""
    elements = [
        Element(
            index=index,
            parent=None if index == 0 else 0,
            depth=min(index, 1),
            role="frame" if index == 0 else "push button",
            name=f"Knopf {index} ✓",
            states=["showing", "enabled"],
            ref=ElementRef("a", f"/{index}"),
        )
        for index in range(5)
    ]

    renamed = elements[3].model_copy(update={"name": "renamed"})
    trees = [
        app_snapshot(elements),
        app_snapshot([*elements[:3], renamed, elements[4]]),
        app_snapshot([elements[1], renamed], query=ElementQuery(role="push button"), truncated=True),
    ]
    rendered: list[int] = []
    render_line = Element.render_line

    def counting(element: Element) -> str:
        rendered.append(element.index)
        return render_line(element)

    monkeypatch.setattr(Element, "render_line", counting)
    written = [TurnTree(tree, captured()).json_bytes() or b"" for tree in trees]
    assert rendered == [0, 1, 2, 3, 4, 3]
    monkeypatch.undo()
    for tree, state in zip(trees, written, strict=True):
        assert json.loads(state) == {**tree.model_dump(mode="json"), "text": tree.render_text()}


@pytest.mark.parametrize(
    "marker", [(32, 24), (0, 0), (63, 47), (-5, 30), (70, 50), (-19, 10), (200, 200), (10, 16), (40, 70)]
)
@pytest.mark.parametrize("kind", ["grab", "image"])
def test_the_click_marker_drawn_on_a_screenshot_is_the_one_drawn_on_its_image(
    marker: tuple[int, int], kind: str
) -> None:
    """click.png decodes to the marker drawn on the whole image: at the centre, on band edges, at
    the picture's edges, half or wholly outside it, on a BGRX grab (drawn on its rows around the
    click only) and on a Pillow image; the grab is left as it was (it is before.png's)."""
    width, height = 64, 55  # three bands of 16 rows and one of 7
    rows = bytes(range(256)) * (width * height * 4 // 256) + bytes(width * height * 4 % 256)
    grab = Grab.from_bgrx(rows, width, height)
    expected = imaging.draw_click_marker(grab.image(), *marker)
    shot = TurnImage(grab if kind == "grab" else grab.image(), captured())
    with Image.open(io.BytesIO(shot.marked_png(Point(x=marker[0], y=marker[1])) or b"")) as marked:
        assert marked.convert("RGB").tobytes() == expected.tobytes()
    assert grab.bgrx == rows
    with Image.open(io.BytesIO(shot.png() or b"")) as plain:
        assert plain.tobytes() == grab.image().tobytes()


def test_click_turns_deflate_only_the_bands_their_frames_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Back-to-back clicks, each toggling a box: a turn's after.png deflates only the bands the
    click changed since the turn before (its before.png is that turn's after.png, encoded once).
    click.png is drawn on before.png's grab and must not make the PNG encoder forget the frames it
    remembers (it once did, so every turn's frames and click.png were deflated whole); it is
    before.png's bands with only the marker's deflated again (it was deflated whole)."""
    monkeypatch.setattr(png, "_band_caches", png._band_caches)
    forget_frames()
    width, height = 320, 200
    image = desktop_like(width, height)
    screen = bytearray(bgrx_frame(image).bgrx or b"")
    address = ctypes.addressof((ctypes.c_char * len(screen)).from_buffer(screen))
    kept = KeptFrames(width, height)
    deflated: list[int] = []
    deflate_bands, deflate_rgb_band, deflate_whole = (
        png._deflated_bands,
        png._deflated_rgb_band,
        png._deflated_scanlines,
    )
    marked_rows: list[int] = []
    wholes: list[int] = []

    def counting(rows: memoryview, run_width: int, run_height: int) -> Any:
        deflated.append(run_height)
        return deflate_bands(rows, run_width, run_height)

    def counting_marked(rows: memoryview, band_width: int) -> Any:
        marked_rows.append(len(rows) // (band_width * 3))
        return deflate_rgb_band(rows, band_width)

    def counting_whole(bands: Any, stride: int) -> bytes:
        wholes.append(stride)
        return deflate_whole(bands, stride)

    monkeypatch.setattr(png, "_deflated_bands", counting)
    monkeypatch.setattr(png, "_deflated_rgb_band", counting_marked)
    monkeypatch.setattr(png, "_deflated_scanlines", counting_whole)
    region = Bounds(x=0, y=0, width=width, height=height)

    def moment() -> Moment:
        return Moment(
            TurnImage(kept.take(address), captured(source="window", region=region)),
            TurnTree(None, captured()),
        )

    before = moment()
    for number, box_top in enumerate((34, 100, 34), start=1):  # each box within one band
        image = image.copy()
        ImageDraw.Draw(image).rectangle((60, box_top, 70, box_top + 10), fill=(number * 70, 0, 0))
        screen[:] = bgrx_frame(image).bgrx or b""
        after = moment()
        deflated.clear()
        marked_rows.clear()
        action = {
            "tool": "click",
            "arguments": {"x": 65, "y": box_top + 5},
            "timestamp": "2026-01-01T00:00:00Z",
        }
        write_turn(tmp_path, number, TurnRecord("click", action, before, after, Point(x=65, y=box_top + 5)))
        if number > 1:  # the first turn deflates its before.png whole
            assert deflated == [png.PNG_BAND_ROWS], (number, deflated)
        # click.png: only the bands under the marker (rows y - 18 .. y + 18) are deflated anew.
        assert marked_rows == [png.PNG_BAND_ROWS] * 3 and not wholes, (number, marked_rows, wholes)
        folder = tmp_path / turn_name(number)
        with Image.open(folder / "after.png") as written:
            assert written.tobytes() == image.tobytes()
        with Image.open(folder / "click.png") as marked:
            assert marked.convert("RGB").getpixel((65 + imaging.MARKER_ARM, box_top + 5)) == RED
        before = after


def _shaded_moment(shade: int) -> Moment:
    """A 32x24 window of one shade, and a tree naming it."""
    width, height = 32, 24
    grab = Grab.from_bgrx(bytes([shade]) * (width * height * 4), width, height)
    region = Bounds(x=0, y=0, width=width, height=height)
    return Moment(
        TurnImage(grab, captured(source="window", region=region)),
        TurnTree({"elements": [{"index": 0, "name": f"shade {shade}"}]}, captured()),
    )


#: A pointer move's action.json.
MOVE_ACTION = {"tool": "move_cursor", "arguments": {"x": 1, "y": 1}, "timestamp": "2026-01-01T00:00:00Z"}


def test_a_before_taken_over_from_the_turn_before_is_a_link_to_its_after(tmp_path: Path) -> None:
    """When an action took the moment before it over from the last action's "after" (the same
    screenshot and tree), its before.png and before_state.json are hard links to that turn's
    after.png and after_state.json, not written again; a moment taken anew is written."""
    first, second, third = _shaded_moment(10), _shaded_moment(20), _shaded_moment(30)
    recording = Recording(tmp_path, "session")
    recording.start()
    recording.enqueue(TurnRecord("move_cursor", MOVE_ACTION, first, second, None))
    recording.enqueue(TurnRecord("move_cursor", MOVE_ACTION, second, third, None))  # taken over
    recording.enqueue(TurnRecord("move_cursor", MOVE_ACTION, _shaded_moment(30), _shaded_moment(40), None))
    assert recording.stop().turns == 3
    for before, after in (("before.png", "after.png"), ("before_state.json", "after_state.json")):
        assert os.path.samefile(tmp_path / "turn-00002" / before, tmp_path / "turn-00001" / after)
        assert not os.path.samefile(tmp_path / "turn-00003" / before, tmp_path / "turn-00002" / after)
        assert (tmp_path / "turn-00003" / before).read_bytes() == (
            tmp_path / "turn-00002" / after
        ).read_bytes()
    linked = (tmp_path / "turn-00001" / "after.png").read_bytes()
    entries = {entry.path: entry for entry in recording.events_after(1)[0].files}
    assert entries["turn-00002/before.png"].size == len(linked)
    assert entries["turn-00002/before.png"].sha256 == hashlib.sha256(linked).hexdigest()


def test_the_writer_lets_a_written_turn_go(tmp_path: Path) -> None:
    """Waiting for the next turn, the writer holds nothing of the turn it wrote but its "after"
    moment (what the next turn's "before" files may link to): the other frames go back to the
    grabber that lent them (a grabber's buffer still held is copied anew at every grab)."""
    before = _shaded_moment(10)
    held = weakref.ref(before)
    recording = Recording(tmp_path, "session")
    recording.start()
    recording.enqueue(TurnRecord("move_cursor", MOVE_ACTION, before, _shaded_moment(20), None))
    del before
    poll("the turn written", lambda: recording.turns == 1)
    poll("the written turn's before moment let go", lambda: held() is None)
    assert recording.stop().turns == 1


@pytest.mark.parametrize("replacement", ["symlink", "file"])
def test_a_before_is_written_when_the_after_it_would_link_to_was_replaced(
    tmp_path: Path, replacement: str
) -> None:
    """The app under test may write where turns go: the earlier after.png replaced by a symlink to
    another file, or by another file, is not linked to; the turn's own before.png is written."""
    grab = Grab.from_bgrx(bytes([7]) * (8 * 8 * 4), 8, 8)
    shared = Moment(
        TurnImage(grab, captured(source="window", region=Bounds(x=0, y=0, width=8, height=8))),
        TurnTree(None, unavailable("no_target_pid")),
    )
    write_turn(tmp_path, 1, TurnRecord("move_cursor", MOVE_ACTION, shared, shared, None))
    inodes = after_inodes(tmp_path / "turn-00001")
    assert set(inodes) == {"after.png"}  # no state file to link to
    elsewhere = tmp_path / "elsewhere.png"
    elsewhere.write_bytes(b"not the screenshot")
    earlier_after = tmp_path / "turn-00001" / "after.png"
    earlier_after.unlink()
    if replacement == "symlink":
        earlier_after.symlink_to(elsewhere)
    else:
        os.link(elsewhere, earlier_after)
    second = TurnRecord("move_cursor", MOVE_ACTION, shared, shared, None)
    write_turn(tmp_path, 2, second, taken=taken_over(second, shared, inodes))
    before = tmp_path / "turn-00002" / "before.png"
    assert (
        not before.is_symlink()
        and before.read_bytes() == (tmp_path / "turn-00002" / "after.png").read_bytes()
    )
    assert not os.path.samefile(before, elsewhere)
