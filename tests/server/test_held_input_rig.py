"""Held keys on a real rig, through real MCP clients over HTTP: the Tk form's key log sees a shift
held by key_down, and sees it released when the holding session disconnects, or when a stateless
client (whose disconnect cannot be seen) stays idle for the rig's held_input_idle_timeout."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client
from tests.polling import poll
from tests.rigprocs import open_dir
from tests.server.rigproc import FormRig, connect_stateless, read_events, start_form
from Xlib import X

from deskrig.client import connect
from deskrig.errors import tool_error

IDLE_TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def tk_form(backend: str) -> Iterator[FormRig]:
    flags = ["--backend", backend, "--held-input-idle-timeout", str(IDLE_TIMEOUT_S)]
    # open_dir: a sway rig run as root runs the form as an unprivileged user, who needs its log.
    with open_dir(f"deskrig-{backend}-held-input-") as tmp:
        form = start_form(tmp, "tk_form", "Held Tk", extra=flags)
        x, y = form.widget_center("entry")
        form.ok("click", {"x": x, "y": y})
        yield form
        form.rig.stop()


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, tool_error(result)
    return result.structured_content  # type: ignore[no-any-return]


def escape_state(form: FormRig) -> int:
    """Press Escape in the Tk entry (on a fresh session) and return the modifier state it carried."""
    keys = len(form_keys(form))
    form.ok("press_key", {"key": "Escape"})
    poll("Escape in the Tk entry", lambda: len(form_keys(form)) > keys)
    return int(form_keys(form)[-1]["state"])


def form_keys(form: FormRig) -> list[dict[str, Any]]:
    return [e for e in read_events(form.log, "key") if e["keysym"] == "Escape"]


def test_a_session_s_held_shift_is_released_when_it_disconnects(tk_form: FormRig) -> None:
    async def hold_and_go() -> None:
        async with connect(tk_form.rig.url, tk_form.rig.token) as client:
            held = await ok(client, "key_down", {"key": "shift"})
            assert held["detail"]["held_keys"] == ["Shift_L"]
            await ok(client, "press_key", {"key": "Escape"})

    keys = len(form_keys(tk_form))
    anyio.run(hold_and_go)
    # press_key returns once the key is sent; the form logs it when it has handled it.
    poll("Escape in the Tk entry", lambda: len(form_keys(tk_form)) > keys)
    assert form_keys(tk_form)[keys]["state"] & X.ShiftMask, "the key pressed while shift was held"
    assert not escape_state(tk_form) & X.ShiftMask, "the shift outlived its session"


def test_a_stateless_client_s_held_shift_is_released_after_its_idle_time(tk_form: FormRig) -> None:
    assert tk_form.rig.token is not None

    async def hold() -> None:
        async with connect_stateless(tk_form.rig.url, tk_form.rig.token) as client:
            await ok(client, "key_down", {"key": "shift"})

    anyio.run(hold)
    held_at = time.monotonic()
    still_held = escape_state(tk_form) & X.ShiftMask  # another client's key, within the idle time
    assert still_held or time.monotonic() - held_at >= IDLE_TIMEOUT_S, "released before its idle time"
    poll(
        "the shift released after its stateless client's idle time",
        lambda: not escape_state(tk_form) & X.ShiftMask,
    )
    error = tk_form.error("key_up", {"key": "shift"})
    assert error["code"] == "INVALID_ARGUMENT"


def test_key_up_of_a_key_not_held_is_refused_and_leaves_held_keys_down(tk_form: FormRig) -> None:
    async def hold_ctrl_then_release_shift() -> tuple[dict[str, Any] | None, int]:
        async with connect(tk_form.rig.url, tk_form.rig.token) as client:
            await ok(client, "key_down", {"key": "ctrl"})
            error = tool_error(await client.call_tool("key_up", {"key": "shift"}))
            keys = len(form_keys(tk_form))
            await ok(client, "press_key", {"key": "Escape"})
            await anyio.to_thread.run_sync(lambda: poll("Escape", lambda: len(form_keys(tk_form)) > keys))
            state = int(form_keys(tk_form)[-1]["state"])
            await ok(client, "key_up", {"key": "ctrl"})
            return error, state

    error, state = anyio.run(hold_ctrl_then_release_shift)
    assert error is not None and error["code"] == "INVALID_ARGUMENT" and error["remediation"]
    assert error["details"]["held_keys"] == ["Control_L"]
    assert state & X.ControlMask and not state & X.ShiftMask, "the refused key_up changed what is held"
