"""Connect an MCP client to a rig: the one helper tests, the pytest plugin and scripts share."""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import httpx2

if TYPE_CHECKING:
    import jsonschema_rs
    from mcp import Client
    from mcp.client.session import ClientSession

#: The MCP SDK's own transport defaults: 30 s to connect, write or wait for the pool, and 5 min
#: to read, because a server may hold a response stream open that long.
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every HTTP client of this process shares (httpx2's default one, made once).

    httpx2 makes a context for each client, plain-HTTP rigs included, and loading the CA bundle
    into it costs about 27 ms of CPU: sixteen fresh connections at once spent 0.4 s of their one
    event loop on it before the first byte went out."""
    return httpx2.create_ssl_context()


def rig_http_client(token: str | None = None) -> httpx2.AsyncClient:
    """An HTTP client for a rig's MCP endpoint, sending ``token`` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT, verify=tls_context())


@contextlib.asynccontextmanager
async def connect(url: str, token: str | None = None, *, quick_checks: bool = True) -> AsyncIterator[Client]:
    """A connected :class:`mcp.Client` for the rig at ``url`` (``http://host:port/mcp``).

    It speaks the session-based (initialize handshake) protocol: a rig scopes recordings, rate
    limits and the audit log by MCP session, which the stateless 2026-07-28 protocol does not have.
    Its results are checked by :func:`check_outputs_quickly` unless ``quick_checks`` is false
    (the SDK's own check alone, as the benchmarks time it).
    """
    # Here, not at the top: the orchestrator shares :func:`tls_context` without the MCP SDK's import.
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        rig_http_client(token) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        if quick_checks:
            check_outputs_quickly(client.session)
        yield client


class _ValidFirst:
    """A tool's output schema check for the MCP SDK's ``ClientSession``: jsonschema-rs says whether
    a result is valid, and only a result it finds invalid is checked again by the SDK's own
    validator, whose errors the session reports as it always has. That one is made only then.

    The SDK checks every structured result with ``jsonschema`` in pure Python, which pays for
    each value it checks: 17-38 ms for a 261-element get_app_state with its elements, against
    0.15 ms here; and it makes its validator on a tool's first result on each connection, checking
    the schema against the metaschema first: 7-29 ms a tool here (get_app_state's 29 ms), against
    0.3-0.5 ms."""

    def __init__(
        self, schema: dict[str, Any], quick: jsonschema_rs.Validator, sdk_validator: Callable[[], Any]
    ) -> None:
        #: The schema as the session holds it: a new listing holds a new one.
        self.schema = schema
        self._quick = quick
        self._sdk_validator = sdk_validator

    def iter_errors(self, instance: object) -> Iterator[Any]:
        if self._quick.is_valid(instance):
            return iter(())
        errors: Iterator[Any] = self._sdk_validator().iter_errors(instance)
        return errors


def check_outputs_quickly(session: ClientSession) -> None:
    """Have ``session`` check tool results against their output schemas with jsonschema-rs first
    (:class:`_ValidFirst`), where the ``client`` extra installed it; else it checks as the SDK does.

    It takes the place of the session's per-tool validator factory, which the SDK keeps for
    compiled validators (``_output_schema_validator``) and asks with the tool's schema for every
    result: the quick one is made again when the session holds a new schema for the tool (a new
    listing), and the SDK's own (its schema check included, cached by the session) is made for a
    result jsonschema-rs rejects. ``$ref``s resolve within the schema document, as the SDK's do:
    jsonschema-rs runs offline, and a schema it cannot compile is checked by the SDK alone."""
    try:
        import jsonschema_rs
    except ImportError:
        return
    made_by_sdk = session._output_schema_validator
    quick: dict[str, _ValidFirst] = {}

    def validator(name: str, output_schema: dict[str, Any]) -> Any:
        kept = quick.get(name)
        if kept is None or kept.schema is not output_schema:
            try:
                compiled = quick_validator(output_schema)
            except (jsonschema_rs.ReferencingError, ValueError):  # its ValidationError is a ValueError
                return made_by_sdk(name, output_schema)
            kept = quick[name] = _ValidFirst(
                output_schema, compiled, lambda: made_by_sdk(name, output_schema)
            )
        return kept

    session._output_schema_validator = validator  # type: ignore[method-assign]


def quick_validator(output_schema: dict[str, Any]) -> jsonschema_rs.Validator:
    """jsonschema-rs's validator for ``output_schema``, checking as the SDK's ``jsonschema`` does:
    formats are not asserted, and no ``$ref`` is fetched (offline)."""
    import jsonschema_rs

    return jsonschema_rs.validator_for(output_schema, validate_formats=False, offline=True)
