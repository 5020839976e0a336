"""The ``ca_loads`` fixture: every CA bundle loaded into a TLS context while a test runs, to check
that HTTP clients share :func:`deskrig.client.tls_context` rather than making one each."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import pytest

from deskrig.client import tls_context


@pytest.fixture
def ca_loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """The arguments of every ``load_verify_locations`` from here on, with a fresh shared context."""
    loads: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loads.append(args)
        load(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    tls_context.cache_clear()
    yield loads
    tls_context.cache_clear()
