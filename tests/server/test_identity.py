"""Client identities on a real rig: the rate limit, recordings and the audit log follow the
token's identity (and the MCP session within it), for session and stateless clients alike."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from tests.server.rigproc import DESKRIG, RigProcess, connect_stateless

from deskrig.client import connect
from deskrig.errors import tool_error

REGION = {"x": 0, "y": 0, "width": 8, "height": 8}
ALICE, BOB = "alice-secret-1", "bob-secret-2"


async def capture(client: Client) -> Any:
    return await client.call_tool("screenshot_region", REGION)


def test_new_sessions_do_not_reset_the_rate_limit(tmp_path: Path) -> None:
    # One token, so one identity: two handshake-era sessions and a stateless client share its
    # budget of three captures a minute.
    rig = RigProcess(app=["xterm"], extra=["--max-captures-per-minute", "3"]).start(tmp_path)
    assert rig.token is not None
    token = rig.token

    async def run() -> list[Any]:
        results = []
        for _ in range(2):
            async with connect(rig.url, token) as client:
                results.append(await capture(client))
        async with connect_stateless(rig.url, token) as client:
            results += [await capture(client), await capture(client)]
        return results

    try:
        results = anyio.run(run)
    finally:
        rig.stop()
    assert [r.is_error for r in results] == [False, False, False, True]
    assert (tool_error(results[-1]) or {}).get("code") == "RATE_LIMIT_EXCEEDED"


def test_named_identities_have_their_own_limit_and_audit_lines(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    extra = ["--max-captures-per-minute", "2", "--token", f"alice={ALICE}", "--token", f"bob={BOB}"]
    rig = RigProcess(app=["xterm"], extra=[*extra, "--audit-log", str(audit)]).start(tmp_path)

    async def run() -> dict[str, list[bool]]:
        outcomes: dict[str, list[bool]] = {"alice": [], "bob": []}
        async with connect(rig.url, ALICE) as alice:
            outcomes["alice"].append((await capture(alice)).is_error)
        async with connect_stateless(rig.url, ALICE) as alice:
            outcomes["alice"] += [(await capture(alice)).is_error, (await capture(alice)).is_error]
        async with connect(rig.url, BOB) as bob:
            outcomes["bob"] += [(await capture(bob)).is_error, (await capture(bob)).is_error]
        return outcomes

    try:
        outcomes = anyio.run(run)
    finally:
        rig.stop()
    assert outcomes == {"alice": [False, False, True], "bob": [False, False]}
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["identity"], e["outcome"]) for e in lines] == [
        ("alice", "ok"),
        ("alice", "ok"),
        ("alice", "error"),
        ("bob", "ok"),
        ("bob", "ok"),
    ]
    alice_session, stateless, _, bob_session, _ = (e["session"] for e in lines)
    assert alice_session and bob_session and alice_session != bob_session
    assert stateless is None  # the 2026-07-28 protocol has no session
    assert lines[0]["client"] == f"alice/{alice_session}" and lines[1]["client"] == "alice"


def test_stateless_recordings_are_per_identity_and_end_when_idle(tmp_path: Path) -> None:
    saves = tmp_path / "home" / "deskrig"
    extra = ["--recording-idle-timeout", "2", "--token", f"alice={ALICE}", "--token", f"bob={BOB}"]
    rig = RigProcess(app=["xterm"], extra=extra).start(tmp_path)

    async def run() -> dict[str, dict[str, Any]]:
        async with connect_stateless(rig.url, ALICE) as alice, connect_stateless(rig.url, BOB) as bob:
            clients = {"alice": alice, "bob": bob}

            async def state(name: str) -> dict[str, Any]:
                return (await clients[name].call_tool("get_recording_state", {})).structured_content

            # Each identity's calls back to back: another's calls between them count towards its
            # 2 s of idleness, which ran out under load (Alice's recording seen stopped).
            for name, xs in [("alice", [10]), ("bob", [20, 30])]:
                result = await clients[name].call_tool("start_recording", {"output_dir": str(saves / name)})
                assert not result.is_error, result.structured_content
                for x in xs:
                    assert not (await clients[name].call_tool("move_cursor", {"x": x, "y": 10})).is_error
                running = await state(name)
                assert running["recording"] and running["output_dir"] == str(saves / name), running

            ended: dict[str, dict[str, Any]] = {}
            with anyio.fail_after(15):  # 2 s idle timeout; reading the state is not activity
                for name in clients:
                    while (ended_state := await state(name))["recording"]:
                        await anyio.sleep(0.25)
                    ended[name] = ended_state
            return ended

    try:
        ended = anyio.run(run)
    finally:
        rig.stop()
    # Bob's start did not end Alice's recording (it would say restarted): each ended idle, in its own folder.
    assert {name: (s["ended_by"], s["output_dir"], s["turns"]) for name, s in ended.items()} == {
        "alice": ("idle_timeout", str(saves / "alice"), 1),
        "bob": ("idle_timeout", str(saves / "bob"), 2),
    }
    turns = {name: sorted(p.name for p in (saves / name).iterdir()) for name in ("alice", "bob")}
    assert turns == {"alice": ["turn-00001"], "bob": ["turn-00001", "turn-00002"]}
    assert json.loads((saves / "bob" / "turn-00002" / "action.json").read_text())["client_id"] == "bob"


def test_conflicting_tokens_are_refused_at_start_up(tmp_path: Path) -> None:
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("# CI agents\nalice = s3cret-a\n\nbob=s3cret-b\n")
    tokens_file.chmod(0o644)
    cases = [
        (["--token", "alice=one", "--token", "alice=two"], "identity 'alice' is given more than one token"),
        (["--token", "alice=same", "--token", "bob=same"], "identity 'bob' has the same token as another"),
        (["--tokens-file", str(tokens_file)], "unsafe permissions 0644"),
    ]
    for flags, message in cases:
        result = subprocess.run(
            [*DESKRIG, "rig", "run", "--http", "127.0.0.1:9", *flags, "--", "xterm"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, (flags, result.stderr)
        assert message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and result.stdout == ""
    # Fixed permissions: the file's identities are served.
    tokens_file.chmod(0o600)
    rig = RigProcess(app=["xterm"], extra=["--tokens-file", str(tokens_file)]).start(tmp_path)
    try:
        assert not rig_call_as(rig, "s3cret-b").is_error
    finally:
        rig.stop()


def rig_call_as(rig: RigProcess, token: str) -> Any:
    async def run() -> Any:
        async with connect(rig.url, token) as client:
            return await client.call_tool("get_screen_size", {})

    return anyio.run(run)
