"""Making tool calls against a :class:`BenchRig` and classifying each as an :class:`Outcome`: ok, an
error result (with its code, checked against the tool's outputSchema), a hang or a protocol error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent

from deskrig.bench.reliability_outcomes import Outcome, OutcomeKind
from deskrig.bench.reliability_rig import BenchRig, json_or_none
from deskrig.client import connect


def error_code(structured: Any, text: str | None) -> str:
    """The error code of a failed result, wherever the tool's error shape keeps it."""
    for body in (structured, json_or_none(text)):
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict) and isinstance(error.get("code"), str):
                return str(error["code"])
            if isinstance(body.get("code"), str):
                return str(body["code"])
    return "(no code)"


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
