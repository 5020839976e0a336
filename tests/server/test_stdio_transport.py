"""deskrig's own stdio transport (deskrig.stdio): a real ``deskrig serve --stdio`` spoken to in raw
bytes (lines split across writes, several in one, a line of megabytes, lines that are no JSON-RPC,
end of input) and through the MCP SDK's stdio client; where the SDK's transport defines what
happens (a bad line), a server on the SDK's transport is sent the same bytes and must answer the
same."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.message import SessionMessage
from tests.desktop.conftest import start_xvfb, stop_process
from tests.polling import poll

from deskrig.bench.reliability_rig import INITIALIZE
from deskrig.stdio import _LineWriter, message_line

DESKRIG = [str(Path(sys.executable).parent / "deskrig"), "serve", "--stdio"]
#: A bare server on the MCP SDK's stdio transport: what deskrig's must behave like.
SDK_SERVER = [
    sys.executable,
    "-c",
    "import anyio\n"
    "from mcp.server.lowlevel import Server\n"
    "from mcp.server.stdio import stdio_server\n"
    "async def main():\n"
    "    server = Server('sdk')\n"
    "    async with stdio_server() as (read, write):\n"
    "        await server.run(read, write, server.create_initialization_options())\n"
    "anyio.run(main)\n",
]
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def ping(request_id: int, pad: int = 0) -> dict[str, Any]:
    """A ping, padded with ``pad`` bytes of metadata to make its line long."""
    params = {"_meta": {"pad": "x" * pad}} if pad else {}
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping", "params": params}


@pytest.fixture(scope="module")
def display(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    xvfb, name = start_xvfb(tmp_path_factory.mktemp("xvfb"))
    yield name
    stop_process(xvfb)


#: How long a test waits for an answer or an exit: a broken transport fails, it does not hang.
DEADLINE_S = 60.0


class Peer:
    """A stdio server spawned with pipes, written to in raw bytes."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self._pending = b""

    def write(self, *chunks: bytes) -> None:
        """Each chunk in a write of its own."""
        for chunk in chunks:
            self.stdin.write(chunk)
            self.stdin.flush()

    def answer(self) -> dict[str, Any]:
        deadline = time.monotonic() + DEADLINE_S
        while b"\n" not in self._pending:
            ready = select.select([self.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]
            assert ready, f"no whole line within {DEADLINE_S} s: {self._pending[:200]!r}"
            chunk = os.read(self.stdout.fileno(), 1 << 20)
            assert chunk, f"stdout ended: {self._pending[:200]!r}"
            self._pending += chunk
        read, _, self._pending = self._pending.partition(b"\n")
        answer: dict[str, Any] = json.loads(read)
        return answer

    def hang_up(self) -> tuple[int, bytes]:
        """End of input: the exit status and whatever came on stdout after."""
        try:
            rest, _ = self.proc.communicate(timeout=DEADLINE_S)  # closes stdin
            return self.proc.returncode, self._pending + rest
        finally:
            stop_process(self.proc)


@pytest.fixture
def deskrig(display: str, tmp_path: Path) -> Iterator[Peer]:
    peer = Peer(DESKRIG, {**os.environ, "DISPLAY": display, "HOME": str(tmp_path)})
    yield peer
    stop_process(peer.proc)


def test_lines_split_across_writes_and_several_in_one_write(deskrig: Peer) -> None:
    hello = line(INITIALIZE)
    deskrig.write(hello[:7], hello[7:40], hello[40:])
    assert deskrig.answer()["result"]["serverInfo"]["name"] == "deskrig"
    deskrig.write(line(INITIALIZED) + line(ping(2)) + line(ping(3))[:5], line(ping(3))[5:])
    assert [deskrig.answer()["id"], deskrig.answer()["id"]] == [2, 3]
    assert deskrig.hang_up() == (0, b"")


def test_a_line_of_megabytes_arrives_whole(deskrig: Peer) -> None:
    deskrig.write(line(INITIALIZE))
    deskrig.answer()
    big = line(ping(2, pad=5_000_000))
    deskrig.write(line(INITIALIZED), big[: len(big) // 3], big[len(big) // 3 :] + line(ping(3)))
    assert [deskrig.answer()["id"], deskrig.answer()["id"]] == [2, 3]
    assert deskrig.hang_up() == (0, b"")


@pytest.mark.parametrize("argv", [DESKRIG, SDK_SERVER], ids=["deskrig", "sdk"])
def test_lines_that_are_no_message_are_answered_as_the_sdk_answers_them(
    argv: list[str], display: str, tmp_path: Path
) -> None:
    """Not JSON, not JSON-RPC, not UTF-8: the server carries on, and the next request is answered."""
    peer = Peer(argv, {**os.environ, "DISPLAY": display, "HOME": str(tmp_path)})
    peer.write(line(INITIALIZE))
    assert peer.answer()["id"] == 1
    peer.write(line(INITIALIZED), b"{not json\n", b'{"jsonrpc": "2.0", "id": 7}\n', b'{"a": "\xff"}\n', b"\n")
    peer.write(line(ping(2)))
    assert peer.answer() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert peer.hang_up() == (0, b"")


def test_the_sdk_client_over_deskrig_transport(display: str, tmp_path: Path) -> None:
    """The SDK's client: tools, a screenshot, a 5 MB clipboard both ways; closing it ends the server."""
    text = "0123456789abcdef" * (5_000_000 // 16)
    params = StdioServerParameters(
        command=DESKRIG[0], args=DESKRIG[1:], env={**os.environ, "DISPLAY": display, "HOME": str(tmp_path)}
    )

    async def run() -> tuple[int, dict[str, Any], str]:
        with anyio.fail_after(2 * DEADLINE_S):
            return await calls()

    async def calls() -> tuple[int, dict[str, Any], str]:
        async with Client(params) as client:
            tools = await client.list_tools()
            shot = await client.call_tool("screenshot_screen", {"format": "jpeg"})
            assert not shot.is_error, shot
            put = await client.call_tool("set_clipboard", {"text": text})
            assert not put.is_error, put
            got = await client.call_tool("get_clipboard", {})
            return len(tools.tools), shot.structured_content or {}, (got.structured_content or {})["text"]

    tools, shot, clipboard = anyio.run(run)
    assert tools > 20
    assert (shot["width"], shot["height"], shot["format"]) == (1280, 800, "jpeg")
    assert clipboard == text


def test_files_for_stdin_and_stdout(display: str, tmp_path: Path) -> None:
    """Regular files, which the event loop's selector cannot wait for, are read and written as they
    are: answers to a file (a 2 MB line among them), requests from one (its end ends the server at
    once, and with it whatever is still being answered, as on the SDK's transport)."""
    env = {**os.environ, "DISPLAY": display, "HOME": str(tmp_path)}
    answers = tmp_path / "answers.jsonl"
    with answers.open("wb") as stdout:
        server = subprocess.Popen(
            DESKRIG, stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.DEVNULL, env=env
        )
        assert server.stdin is not None
        server.stdin.write(
            line(INITIALIZE) + line(INITIALIZED) + line(ping(2, pad=2_000_000)) + line(ping(3))
        )
        server.stdin.flush()

        def answered() -> list[int] | None:
            ids = [
                json.loads(answer)["id"]
                for answer in answers.read_bytes().splitlines(keepends=True)
                if answer.endswith(b"\n")
            ]
            return ids if len(ids) == 3 else None

        try:
            assert poll("three answers in the file", answered) == [1, 2, 3]
            server.stdin.close()
            assert server.wait(timeout=DEADLINE_S) == 0
        finally:
            stop_process(server)
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(line(INITIALIZE))
    with requests.open("rb") as stdin:
        done = subprocess.run(DESKRIG, stdin=stdin, capture_output=True, env=env, timeout=DEADLINE_S)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["serverInfo"]["name"] == "deskrig"


def fill(pipe: int) -> int:
    """Fill the non-blocking ``pipe`` up; how many bytes it took."""
    filled = 0
    while True:
        try:
            filled += os.write(pipe, bytes(1 << 16))
        except BlockingIOError:
            return filled


def read_exactly(pipe: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        data += os.read(pipe, size - len(data))
    return data


@pytest.mark.parametrize("full_at_first", [False, True], ids=["room for a part", "full at first"])
def test_a_line_begun_is_written_whole_though_its_sender_is_cancelled(full_at_first: bool) -> None:
    """A sender cancelled while its line waits for the client to read on (a progress notification
    of a request the client cancels) still finishes the line: half of one would break the rest.
    The pipe has room for a part of the line, or none until the client reads what fills it."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    message = types.JSONRPCResponse(jsonrpc="2.0", id=1, result={"pad": "x" * 3_000_000})  # > a pipe
    writer = _LineWriter(write_end, None)
    filler = fill(write_end) if full_at_first else 0
    written: list[bytes] = []

    def read_to_the_end() -> bytes:
        with os.fdopen(read_end, "rb") as pipe:
            return pipe.read()

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            sending = anyio.CancelScope()

            async def send() -> None:
                with sending:
                    await writer.send(SessionMessage(message))
                os.close(write_end)  # the line is out, or given up: the client reads to the end

            tg.start_soon(send)
            await anyio.wait_all_tasks_blocked()  # waiting for room
            assert read_exactly(read_end, filler) == bytes(filler)  # room
            await anyio.wait_readable(read_end)  # the line is begun
            await anyio.wait_all_tasks_blocked()  # and waits for room again
            sending.cancel()
            written.append(await anyio.to_thread.run_sync(read_to_the_end))

    anyio.run(main)
    assert written == [message_line(message) + b"\n"]
