"""replay_trajectory: a recorded trajectory, re-run, brings the app back to the recorded state."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.recording.conftest import FormRig, Session, in_session, load_json
from tests.recording.helpers import STALE_ELEMENT, element, turns
from tests.server.rigproc import RigProcess, read_events, start_form


def app_view(state: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What the app shows, as its accessibility tree says: roles, names, texts and values."""
    return [
        (e["role"], e["name"], e.get("text"), (e.get("value") or {}).get("current"))
        for e in state["elements"]
    ]


def test_replay_reproduces_the_final_app_state(form_rig: FormRig) -> None:
    recorded = form_rig.allowed / "trajectory"
    replayed = form_rig.allowed / "replayed"
    pid = form_rig.pid
    x, y = form_rig.widget_center("entry")

    async def record_change_replay(s: Session) -> tuple[dict[str, Any], ...]:
        slider = await element(s, pid, "slider", "Volume")
        await s.ok("start_recording", {"output_dir": str(recorded)})
        await s.ok("click", {"x": x, "y": y})
        await s.ok("hotkey", {"keys": ["ctrl", "a"]})
        await s.ok("type_text", {"text": "Grüße, replay"})
        await s.ok("set_value", {"element": slider, "value": 42})
        await s.error("click", STALE_ELEMENT)
        await s.ok("stop_recording")
        final = await s.ok("get_app_state", {"pid": pid, "include_elements": True})
        # Change what the trajectory set, outside any recording.
        await s.ok("set_value", {"element": {"role": "text", "name": "Name", "pid": pid}, "value": "changed"})
        await s.ok("set_value", {"element": {"role": "slider", "pid": pid}, "value": 7})
        changed = await s.ok("get_app_state", {"pid": pid, "include_elements": True})
        await s.ok("start_recording", {"output_dir": str(replayed)})
        report = await s.ok("replay_trajectory", {"dir": str(recorded), "delay_ms": 50})
        stopped = await s.ok("stop_recording")
        after = await s.ok("get_app_state", {"pid": pid, "include_elements": True})
        return final, changed, report, stopped, after

    final, changed, report, stopped, after = in_session(form_rig.rig, record_change_replay)
    assert app_view(changed) != app_view(final)
    assert app_view(after) == app_view(final)
    assert [(s["tool"], s["status"]) for s in report["steps"]] == [
        ("click", "ok"),
        ("hotkey", "ok"),
        ("type_text", "ok"),
        ("set_value", "ok"),
        ("click", "skipped"),
    ]
    assert report["steps"][3]["element_resolved_by"] == "path"
    assert report["completed"] and (report["succeeded"], report["failed"], report["skipped"]) == (4, 0, 1)
    # The replay was recorded like any other actions.
    assert stopped["turns"] == 4 and len(turns(replayed)) == 4
    form_rig.wait_event("scale", lambda e: e["value"] == 42)


def record_entry_typing(form_rig: FormRig, out: Path) -> None:
    """Record three turns into ``out``: click the Name entry, type "hello", select all."""
    x, y = form_rig.widget_center("entry")

    async def record(s: Session) -> None:
        await s.ok("start_recording", {"output_dir": str(out)})
        await s.ok("click", {"x": x, "y": y})
        await s.ok("type_text", {"text": "hello"})
        await s.ok("hotkey", {"keys": ["ctrl", "a"]})
        assert (await s.ok("stop_recording"))["turns"] == 3

    in_session(form_rig.rig, record)
    assert all((turn / "action.sig").is_file() for turn in turns(out))


def rewrite_action(turn: Path, **changes: Any) -> None:
    action = load_json(turn / "action.json")
    (turn / "action.json").write_text(json.dumps({**action, **changes}))


# Each changes a copy of a three-turn recording and returns the first turn that no longer verifies.
def change_a_step(t: list[Path]) -> str:
    rewrite_action(t[1], arguments={"text": "echo pwned\n"})
    return t[1].name


def add_a_step(t: list[Path]) -> str:
    added = t[2].with_name("turn-00004")
    added.mkdir()
    (added / "action.json").write_text(
        json.dumps({"tool": "type_text", "arguments": {"text": "echo pwned\n"}})
    )
    return added.name


def add_a_step_with_a_copied_signature(t: list[Path]) -> str:
    added = t[2].with_name("turn-00004")
    shutil.copytree(t[2], added)
    rewrite_action(added, tool="type_text", arguments={"text": "echo pwned\n"})
    return added.name


def remove_a_middle_step(t: list[Path]) -> str:
    shutil.rmtree(t[1])
    return t[2].name


def swap_two_steps(t: list[Path]) -> str:
    t[0].rename(t[0].with_name("swap"))
    t[1].rename(t[0])
    t[0].with_name("swap").rename(t[1])
    return t[0].name


def drop_a_signature(t: list[Path]) -> str:
    (t[0] / "action.sig").unlink()
    return t[0].name


TAMPERINGS: list[Callable[[list[Path]], str]] = [
    change_a_step,
    add_a_step,
    add_a_step_with_a_copied_signature,
    remove_a_middle_step,
    swap_two_steps,
    drop_a_signature,
]


def test_replay_refuses_a_recording_changed_after_it_was_made(form_rig: FormRig) -> None:
    recorded = form_rig.allowed / "signed"
    record_entry_typing(form_rig, recorded)
    for tamper in TAMPERINGS:
        name = tamper.__name__
        copy = form_rig.allowed / f"tampered-{name}"
        shutil.copytree(recorded, copy)
        bad_turn = tamper(turns(copy))
        events = len(read_events(form_rig.log))
        error = form_rig.error("replay_trajectory", {"dir": str(copy), "delay_ms": 0})
        assert error["code"] == "SECURITY_ERROR", (name, error)
        assert bad_turn in [u["turn"] for u in error["details"]["unverified"]], (name, error)
        assert "nothing was replayed" in error["message"] and "accept_unsigned" in error["remediation"]
        assert len(read_events(form_rig.log)) == events, name  # not one step ran


def test_accept_unsigned_runs_unverified_steps_and_says_so(form_rig: FormRig) -> None:
    crafted = form_rig.allowed / "crafted"
    (crafted / "turn-00001").mkdir(parents=True)
    (crafted / "turn-00001" / "action.json").write_text(
        json.dumps({"tool": "press_key", "arguments": {"key": "Tab"}})
    )
    report = form_rig.ok("replay_trajectory", {"dir": str(crafted), "accept_unsigned": True})
    assert [(s["tool"], s["status"], s["verified"]) for s in report["steps"]] == [("press_key", "ok", False)]
    assert report["unverified"] == 1


def test_replay_runs_only_the_tools_declared_recorded(form_rig: FormRig) -> None:
    """focus_window changes the desktop but is not recorded (ToolSpec.recorded): replay skips it,
    like a read-only tool, and runs the recorded press_key."""
    crafted = form_rig.allowed / "undeclared"
    for number, tool in enumerate(["focus_window", "get_screen_size", "press_key"], start=1):
        (crafted / f"turn-0000{number}").mkdir(parents=True)
        arguments = {"key": "Tab"} if tool == "press_key" else {}
        action = json.dumps({"tool": tool, "arguments": arguments})
        (crafted / f"turn-0000{number}" / "action.json").write_text(action)
    report = form_rig.ok("replay_trajectory", {"dir": str(crafted), "accept_unsigned": True})
    assert [(s["tool"], s["status"], s.get("reason")) for s in report["steps"]] == [
        ("focus_window", "skipped", "not an action tool of this server"),
        ("get_screen_size", "skipped", "not an action tool of this server"),
        ("press_key", "ok", None),
    ]


@pytest.mark.parametrize(
    ("action", "field"),
    [
        ([{"tool": "click"}], "(action.json)"),
        ({"tool": "click", "arguments": [1, 2]}, "arguments"),
        (
            {"tool": "click", "arguments": {"element": {"role": "x"}}, "element": {"name": "Name"}},
            "element.role",
        ),
        ({"arguments": {}}, "tool"),
        ({"tool": "click", "is_error": "maybe"}, "is_error"),
    ],
)
def test_a_malformed_action_json_is_invalid_argument(form_rig: FormRig, action: Any, field: str) -> None:
    folder = form_rig.allowed / f"malformed-{uuid.uuid4().hex[:8]}"
    (folder / "turn-00001").mkdir(parents=True)
    (folder / "turn-00001" / "action.json").write_text(json.dumps(action))
    error = form_rig.error("replay_trajectory", {"dir": str(folder), "accept_unsigned": True})
    assert error["code"] == "INVALID_ARGUMENT", error
    assert [p["field"] for p in error["details"]["problems"]] == [field]
    assert "turn-00001/action.json" in error["message"]
    # Unsigned, it is refused for that first.
    assert form_rig.error("replay_trajectory", {"dir": str(folder)})["code"] == "SECURITY_ERROR"


def test_an_action_json_that_is_not_a_regular_file_is_refused_at_once(form_rig: FormRig) -> None:
    folder = form_rig.allowed / "fifo"
    (folder / "turn-00001").mkdir(parents=True)
    os.mkfifo(folder / "turn-00001" / "action.json")  # reading it would block forever
    error = form_rig.error("replay_trajectory", {"dir": str(folder), "accept_unsigned": True})
    assert error["code"] == "INVALID_ARGUMENT" and "not a regular file" in error["message"]


def test_rigs_sharing_a_key_file_replay_each_others_recordings(
    form_rig: FormRig, tmp_path_factory: pytest.TempPathFactory
) -> None:
    key = tmp_path_factory.mktemp("key") / "recording.key"
    key.write_text(secrets.token_hex(32) + "\n")
    key.chmod(0o600)
    shared = {"DESKRIG_RECORDING_KEY_FILE": str(key)}
    first = start_form(tmp_path_factory.mktemp("first"), "gtk_form", "GTK Form", env=shared)
    try:
        assert first.allowed is not None
        record_entry_typing(first, first.allowed / "made-by-first")
    finally:
        first.rig.stop()
    later = start_form(tmp_path_factory.mktemp("later"), "gtk_form", "GTK Form", env=shared)
    try:
        assert later.allowed is not None
        shutil.copytree(first.allowed / "made-by-first", later.allowed / "made-by-first")
        report = later.ok("replay_trajectory", {"dir": str(later.allowed / "made-by-first")})
        assert [s["status"] for s in report["steps"]] == ["ok", "ok", "ok"]
        assert all(s["verified"] for s in report["steps"]) and report["unverified"] == 0
    finally:
        later.rig.stop()
    # A rig with its own key (the default: random, in memory) does not take it.
    shutil.copytree(first.allowed / "made-by-first", form_rig.allowed / "made-by-first")
    error = form_rig.error("replay_trajectory", {"dir": str(form_rig.allowed / "made-by-first")})
    assert error["code"] == "SECURITY_ERROR"
    assert [u["turn"] for u in error["details"]["unverified"]] == ["turn-00001", "turn-00002", "turn-00003"]
    assert "another key" in error["details"]["unverified"][0]["problem"]


@pytest.mark.parametrize(("content", "problem"), [(None, "cannot read"), ("too short", "at least 16 bytes")])
def test_an_unusable_key_file_stops_the_rig_with_one_clear_line(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    key = tmp_path / "recording.key"
    if content is not None:
        key.write_text(content)
    rig = RigProcess(app=["xterm"], env={"DESKRIG_RECORDING_KEY_FILE": str(key)}).start(tmp_path, wait=False)
    assert rig.proc is not None and rig.proc.wait(timeout=60) == 2
    errors = [line for line in rig.stderr().splitlines() if line.startswith("deskrig: ")]
    assert problem in errors[0] and "Traceback" not in rig.stderr()
