"""The image bench's readiness probe (``deskrig.bench images``), against a local stand-in rig."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from deskrig.bench.images import wait_ready

#: Probes answered 503 before the stand-in answers 200.
NOT_READY_PROBES = 5


class StandIn(http.server.ThreadingHTTPServer):
    """Answers /readyz 503 ``not_ready`` times, then 200 (never, with ``not_ready`` None)."""

    def __init__(self, not_ready: int | None) -> None:
        super().__init__(("127.0.0.1", 0), Probe)
        self.not_ready = not_ready
        self.probes = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/readyz"


class Probe(http.server.BaseHTTPRequestHandler):
    server: StandIn

    def do_GET(self) -> None:
        self.server.probes += 1
        ready = self.server.not_ready is not None and self.server.probes > self.server.not_ready
        self.send_response(200 if ready else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def stand_in(request: pytest.FixtureRequest) -> Iterator[StandIn]:
    server = StandIn(request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("stand_in", [NOT_READY_PROBES], indirect=True)
def test_probes_until_ready_with_one_tls_context(stand_in: StandIn, ca_loads: list[object]) -> None:
    assert wait_ready(stand_in.url, timeout=30)
    assert stand_in.probes == NOT_READY_PROBES + 1
    # The shared context's one load at most: a client per probe loaded the bundle every time.
    assert len(ca_loads) <= 1


@pytest.mark.parametrize("stand_in", [None], indirect=True)
def test_gives_up_at_the_timeout(stand_in: StandIn) -> None:
    assert not wait_ready(stand_in.url, timeout=0.3)
    assert stand_in.probes >= 2
