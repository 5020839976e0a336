"""SEP-2549's cache hints (2026-07-28): the listings that never change in a server's life say so,
and a client that honours the hints lists them over the wire once; the recording's resources,
which change with every turn and are each client's own, stay immediately stale and private."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from tests.server.helpers import scripted_server

from deskrig.bench.over_http import serving
from deskrig.mcp_face import STABLE_LISTING_TTL_MS
from deskrig.resources import STATE_URI

#: A client's default: it probes ``server/discover`` and speaks 2026-07-28 with a server that answers
#: it (pinned to that version, it would make up the discovery result instead of asking).
MODERN = "auto"


@pytest.fixture
def url() -> Iterator[str]:
    """A server on a scripted desktop, over real HTTP."""
    with scripted_server() as server, serving(server) as url:
        yield url


class _Posted:
    """The JSON-RPC methods a client posted, in order."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    async def __call__(self, request: httpx2.Request) -> None:
        if request.method == "POST":
            self.methods.append(json.loads(await request.aread())["method"])

    def count(self, method: str) -> int:
        return self.methods.count(method)


async def _with_client(url: str, mode: str, posted: _Posted, use: Any) -> Any:
    async with (
        httpx2.AsyncClient(event_hooks={"request": [posted]}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        return await use(client)


def test_a_client_on_the_2026_protocol_lists_the_tools_over_the_wire_once(url: str) -> None:
    posted = _Posted()

    async def list_three_times(client: Client) -> list[Any]:
        assert client.session.protocol_version == "2026-07-28"
        return [await client.list_tools() for _ in range(3)]

    listings = anyio.run(_with_client, url, MODERN, posted, list_three_times)
    assert posted.count("tools/list") == 1
    first = listings[0]
    assert (first.ttl_ms, first.cache_scope) == (STABLE_LISTING_TTL_MS, "public")
    assert len(first.tools) > 30
    assert all(listing == first for listing in listings[1:])


def test_the_other_stable_results_carry_the_hint(url: str) -> None:
    async def described(client: Client) -> tuple[Any, Any]:
        return await client.session.discover(), await client.list_resource_templates()

    discovered, templates = anyio.run(_with_client, url, MODERN, _Posted(), described)
    for result in (discovered, templates):
        assert (result.ttl_ms, result.cache_scope) == (STABLE_LISTING_TTL_MS, "public")
    assert templates.resource_templates


def test_the_recordings_resources_are_fetched_every_time(url: str) -> None:
    posted = _Posted()

    async def twice(client: Client) -> list[Any]:
        return [
            await client.list_resources(),
            await client.read_resource(STATE_URI),
            await client.list_resources(),
            await client.read_resource(STATE_URI),
        ]

    results = anyio.run(_with_client, url, MODERN, posted, twice)
    assert (posted.count("resources/list"), posted.count("resources/read")) == (2, 2)
    assert {(result.ttl_ms, result.cache_scope) for result in results} == {(0, "private")}


def test_a_session_client_lists_over_the_wire_each_time(url: str) -> None:
    """The hints are the 2026-07-28 protocol's: a session client (initialize handshake) gets none
    and reuses nothing, as before."""
    posted = _Posted()

    async def list_twice(client: Client) -> None:
        await client.list_tools()
        await client.list_tools()

    anyio.run(_with_client, url, "legacy", posted, list_twice)
    assert posted.count("tools/list") == 2
