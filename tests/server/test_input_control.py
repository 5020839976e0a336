"""Long input on a real rig: cancelled by its client or its disconnect, bounded lock waits
(BUSY), and progress notifications."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from tests.polling import poll
from tests.server.rigproc import INITIALIZE, FormRig, connect_stateless, start_form

from deskrig.client import connect
from deskrig.errors import tool_error

#: The schema's maximum: typing it all takes minutes.
LONG_TEXT = "a" * 100_000
#: Typed after a cancelled ``type_text``, one call each: none is in the long text.
MARKERS = ("X", "Y")
ALICE, BOB = "alice-secret-1", "bob-secret-2"
LOCK_TIMEOUT_S = 1.0
#: Longer than a wait for the input lock takes, far shorter than typing LONG_TEXT: a wait for
#: the lock without bound would outlast it.
LOCK_WAIT_LIMIT_S = 30.0


@pytest.fixture(scope="module")
def form(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FormRig]:
    tmp = tmp_path_factory.mktemp("input-control")
    flags = [
        "--input-lock-timeout",
        str(LOCK_TIMEOUT_S),
        "--token",
        f"alice={ALICE}",
        "--token",
        f"bob={BOB}",
    ]
    rig = start_form(tmp, "gtk_form", "Input Control", extra=flags)
    yield rig
    rig.rig.stop()


@pytest.fixture
def entry(form: FormRig) -> FormRig:
    """The form with its entry focused and emptied."""
    x, y = form.widget_center("entry")
    form.ok("click", {"x": x, "y": y})
    form.ok("hotkey", {"keys": ["ctrl", "a"]})
    form.ok("press_key", {"key": "BackSpace"})
    poll("an empty entry", lambda: typed_length(form) == 0)
    return form


def typed_length(form: FormRig) -> int:
    """Characters in the entry, from the last line of the form's log (it logs every change)."""
    last = form.last("entry")
    return len(last["text"]) if last else 0


def typing_started(form: FormRig) -> None:
    """Wait until the entry shows typed text."""
    poll("typing to start", lambda: typed_length(form) > 0)


def assert_typing_stopped(form: FormRig) -> None:
    """The cancelled typing stopped short of the whole text: markers typed next (each call takes
    the input lock, which typing holds while it types, or fails with BUSY after the lock's
    timeout) follow the last character it delivered, one right after the other."""
    typed = ""
    for marker in MARKERS:
        typed_next = form.call("type_text", {"text": marker})
        assert not typed_next.is_error, f"the typing held the input on: {tool_error(typed_next)}"
        typed = form.wait_event("entry", lambda e, marker=marker: e["text"].endswith(marker))["text"]
    delivered = typed.removesuffix("".join(MARKERS))
    assert typed.endswith("".join(MARKERS)), f"typing went on between the markers: {typed[-20:]!r}"
    assert 0 < len(delivered) < len(LONG_TEXT) and delivered == LONG_TEXT[: len(delivered)]


async def type_long(client: Client) -> None:
    """Type LONG_TEXT, which takes minutes: a test cancels the call."""
    await client.call_tool("type_text", {"text": LONG_TEXT})
    raise AssertionError("type_text of 100,000 characters returned")


async def type_until_cancelled(client: Client, form: FormRig) -> None:
    """Type LONG_TEXT, and cancel the call once the entry shows some of it."""
    async with anyio.create_task_group() as typing:
        typing.start_soon(type_long, client)
        await anyio.to_thread.run_sync(typing_started, form)
        typing.cancel_scope.cancel()


async def next_input_is_taken(client: Client) -> None:
    """The client's next input is not refused BUSY: nothing holds the input lock past its timeout."""
    result = await client.call_tool("press_key", {"key": "End"})
    assert not result.is_error, result.structured_content


Connect = Callable[[str, str], Any]


@pytest.mark.parametrize("connector", [connect, connect_stateless], ids=["session", "stateless"])
def test_long_type_text_stops_when_its_client_cancels(entry: FormRig, connector: Connect) -> None:
    # Cancelling the call (MCP notifications/cancelled on a session, closing the request's
    # stream on the stateless protocol) stops the typing while the client stays connected.
    async def run() -> None:
        async with connector(entry.rig.url, ALICE) as client:
            await type_until_cancelled(client, entry)
            await anyio.to_thread.run_sync(assert_typing_stopped, entry)
            await next_input_is_taken(client)

    anyio.run(run)


def test_long_type_text_stops_when_its_client_disconnects(entry: FormRig) -> None:
    # A handshake-era client whose HTTP connection drops mid-call, without cancelling or ending
    # its session: the call's typing stops.
    headers = {
        "authorization": f"Bearer {ALICE}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
    }
    with httpx.Client(base_url=entry.rig.base, headers=headers, timeout=10) as http:
        opened = http.post("/mcp", json=INITIALIZE)
        headers = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "type_text", "arguments": {"text": LONG_TEXT}},
        }
        with pytest.raises(httpx.ReadTimeout):
            http.post("/mcp", json=call, headers=headers, timeout=2.0)  # the client gives up
        assert_typing_stopped(entry)


def test_input_waits_for_other_clients_input_only_so_long(entry: FormRig) -> None:
    async def run() -> tuple[Any, float]:
        async with connect(entry.rig.url, ALICE) as alice, connect(entry.rig.url, BOB) as bob:
            async with anyio.create_task_group() as typing:
                typing.start_soon(type_long, alice)
                await anyio.to_thread.run_sync(typing_started, entry)
                started = time.monotonic()
                with anyio.fail_after(LOCK_WAIT_LIMIT_S):
                    refused = await bob.call_tool("press_key", {"key": "End"})
                waited = time.monotonic() - started
                typing.cancel_scope.cancel()
            await next_input_is_taken(bob)
        return refused, waited

    refused, waited = anyio.run(run)
    assert refused.is_error
    error = tool_error(refused)
    assert error is not None
    assert error["code"] == "BUSY", error
    assert error["details"]["holder"].startswith("alice/")  # identity and session of the typist
    assert error["remediation"]
    assert error["details"]["waited_seconds"] == LOCK_TIMEOUT_S
    assert waited >= LOCK_TIMEOUT_S - 0.1, "refused at once, not after the lock's timeout"  # load only adds


@pytest.mark.parametrize("connector", [connect, connect_stateless], ids=["session", "stateless"])
def test_long_type_text_reports_progress(entry: FormRig, connector: Connect) -> None:
    text = "b" * 1500
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async def run() -> Any:
        async with connector(entry.rig.url, ALICE) as client:
            call: Callable[..., Awaitable[Any]] = client.call_tool
            return await call("type_text", {"text": text, "delay_ms": 1}, progress_callback=on_progress)

    result = anyio.run(run)
    assert not result.is_error, result.structured_content
    assert entry.wait_event("entry", lambda e: len(e["text"]) == len(text))
    assert len(reports) >= 2, reports
    done = [progress for progress, _, _ in reports]
    assert done == sorted(done) and done[0] > 0 and done[-1] <= len(text)
    assert all(total == len(text) for _, total, _ in reports)
    assert reports[0][2] == f"{int(done[0])} of {len(text)} characters typed"


def test_a_stopping_rig_does_not_wait_for_long_input(tmp_path: Path) -> None:
    form = start_form(tmp_path, "gtk_form", "Stopping")
    x, y = form.widget_center("entry")
    form.ok("click", {"x": x, "y": y})

    async def type_until_stopped() -> None:
        with contextlib.suppress(Exception):  # the rig goes away under the call
            async with connect(form.rig.url, form.rig.token) as client:
                await type_long(client)

    async def run() -> int:
        async with anyio.create_task_group() as typing:
            typing.start_soon(type_until_stopped)
            await anyio.to_thread.run_sync(typing_started, form)
            # Typing it all takes minutes: a stop that waited for it would outlast stop()'s wait.
            return await anyio.to_thread.run_sync(form.rig.stop)  # SIGTERM

    try:
        status = anyio.run(run)
    finally:
        assert form.rig.proc is not None
        if form.rig.proc.poll() is None:
            form.rig.stop(signal.SIGKILL)
    assert status == 0
    form.rig.assert_exit_not_held("a long type_text")
    assert 0 < typed_length(form) < len(LONG_TEXT)
