"""run_command: a program run to completion on the rig, for preparing an app's state in a test.

Off unless the rig was started with ``--allow-commands`` (``DESKRIG_ALLOW_COMMANDS``): it gives
every token holder a shell as the rig's user. It runs as the user the rig starts apps as, with
the environment the app got (its display, buses), in a session of its own, so a timeout kills
everything it started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping

import anyio
from anyio.abc import ByteReceiveStream, Process
from pydantic import BaseModel, Field

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.launcher import start_error
from deskrig.model import CText, EnvName
from deskrig.procs import Account
from deskrig.services import AnyTool, CallInfo, Services, ToolResult, ToolSpec

MAX_TIMEOUT_MS = 600_000
MAX_OUTPUT_BYTES = 1024 * 1024


class RunCommandInput(BaseModel):
    argv: list[CText] = Field(min_length=1, description="Program and arguments, e.g. ['ls', '-l', '/tmp']")
    cwd: CText | None = Field(None, description="Working directory (default: the rig's)")
    env: dict[EnvName, CText] = Field(
        default_factory=dict, description="Extra environment variables over the app's environment"
    )
    timeout_ms: int = Field(
        30_000, ge=1, le=MAX_TIMEOUT_MS, description="Kill the command (and all it started) after this long"
    )
    stdin: str | None = Field(None, description="Text fed to the command's standard input (UTF-8)")
    max_output_bytes: int = Field(
        64 * 1024,
        ge=0,
        le=MAX_OUTPUT_BYTES,
        description="Keep at most this many bytes of stdout and of stderr each; the rest is counted",
    )


class CommandResult(BaseModel):
    exit_code: int | None = Field(description="The exit status; null when ended by a signal")
    signal: int | None = Field(None, description="The signal that ended it, if one did")
    timed_out: bool = Field(description="Killed at timeout_ms")
    stdout: str = Field(description="Standard output (UTF-8, undecodable bytes replaced), up to the limit")
    stderr: str = Field(description="Standard error, likewise")
    stdout_bytes: int = Field(description="Bytes written to stdout in all")
    stderr_bytes: int = Field(description="Bytes written to stderr in all")
    stdout_truncated: bool = Field(description="stdout holds only the first max_output_bytes")
    stderr_truncated: bool = Field(description="stderr holds only the first max_output_bytes")
    duration_ms: float


class _Capture:
    """The first ``limit`` bytes of a stream, and how many there were in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0

    async def drain(self, stream: ByteReceiveStream) -> None:
        async for chunk in stream:
            self.total += len(chunk)
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    @property
    def text(self) -> str:
        return self.kept.decode("utf-8", "replace")

    @property
    def truncated(self) -> bool:
        return self.total > len(self.kept)


def commands_off() -> DeskrigError:
    return DeskrigError(
        ErrorCode.PERMISSION_DENIED,
        "run_command is off on this rig",
        remediation="Start the rig with --allow-commands (or DESKRIG_ALLOW_COMMANDS=1) to enable it; "
        "it lets every token holder run programs as the rig's user.",
    )


def _kill_group(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone, with everything it started
        if sys.platform == "win32":  # no process groups: the command itself
            process.kill()
        else:
            os.killpg(process.pid, signal.SIGKILL)


async def _feed(process: Process, data: bytes) -> None:
    assert process.stdin is not None
    try:
        await process.stdin.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # it stopped reading; what it did with the rest is in its output
    finally:
        await process.stdin.aclose()


async def _run(
    argv: list[str], env: Mapping[str, str], account: Account | None, args: RunCommandInput
) -> CommandResult:
    """Run ``argv`` as ``account`` (None: as the server), with its own group only, as the rig's
    apps run: on a sway rig started as root, Xwayland admits only that user's clients."""
    started = time.perf_counter()
    try:
        process = await anyio.open_process(
            argv,
            cwd=args.cwd,
            env=dict(env),
            start_new_session=True,
            user=None if account is None else account.uid,
            group=None if account is None else account.gid,
            extra_groups=None if account is None else [],
        )
    except OSError as exc:
        raise start_error(argv, exc) from exc
    out, err = _Capture(args.max_output_bytes), _Capture(args.max_output_bytes)
    timed_out = False
    async with process:
        with anyio.move_on_after(args.timeout_ms / 1000) as deadline:
            async with anyio.create_task_group() as group:
                assert process.stdout is not None and process.stderr is not None
                group.start_soon(out.drain, process.stdout)
                group.start_soon(err.drain, process.stderr)
                group.start_soon(_feed, process, (args.stdin or "").encode("utf-8"))
                await process.wait()
        if deadline.cancelled_caught:
            timed_out = True
            _kill_group(process)
        with anyio.CancelScope(shield=True):
            status = await process.wait()
    return CommandResult(
        exit_code=status if status >= 0 else None,
        signal=-status if status < 0 else None,
        timed_out=timed_out,
        stdout=out.text,
        stderr=err.text,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
    )


async def run_command(services: Services, call: CallInfo, args: RunCommandInput) -> ToolResult:
    if not services.settings.allow_commands:
        raise commands_off()
    launcher = services.launcher
    return ToolResult(await _run(args.argv, launcher.environment(args.env), launcher.account, args))


TOOLS: list[AnyTool] = [
    ToolSpec(
        "run_command",
        "Run a program on the rig to completion, as the rig's user with the app's environment, and "
        "return its exit status and (bounded) stdout/stderr. For preparing state, not for starting "
        "apps (launch_app). Off unless the rig runs with --allow-commands.",
        RunCommandInput,
        CommandResult,
        run_command,
        read_only=False,
        recorded=False,
        title="Run a command",
    ),
]
