"""deskrig.client: its HTTP clients share one TLS context, still a verifying one; its MCP clients
check tool results against their output schemas with jsonschema-rs first, and report an invalid
one exactly as the MCP SDK's own check does."""

from __future__ import annotations

import ssl
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from jsonschema.validators import Draft202012Validator
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from deskrig.bench.over_http import serving
from deskrig.client import check_outputs_quickly, connect, rig_http_client, tls_context
from deskrig.config import SecurityPolicy, Settings
from deskrig.desktop.scripted import ScriptedDesktop
from deskrig.serving import build_server

COUNT_SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer"}, "items": {"type": "array", "items": {"type": "string"}}},
    "required": ["count"],
}
#: What each tool of :func:`counting_server` returns as its structured content.
RESULTS: dict[str, dict[str, Any]] = {
    "valid": {"count": 2, "items": ["a", "b"]},
    "wrong_type": {"count": 2, "items": ["a", 3]},
    "missing": {"items": []},
    # Its schema is a $ref out of the document: the SDK cannot resolve it, nor jsonschema-rs
    # (offline) compile it.
    "remote_ref": {"count": 2},
    # Its schema is not a JSON Schema: both reject it.
    "bad_schema": {"count": 2},
}


def counting_server(schemas: dict[str, dict[str, Any]] | None = None) -> Server[Any]:
    """A server whose tools return their entry of :data:`RESULTS`, with :data:`COUNT_SCHEMA` as
    their output schema unless ``schemas`` (read at each tools/list) names another."""
    schemas = {} if schemas is None else schemas

    def schema(name: str) -> dict[str, Any]:
        if name == "remote_ref":
            return {"type": "object", "$ref": "https://schemas.example/count.json"}
        if name == "bad_schema":
            return {"type": "object", "properties": {"count": {"type": "integr"}}}
        return schemas.get(name, COUNT_SCHEMA)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=name, input_schema={"type": "object"}, output_schema=schema(name))
                for name in RESULTS
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        structured = RESULTS[params.name]
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=str(structured))], structured_content=structured
        )

    return Server("counting", on_list_tools=list_tools, on_call_tool=call_tool)


def test_rig_clients_load_the_ca_bundle_once(ca_loads: list[object]) -> None:
    async def make(count: int, factory: object) -> None:
        for _ in range(count):
            async with factory():  # type: ignore[operator]
                pass

    anyio.run(make, 1, httpx2.AsyncClient)
    per_plain_client = len(ca_loads)
    assert per_plain_client >= 1, "this machine's default context loads no CA bundle: nothing to count"
    ca_loads.clear()
    anyio.run(make, 16, lambda: rig_http_client("token"))
    assert len(ca_loads) == per_plain_client  # the first client's, and no other


def test_the_shared_context_verifies() -> None:
    context = tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


@pytest.fixture
def jsonschema_checks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each result the MCP SDK's jsonschema validator (the pure-Python one) checks (not the
    schemas it checks against the metaschema, which name their ``$schema``)."""
    checked: list[object] = []
    iter_errors = Draft202012Validator.iter_errors

    def counted(validator: Any, instance: object) -> Any:
        if "$schema" not in validator.schema:
            checked.append(instance)
        return iter_errors(validator, instance)

    monkeypatch.setattr(Draft202012Validator, "iter_errors", counted)
    return checked


async def _call(tool: str, *, quickly: bool) -> types.CallToolResult | RuntimeError:
    async with Client(counting_server(), mode="legacy") as client:
        if quickly:
            check_outputs_quickly(client.session)
        try:
            return await client.call_tool(tool, {})
        except RuntimeError as exc:
            return exc


@pytest.fixture
def sdk_validators_made(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each output schema the MCP SDK checked against the metaschema, as it does before it makes a
    tool's validator."""
    made: list[object] = []
    check_schema = Draft202012Validator.check_schema

    def counted(cls: Any, schema: Any, *args: Any, **kwargs: Any) -> None:
        made.append(schema)
        check_schema(schema, *args, **kwargs)

    monkeypatch.setattr(Draft202012Validator, "check_schema", classmethod(counted))
    return made


def test_a_valid_result_makes_no_validator_of_the_sdks(sdk_validators_made: list[object]) -> None:
    anyio.run(lambda: _call("valid", quickly=True))
    assert sdk_validators_made == []
    anyio.run(lambda: _call("wrong_type", quickly=True))
    assert sdk_validators_made == [COUNT_SCHEMA], "an invalid result is checked by the SDK's own"
    anyio.run(lambda: _call("valid", quickly=False))
    assert len(sdk_validators_made) == 2, "the SDK alone makes its validator for a valid result"


def test_a_valid_result_is_not_checked_again_in_pure_python(jsonschema_checks: list[object]) -> None:
    result = anyio.run(lambda: _call("valid", quickly=True))
    assert isinstance(result, types.CallToolResult) and result.structured_content == RESULTS["valid"]
    assert jsonschema_checks == []
    anyio.run(lambda: _call("valid", quickly=False))
    assert jsonschema_checks == [RESULTS["valid"]], "the SDK alone checks it in pure Python"


@pytest.mark.parametrize(
    ("tool", "sdk_says"),
    [
        ("wrong_type", "Invalid structured content returned by tool wrong_type: 3 is not of type 'string'"),
        ("missing", "Invalid structured content returned by tool missing: 'count' is a required property"),
        ("remote_ref", "Invalid schema for tool remote_ref: "),
        (
            "bad_schema",
            "Invalid schema for tool bad_schema: 'integr' is not valid under any of the given schemas",
        ),
    ],
)
def test_an_invalid_result_fails_as_the_sdk_alone_reports_it(tool: str, sdk_says: str) -> None:
    quick, sdk = (anyio.run(lambda q=q: _call(tool, quickly=q)) for q in (True, False))
    assert isinstance(sdk, RuntimeError) and isinstance(quick, RuntimeError)
    assert str(sdk).startswith(sdk_says)
    assert str(quick) == str(sdk)


def test_a_changed_output_schema_is_checked_as_it_now_is() -> None:
    """The session drops a tool's validator when a listing changes its schema: the quick check
    follows it, instead of passing what the old schema allowed."""
    schemas: dict[str, dict[str, Any]] = {}

    async def before_and_after() -> tuple[types.CallToolResult, RuntimeError | None]:
        async with Client(counting_server(schemas), mode="legacy") as client:
            check_outputs_quickly(client.session)
            before = await client.call_tool("valid", {})
            schemas["valid"] = {**COUNT_SCHEMA, "required": ["count", "total"]}
            await client.list_tools()
            try:
                await client.call_tool("valid", {})
            except RuntimeError as exc:
                return before, exc
            return before, None

    before, after = anyio.run(before_and_after)
    assert not before.is_error
    assert after is not None, "the result passed the old schema's check"
    assert str(after).startswith(
        "Invalid structured content returned by tool valid: 'total' is a required property"
    )


def test_connect_checks_a_rigs_results_quickly(jsonschema_checks: list[object]) -> None:
    server = build_server(ScriptedDesktop().open(), Settings(security=SecurityPolicy()))

    async def sizes(url: str) -> list[dict[str, Any] | None]:
        async with connect(url) as client:
            return [(await client.call_tool("get_screen_size", {})).structured_content for _ in range(2)]

    try:
        with serving(server) as url:
            structured = anyio.run(sizes, url)
    finally:
        server.services.desktop.close()
    assert structured[0] is not None and {"width", "height"} <= structured[0].keys()
    assert jsonschema_checks == []
