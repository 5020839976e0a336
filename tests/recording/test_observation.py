"""The recorder's observations, through a server in this process on a real rig: how often a
recorded action looks at the desktop, and that its images are redacted like every screenshot."""

from __future__ import annotations

import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from PIL import Image
from tests.polling import poll
from tests.recording.conftest import load_json
from tests.server.rigproc import color_app, read_events

from deskrig.a11y.access import A11yAccess
from deskrig.a11y.snapshots import DEFAULT_CAPACITY
from deskrig.config import load_settings
from deskrig.desktop import Desktop, open_desktop
from deskrig.errors import DeskrigError, tool_error
from deskrig.identity import ClientRef
from deskrig.model import Bounds
from deskrig.recording import registry as registry_module
from deskrig.recording import session as session_module
from deskrig.recording.registry import RecordingRegistry, registry_of
from deskrig.recording.turns import turn_name
from deskrig.rig import Rig, RigOptions
from deskrig.server import DeskrigServer
from deskrig.services import CallInfo
from deskrig.serving import build_server
from deskrig.tools.recording import NoArguments, get_recording_state

TITLE = "Observed Green"
GREEN = (0x20, 0xC0, 0x40)
CLIENT = "observation-test"
T = TypeVar("T")


@dataclass
class AppRig:
    rig: Rig
    desktop: Desktop
    window: Bounds
    tmp: Path

    def server(self, blocked: list[str] | None = None) -> DeskrigServer:
        security = {"allowed_directories": [str(self.tmp)], "blocked_window_patterns": blocked or []}
        return build_server(
            self.desktop,
            load_settings(env={}, overrides={"security": security}),
            session_bus=self.rig.env["DBUS_SESSION_BUS_ADDRESS"],
        )

    def inside(self) -> dict[str, int]:
        """A click's arguments for a point inside the app's window."""
        return {"x": self.window.x + 40, "y": self.window.y + 40}

    def bare_point(self) -> tuple[int, int]:
        """A point on the root window, far from the app."""
        screen = self.desktop.screen_bounds()
        x, y = screen.right - 20, screen.bottom - 20
        assert not self.window.contains(x, y)
        return x, y


def tree_readable(session_bus: str, pid: int | None) -> bool:
    """Whether the app's accessibility tree can be read yet (it joins the bus after it maps)."""

    async def read() -> bool:
        access = A11yAccess.atspi(session_bus)
        try:
            await (await access.client()).snapshot(pid or 0)
        except DeskrigError:
            return False
        finally:
            await access.close()
        return True

    return anyio.run(read)


@pytest.fixture(scope="module")
def app_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppRig]:
    tmp = tmp_path_factory.mktemp("observation")
    log = tmp / "green.log"
    app = color_app(TITLE, "#{:02x}{:02x}{:02x}".format(*GREEN), log, size="300x200", pos="100,120")
    with Rig(RigOptions(app=app)) as rig, open_desktop("x11", rig.display) as desktop:
        poll("the app to paint", lambda: read_events(log, "ready"))
        window = next(w for w in desktop.windows() if w.title == TITLE)
        poll(
            "the app's accessibility tree",
            lambda: tree_readable(rig.env["DBUS_SESSION_BUS_ADDRESS"], window.pid),
        )
        yield AppRig(rig, desktop, window.bounds, tmp)


@dataclass
class Looks:
    """How often the desktop's windows were listed, the recorder read an accessibility tree, and
    the desktop was asked where windows' accessibility coordinates start."""

    windows: int = 0
    trees: int = 0
    origins: int = 0


async def record_one(
    app_rig: AppRig, server: DeskrigServer, out: Path, tool: str, arguments: dict[str, Any], looks: Looks
) -> Path:
    """Record one call of ``tool`` into ``out`` while counting every look at the desktop."""
    (turn,) = await record_calls(app_rig, server, out, [(tool, arguments)], looks)
    return turn


async def record_calls(
    app_rig: AppRig,
    server: DeskrigServer,
    out: Path,
    calls: list[tuple[str, dict[str, Any]]],
    looks: Looks,
    settle_between: bool = False,
) -> list[Path]:
    """Record ``calls`` into ``out``, back to back (or, ``settle_between``, each after the one
    before has its "after" observation), while counting every look at the desktop; their turns."""
    registry: RecordingRegistry = registry_of(server.services)
    await anyio.to_thread.run_sync(registry.start_session, CLIENT, out, False)
    assert registry.a11y is not None
    client = await registry.a11y.client()
    desktop = app_rig.desktop
    list_windows, snapshot, a11y_origins = desktop.windows, client.snapshot, desktop.a11y_origins

    def counted_windows() -> Any:
        looks.windows += 1
        return list_windows()

    def counted_origins(pid: int) -> Any:
        looks.origins += 1
        return a11y_origins(pid)

    async def counted_snapshot(*args: Any, **kwargs: Any) -> Any:
        looks.trees += 1
        return await snapshot(*args, **kwargs)

    desktop.windows = counted_windows  # type: ignore[method-assign]
    desktop.a11y_origins = counted_origins  # type: ignore[method-assign]
    client.snapshot = counted_snapshot  # type: ignore[method-assign]
    try:
        for tool, arguments in calls:
            result = await server.call(server.tools[tool], arguments, CallInfo(ClientRef(CLIENT)))
            assert not result.is_error, result.structured_content
            if settle_between:
                await registry.settle()
        await registry.settle()
    finally:
        del desktop.windows, desktop.a11y_origins, client.snapshot
    state = await anyio.to_thread.run_sync(registry.stop_session, CLIENT)
    assert state.turns == len(calls) and state.last_error is None, state
    await registry.a11y.close()
    registry.close()
    return [out / turn_name(number) for number in range(1, len(calls) + 1)]


@pytest.mark.parametrize("by", ["point", "element"])
def test_recorded_click_observes_once_before_and_once_after(app_rig: AppRig, tmp_path: Path, by: str) -> None:
    """The resolver's window list is the "before" one; the "after" lists once; one tree each (and,
    for an element found by query, the one it was found in). On X11, where toolkits report screen
    pixels, no tree read waits on the desktop to ask where windows' coordinates start."""
    looks = Looks()
    window = next(w for w in app_rig.desktop.windows() if w.title == TITLE)
    if by == "point":
        arguments: dict[str, Any] = app_rig.inside()
    else:
        arguments = {"element": {"role": "frame", "pid": window.pid}}
    server = app_rig.server()
    turn = anyio.run(record_one, app_rig, server, tmp_path / "rec", "click", arguments, looks)
    assert (looks.windows, looks.trees, looks.origins) == (2, 2 if by == "point" else 3, 0)
    evidence = load_json(turn / "evidence.json")
    assert evidence["before.png"]["source"] == evidence["after.png"]["source"] == "window"
    assert evidence["before_state.json"]["status"] == evidence["after_state.json"]["status"] == "captured"


@pytest.mark.parametrize("case", ["back to back", "after settled", "another target"])
def test_back_to_back_actions_observe_once_between_them(
    app_rig: AppRig, tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clicks on the app's window, the second sent as soon as the first answered: the
    second's "before" observation is the first's "after" too (one window list and one tree
    fewer, and turn 2's before files are links of turn 1's after files). With the first's "after"
    taken before the second action (as when an agent paces its calls), or the second aimed at
    something else (the bare screen), each is observed on its own, as before."""
    monkeypatch.setattr(registry_module, "AFTER_CAPTURE_DELAY", 60.0)  # the second call comes first
    looks = Looks()
    inside = app_rig.inside()
    x, y = app_rig.bare_point()
    calls = [("click", inside), ("click", {"x": x, "y": y} if case == "another target" else inside)]
    server = app_rig.server()
    first, second = anyio.run(
        record_calls, app_rig, server, tmp_path / "rec", calls, looks, case == "after settled"
    )
    # The resolvers' lists are the "before" ones; each "after" taken on its own lists once.
    assert looks.windows == (3 if case == "back to back" else 4)
    if case == "back to back":
        assert looks.trees == 3
        for name, after in (("before.png", "after.png"), ("before_state.json", "after_state.json")):
            assert (second / name).stat().st_ino == (first / after).stat().st_ino, name
    elif case == "after settled":  # the second's before reads its tree, or syncs to take the first's over
        assert looks.trees >= 4
    for turn in (first, second):
        evidence = load_json(turn / "evidence.json")
        for name in ("before.png", "after.png"):
            assert evidence[name]["status"] == "captured", (turn.name, name, evidence[name])
    assert load_json(first / "evidence.json")["after_state.json"]["status"] == "captured"


def test_an_after_observation_no_action_claims_is_taken_after_the_delay(
    app_rig: AppRig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no next action and nothing waiting for the turns, a recorded action's turn is still
    written: its "after" observation is taken once AFTER_CAPTURE_DELAY has passed."""
    monkeypatch.setattr(registry_module, "AFTER_CAPTURE_DELAY", 0.01)
    server = app_rig.server()
    registry = registry_of(server.services)
    out = tmp_path / "rec"

    async def record() -> None:
        await _recorded_calls(server, out, [("click", app_rig.inside())])
        with anyio.fail_after(30):
            while not (out / "turn-00001").exists():  # written by the writer thread, never settled
                await anyio.sleep(0.02)

    try:
        anyio.run(record)
    finally:
        registry.close()
    assert load_json(out / "turn-00001" / "evidence.json")["after.png"]["status"] == "captured"


def test_a_tool_that_changes_the_desktop_without_a_target_waits_for_the_last_after(
    app_rig: AppRig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """focus_window (like launch_app, kill_app, run_command) has no target for the recorder to
    observe, so it claims no "after" observation; it still changes the desktop, so a recorded
    action's "after", awaited when focus_window is called, is taken before focus_window runs."""
    monkeypatch.setattr(registry_module, "AFTER_CAPTURE_DELAY", 600.0)  # nothing else takes it
    server = app_rig.server()
    registry = registry_of(server.services)
    out = tmp_path / "rec"
    window = next(w for w in app_rig.desktop.windows() if w.title == TITLE)
    observed = registry_module.capture_moment
    order: list[str] = []

    async def capture(*args: Any, **kwargs: Any) -> Any:
        order.append("observed")
        return await observed(*args, **kwargs)

    monkeypatch.setattr(registry_module, "capture_moment", capture)
    focus = server.tools["focus_window"]
    monkeypatch.setitem(
        server.tools, "focus_window", replace(focus, handler=_noting(focus.handler, order, "focused"))
    )

    async def record() -> None:
        await _recorded_calls(
            server, out, [("click", app_rig.inside()), ("focus_window", {"window_id": window.id})]
        )

    try:
        anyio.run(record)
    finally:
        registry.close()
    assert order == ["observed", "observed", "focused"]  # the click's before and after, then the focus


def _noting(handler: Any, order: list[str], note: str) -> Any:
    async def noted(*args: Any) -> Any:
        order.append(note)
        return await handler(*args)

    return noted


def test_a_turn_whose_claimed_after_failed_is_observed_on_its_own(
    app_rig: AppRig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second of two back-to-back clicks claims the first's "after" observation, and its own
    "before" one fails unexpectedly (the second goes unrecorded, its failure logged): the first
    turn still gets an "after" of its own."""
    monkeypatch.setattr(registry_module, "AFTER_CAPTURE_DELAY", 60.0)
    observed = registry_module.capture_moment
    observations: list[bool] = []

    async def second_fails(*args: Any, **kwargs: Any) -> Any:
        observations.append(True)
        if len(observations) == 2:
            raise RuntimeError("an unexpected failure")
        return await observed(*args, **kwargs)

    monkeypatch.setattr(registry_module, "capture_moment", second_fails)
    server = app_rig.server()
    registry = registry_of(server.services)
    out = tmp_path / "rec"

    async def record() -> None:
        await _recorded_calls(server, out, [("click", app_rig.inside())] * 2)
        await registry.settle()
        stopped = await anyio.to_thread.run_sync(registry.stop_session, CLIENT)
        assert stopped.turns == 1 and stopped.last_error is None, stopped

    try:
        anyio.run(record)
    finally:
        registry.close()
    assert len(observations) == 3  # the first's before, the second's failed before, the first's after
    evidence = load_json(out / "turn-00001" / "evidence.json")
    assert evidence["after.png"]["status"] == evidence["after_state.json"]["status"] == "captured"


def test_a_recording_being_stopped_answers_its_final_state(
    app_rig: AppRig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """get_recording_state while the client's recording is being stopped (a turn still being
    written) answers the state the stop ends with. The recording was then neither running nor
    stopped, and the answer said no recording at all: no folder, no turns, no end (seen under load
    on a recording stopped for idleness)."""
    writing, release = threading.Event(), threading.Event()
    write_turn = session_module.write_turn

    def held_write(*args: Any, **kwargs: Any) -> Any:
        writing.set()
        release.wait(30)
        return write_turn(*args, **kwargs)

    monkeypatch.setattr(session_module, "write_turn", held_write)
    server = app_rig.server()
    registry = registry_of(server.services)
    read = registry.settled_session_state

    async def read_as_the_write_resumes(client_id: str) -> Any:
        release.set()  # the turn's write takes far longer than a read that does not wait for it
        return await read(client_id)

    monkeypatch.setattr(registry, "settled_session_state", read_as_the_write_resumes)
    out = tmp_path / "rec"

    async def stop_and_read() -> Any:
        await _recorded_calls(server, out, [("click", app_rig.inside())])
        await anyio.to_thread.run_sync(writing.wait, 30)
        stopping = threading.Thread(target=registry.stop_session, args=(CLIENT,))
        stopping.start()
        assert registry.latest is not None
        poll("the stop to begin", lambda: not registry.latest.active)  # type: ignore[union-attr]
        (state,) = await _calls(server, [("get_recording_state", {})])
        await anyio.to_thread.run_sync(stopping.join)
        return state

    try:
        state = anyio.run(stop_and_read)
    finally:
        release.set()
        registry.close()
    assert (state["recording"], state["output_dir"], state["turns"], state["ended_by"]) == (
        False,
        str(out),
        1,
        "stop_recording",
    )


def answered_at_once(call: Coroutine[Any, Any, T]) -> T:
    """What ``call`` returns, checking that it returns on its first step: it never suspended (for
    a worker thread, or anything else)."""
    try:
        call.send(None)
    except StopIteration as answered:
        return answered.value  # type: ignore[no-any-return]
    call.close()
    raise AssertionError("the call suspended: it waited for something")


def test_the_recording_state_is_answered_without_a_thread_unless_a_stop_is_in_progress(
    app_rig: AppRig, tmp_path: Path
) -> None:
    """get_recording_state answers on the event loop, without waiting on a worker thread, when no
    stop is in progress: before any recording, while one runs, and once it is stopped. (It hopped
    to a thread on every call, to wait for a stop that was almost never there.)"""
    server = app_rig.server()
    registry = registry_of(server.services)
    call = CallInfo(ClientRef(CLIENT))

    async def state() -> dict[str, Any]:
        result = answered_at_once(get_recording_state(server.services, call, NoArguments()))
        return result.structured.model_dump()

    async def through_a_recording() -> list[dict[str, Any]]:
        states = [await state()]
        await anyio.to_thread.run_sync(registry.start_session, CLIENT, tmp_path / "rec", False)
        states.append(await state())
        await anyio.to_thread.run_sync(registry.stop_session, CLIENT)
        return [*states, await state()]

    try:
        blank, running, stopped = anyio.run(through_a_recording)
    finally:
        registry.close()
    assert (blank["recording"], blank["output_dir"]) == (False, None)
    assert (running["recording"], running["output_dir"]) == (True, str(tmp_path / "rec"))
    assert (stopped["recording"], stopped["ended_by"]) == (False, "stop_recording")


def test_recorded_states_read_the_tools_live_mirror_and_keep_no_snapshot(
    app_rig: AppRig, tmp_path: Path
) -> None:
    """The recorder reads the accessibility tree through the tools' client: the tree an agent's
    get_app_state fetched is the mirror the first turn's before-state reads (no second client, no
    second fetch), and however many turns are recorded, the agent's snapshot is not evicted."""
    server = app_rig.server()
    registry = registry_of(server.services)
    assert registry.a11y is server.services.a11y is not None
    store = registry.a11y.snapshots
    window = next(w for w in app_rig.desktop.windows() if w.title == TITLE)
    inside = app_rig.inside()
    turns = DEFAULT_CAPACITY // 2 + 1  # two trees a turn: more than the store holds, if they were kept

    async def record() -> str:
        (state,) = await _calls(server, [("get_app_state", {"pid": window.pid})])
        await anyio.to_thread.run_sync(registry.start_session, CLIENT, tmp_path / "rec", False)
        await _calls(server, [("click", inside)] * turns)
        await registry.settle()
        stopped = await anyio.to_thread.run_sync(registry.stop_session, CLIENT)
        assert stopped.turns == turns and stopped.last_error is None, stopped
        return str(state["snapshot_id"])

    agents = anyio.run(record)
    registry.close()
    assert store.get(agents).pid == window.pid and len(store) == 1
    first = load_json(tmp_path / "rec" / "turn-00001" / "before_state.json")
    assert first["pid"] == window.pid and first["elements"] and first["text"]
    assert first["source"] == "mirror", first["source"]


def test_blocked_window_is_blacked_out_in_recorded_images(app_rig: AppRig, tmp_path: Path) -> None:
    """A click on the bare screen while the app's window is blocked: both full-screen images of
    the turn show the window black, and the desktop was still looked at once before, once after."""
    unredacted = app_rig.desktop.capture(app_rig.window)
    assert unredacted.getpixel((10, 10))[:3] == GREEN  # what the blackout must hide
    looks = Looks()
    x, y = app_rig.bare_point()
    server = app_rig.server(blocked=[f"^{TITLE}$"])
    turn = anyio.run(record_one, app_rig, server, tmp_path / "rec", "click", {"x": x, "y": y}, looks)
    evidence = load_json(turn / "evidence.json")
    window = app_rig.window
    for name in ("before.png", "after.png"):
        with Image.open(turn / name) as image:
            pixels = image.convert("RGB").crop((window.x, window.y, window.right, window.bottom))
            assert pixels.getcolors() == [(window.width * window.height, (0, 0, 0))], name
        facts = evidence[name]
        assert facts["source"] == "screen" and facts.get("masked_windows") == 1, facts
    assert looks.windows == 2  # the blackout used the lists taken anyway


async def _recorded_calls(server: DeskrigServer, out: Path, calls: list[tuple[str, dict[str, Any]]]) -> None:
    """``calls``, made by a client whose recording (turn folders in ``out``) starts first."""
    await anyio.to_thread.run_sync(registry_of(server.services).start_session, CLIENT, out, False)
    await _calls(server, calls)


async def _calls(server: DeskrigServer, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    results = []
    for tool, arguments in calls:
        result = await server.call(server.tools[tool], arguments, CallInfo(ClientRef(CLIENT)))
        results.append(tool_error(result) if result.is_error else result.structured_content)
    return results


def test_an_app_with_a_blocked_window_shows_no_accessibility_tree(app_rig: AppRig) -> None:
    """Its tree (names, texts, values) would show what the blackout hides: get_app_state by pid or
    by window and an element target in it are refused; unblocked, the same calls read the tree."""
    window = next(w for w in app_rig.desktop.windows() if w.title == TITLE)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_app_state", {"pid": window.pid}),
        ("get_app_state", {"window_id": window.id}),
        ("click", {"element": {"role": "frame", "pid": window.pid}}),
    ]
    refused = anyio.run(_calls, app_rig.server(blocked=[f"^{TITLE}$"]), calls)
    for error in refused:
        assert error is not None and error["code"] == "SECURITY_ERROR", error
        assert error["details"] == {"pid": window.pid, "window_id": window.id}
    allowed = anyio.run(_calls, app_rig.server(), calls[:2])
    assert all(state["pid"] == window.pid and state["element_count"] > 0 for state in allowed), allowed
