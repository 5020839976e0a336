"""What every part of the reliability suite shares: a real rig in a subprocess, one timed tool call
classified as the client saw it, and the tally of those outcomes.

A :class:`BenchRig` is ``deskrig rig run --http 127.0.0.1:PORT`` in its own session, with a private
``HOME`` (its allowed directory) and a private ``TMPDIR`` (so the ``deskrig-*`` dirs it leaves behind
are its own, not another rig's on the same machine). It binds loopback only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent
from pydantic import BaseModel, Field

from deskrig.client import connect
from deskrig.procs import ProcEntry, process_family, read_proc

#: The rig's app for fuzz, load and faults: a GTK app with a large accessibility tree.
GTK_APP = ["gtk3-widget-factory"]
READY_TIMEOUT = 60.0

OutcomeKind = Literal["ok", "error", "hang", "protocol"]

#: A raw JSON-RPC ``initialize`` request, for speaking HTTP to a rig without an MCP client.
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "deskrig-tests", "version": "1"},
    },
}


def free_port() -> int:
    """A port that is free now, below Linux's ephemeral range (32768-60999): a port the kernel hands
    out for outgoing connections can be taken by any client between this check and the server's bind."""
    for _ in range(200):
        port = random.randrange(20000, 32768)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32767")


def rss_kib(pid: int) -> int | None:
    """Resident set size of ``pid`` from /proc (psutil is not a dependency)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


@dataclass
class BenchRig:
    """One ``deskrig rig run --http`` subprocess on loopback, with its own HOME and TMPDIR."""

    app: list[str]
    extra: list[str] = field(default_factory=list)
    token: str = field(default_factory=lambda: os.urandom(12).hex())
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="deskrig-bench-")))
    leader: ProcEntry | None = None
    #: The rig's processes as /readyz listed them once it was up: each runs in a session of its
    #: own, so they are followed by pid, not found by the runner's session.
    known: set[int] = field(default_factory=set)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def allowed(self) -> Path:
        """The rig's default allowed directory (``~/deskrig`` of its HOME)."""
        return self.home / "deskrig"

    @property
    def tmpdir(self) -> Path:
        return self.root / "tmp"

    @property
    def stderr_path(self) -> Path:
        return self.root / "rig.stderr"

    def start(self) -> BenchRig:
        self.allowed.mkdir(parents=True)
        self.tmpdir.mkdir()
        deskrig = str(Path(sys.executable).parent / "deskrig")
        argv = [deskrig, "rig", "run", "--http", f"127.0.0.1:{self.port}", "--token", self.token]
        argv += [*self.extra, "--", *self.app]
        env = {**os.environ, "HOME": str(self.home), "TMPDIR": str(self.tmpdir)}
        with self.stderr_path.open("wb") as stderr:
            # Its own session: the rig's whole family is found by session id after a kill -9.
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                start_new_session=True,
            )
        self.leader = read_proc(self.proc.pid)
        self.wait_ready()
        self.known.update(self.pids().values())
        return self

    def readyz(self, token: bool = True) -> tuple[int, dict[str, Any]] | None:
        """(status, body) of ``/readyz``, or None when nothing answers."""
        headers = {"Authorization": f"Bearer {self.token}"} if token else {}
        request = urllib.request.Request(f"{self.base}/readyz", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:  # 503 while not ready; its body says why
            body = _json_or_none(exc.read().decode(errors="replace"))
            return exc.code, body if isinstance(body, dict) else {}
        except (OSError, ValueError):
            return None

    def wait_ready(self) -> dict[str, Any]:
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the rig exited with {self.proc.returncode}:\n{self.stderr_tail()}")
            answer = self.readyz()
            if answer is not None and answer[0] == 200:
                return answer[1]
            time.sleep(0.1)
        raise RuntimeError(f"the rig was not ready within {READY_TIMEOUT:g} s:\n{self.stderr_tail()}")

    def pids(self) -> dict[str, int]:
        """Process name -> pid as the rig started them (xvfb, wm, dbus, at-spi, app), plus the server."""
        answer = self.readyz()
        assert self.proc is not None
        named = {} if answer is None else answer[1].get("details", {}).get("pids", {})
        if not named:
            raise RuntimeError(f"the rig's /readyz lists no pids (answer: {answer})")
        return {"server": self.proc.pid, **{str(k): int(v) for k, v in named.items()}}

    def app_pid(self) -> int:
        return self.pids()["app"]

    def server_rss_kib(self) -> int | None:
        assert self.proc is not None
        return rss_kib(self.proc.pid)

    def stderr_tail(self, lines: int = 15) -> str:
        text = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def family(self) -> dict[int, ProcEntry]:
        """Live processes of this rig: the runner's session, its known processes, their descendants."""
        if self.leader is None:
            return {}
        family = process_family(self.leader, self.known)
        self.known.update(family)
        return family

    def leftover_dirs(self) -> list[str]:
        """``deskrig-*`` dirs the rig left in its TMPDIR."""
        if not self.tmpdir.exists():
            return []
        return sorted(p.name for p in self.tmpdir.iterdir() if p.name.startswith("deskrig-"))

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM the runner if it still runs; its exit status (None if it had to be killed)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def stop_and_leftovers(self) -> tuple[int | None, list[str]]:
        """Stop the rig; its exit status and the processes of its family still alive a second later."""
        status = self.stop()
        time.sleep(1.0)  # death signals reach the children
        return status, [describe_process(pid) for pid in self.family()]

    def cleanup(self) -> None:
        """Stop the rig, SIGKILL whatever of its family is still alive, and remove its dirs."""
        if self.proc is not None:
            self.stop()
        for pid in self.family():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


def describe_process(pid: int) -> str:
    try:
        return f"{Path(f'/proc/{pid}/comm').read_text().strip()} ({pid})"
    except OSError:
        return str(pid)


class Outcome(BaseModel):
    """One tool call as its client saw it."""

    tool: str
    kind: OutcomeKind
    #: The error code for ``error``; the exception's name or JSON-RPC code for ``protocol``.
    code: str | None = None
    ms: float
    #: For errors: whether the result matched the tool's outputSchema (a strict client checks).
    schema_valid: bool | None = None


def error_code(structured: Any, text: str | None) -> str:
    """The error code of a failed result, wherever the tool's error shape keeps it."""
    for body in (structured, _json_or_none(text)):
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict) and isinstance(error.get("code"), str):
                return str(error["code"])
            if isinstance(body.get("code"), str):
                return str(body["code"])
    return "(no code)"


def _json_or_none(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


async def call_once(
    client: Client, tool: str, arguments: dict[str, Any], timeout: float, output_schemas: dict[str, Any]
) -> Outcome:
    """Call ``tool``; a call unanswered after ``timeout`` seconds is a hang."""
    started = time.perf_counter()

    def done(kind: OutcomeKind, code: str | None = None, schema_valid: bool | None = None) -> Outcome:
        ms = (time.perf_counter() - started) * 1000
        return Outcome(tool=tool, kind=kind, code=code, ms=ms, schema_valid=schema_valid)

    try:
        with anyio.fail_after(timeout):
            result = await client.call_tool(tool, arguments)
    except TimeoutError:
        return done("hang")
    except MCPError as exc:
        return done("protocol", f"JSON-RPC {exc.code}")
    except RuntimeError as exc:
        # The client checks a result's structured content against the tool's outputSchema.
        off_schema = str(exc).startswith("Invalid structured content")
        return done("protocol", "result off outputSchema" if off_schema else type(exc).__name__)
    except Exception as exc:  # whatever else the client library raised: transport, decoding
        return done("protocol", type(exc).__name__)
    if not result.is_error:
        return done("ok")
    text = next((block.text for block in result.content if isinstance(block, TextContent)), None)
    schema = output_schemas.get(tool)
    # An error result without structured content carries its error in text: nothing to check.
    structured = result.structured_content
    valid = None if schema is None or structured is None else _matches(structured, schema)
    return done("error", error_code(result.structured_content, text), valid)


async def call_all(
    rig: BenchRig,
    calls: list[tuple[str, dict[str, Any]]],
    timeout: float,
    record: Callable[[int, Outcome], None],
    deadline: float = math.inf,
) -> int:
    """Make ``calls`` in order over one connection, passing each outcome to ``record`` with its
    index, until the ``time.monotonic()`` deadline; returns how many calls were left unmade.

    When the session breaks under a call (the server dropped the connection), that call is a
    protocol error and the rest go over a new connection: one broken session is a figure, not the
    end of the run."""
    done = 0

    def more() -> bool:
        return done < len(calls) and time.monotonic() < deadline

    while more():
        started = time.perf_counter()
        try:
            async with connect(rig.url, rig.token) as client:
                schemas = await output_schemas(client)
                while more():
                    tool, arguments = calls[done]
                    started = time.perf_counter()
                    outcome = await call_once(client, tool, arguments, timeout, schemas)
                    record(done, outcome)
                    done += 1
        except Exception as exc:
            if done == len(calls):
                break  # the client library failed closing a session whose calls were all answered
            ms = (time.perf_counter() - started) * 1000
            code = f"connection: {leaf_exception(exc)}"
            record(done, Outcome(tool=calls[done][0], kind="protocol", code=code, ms=ms))
            done += 1
    return len(calls) - done


async def call_fresh(rig: BenchRig, tool: str, arguments: dict[str, Any], timeout: float) -> Outcome:
    """Call ``tool`` over a new connection; a connection that fails is a protocol outcome."""
    started = time.perf_counter()
    try:
        with anyio.fail_after(timeout):
            async with connect(rig.url, rig.token) as client:
                return await call_once(client, tool, arguments, timeout, {})
    except TimeoutError:
        kind: OutcomeKind = "hang"
        code = None
    except Exception as exc:  # connecting failed, or the session broke under the call
        kind, code = "protocol", f"connection: {leaf_exception(exc)}"
    return Outcome(tool=tool, kind=kind, code=code, ms=(time.perf_counter() - started) * 1000)


def leaf_exception(exc: BaseException) -> str:
    """The name of the first exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return type(exc).__name__


def _matches(instance: Any, schema: dict[str, Any]) -> bool:
    from jsonschema import Draft202012Validator

    return bool(Draft202012Validator(schema).is_valid(instance))


async def output_schemas(client: Client) -> dict[str, Any]:
    listed = await client.list_tools()
    return {tool.name: tool.output_schema for tool in listed.tools if tool.output_schema}


class Tally(BaseModel):
    """Counts of outcomes: the figures every call-making part reports."""

    calls: int = 0
    ok: int = 0
    errors_by_code: dict[str, int] = Field(default_factory=dict)
    hangs: int = 0
    protocol_errors: dict[str, int] = Field(default_factory=dict)
    #: Error results that do not match the tool's outputSchema (a strict client drops them).
    errors_off_schema: int = 0

    @property
    def internal_errors(self) -> int:
        return self.errors_by_code.get("INTERNAL_ERROR", 0)

    @property
    def failures(self) -> int:
        """Outcomes that are defects whatever the input: internal errors, hangs, protocol errors."""
        return self.internal_errors + self.hangs + sum(self.protocol_errors.values())

    def add(self, outcome: Outcome) -> None:
        self.calls += 1
        if outcome.kind == "ok":
            self.ok += 1
        elif outcome.kind == "hang":
            self.hangs += 1
        elif outcome.kind == "error":
            _bump(self.errors_by_code, outcome.code or "(no code)")
            self.errors_off_schema += outcome.schema_valid is False
        else:
            _bump(self.protocol_errors, outcome.code or "?")

    def merge(self, other: Tally) -> None:
        self.calls += other.calls
        self.ok += other.ok
        self.hangs += other.hangs
        self.errors_off_schema += other.errors_off_schema
        for mine, theirs in (
            (self.errors_by_code, other.errors_by_code),
            (self.protocol_errors, other.protocol_errors),
        ):
            for key, count in theirs.items():
                _bump(mine, key, count)


def _bump(counts: dict[str, int], key: str, by: int = 1) -> None:
    counts[key] = counts.get(key, 0) + by


def format_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{key} {n}" for key, n in Counter(counts).most_common()) or "-"


def write(text: str) -> None:
    """The suite's report on stdout (a benchmark's own output, not a server's)."""
    sys.stdout.write(text)
    sys.stdout.flush()


def table(title: str, header: list[str], rows: list[list[str]], numeric_from: int = 1) -> None:
    """A Markdown table; columns from ``numeric_from`` on are right-aligned."""
    lines = [f"\n### {title}\n", "| " + " | ".join(header) + " |"]
    lines.append("|" + "---|" * numeric_from + "---:|" * (len(header) - numeric_from))
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    write("\n".join(lines) + "\n")


def tally_row(name: str, tally: Tally) -> list[str]:
    return [
        name,
        str(tally.calls),
        str(tally.ok),
        format_counts(tally.errors_by_code),
        str(tally.internal_errors),
        str(tally.hangs),
        format_counts(tally.protocol_errors),
    ]


TALLY_HEADER = ["", "calls", "ok", "errors by code", "INTERNAL_ERROR", "hangs", "protocol errors"]
