"""replay_trajectory: a recorded trajectory, re-run, brings the app back to the recorded state."""

from __future__ import annotations

from typing import Any

from tests.recording.conftest import FormRig, Session, in_session
from tests.recording.test_turns import STALE_ELEMENT, element, turns


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
        final = await s.ok("get_app_state", {"pid": pid})
        # Change what the trajectory set, outside any recording.
        await s.ok("set_value", {"element": {"role": "text", "name": "Name", "pid": pid}, "value": "changed"})
        await s.ok("set_value", {"element": {"role": "slider", "pid": pid}, "value": 7})
        changed = await s.ok("get_app_state", {"pid": pid})
        await s.ok("start_recording", {"output_dir": str(replayed)})
        report = await s.ok("replay_trajectory", {"dir": str(recorded), "delay_ms": 50})
        stopped = await s.ok("stop_recording")
        after = await s.ok("get_app_state", {"pid": pid})
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
