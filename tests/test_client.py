"""deskrig.client's HTTP clients: one TLS context per process, still a verifying one."""

from __future__ import annotations

import ssl

import anyio
import httpx2

from deskrig.client import rig_http_client, tls_context


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
