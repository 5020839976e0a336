"""The orchestrator's dashboard in a real browser: the orchestrator's API served over HTTP (uvicorn,
in a thread), with the in-memory runtime's scripted rigs (which answer over real loopback HTTP)
and, once, with real rigs in Docker."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import anyio.from_thread
import httpx
import pytest
import uvicorn
from playwright.sync_api import Page
from tests.browser import keep_screenshot
from tests.server.live_pages import open_page

from deskrig.guard import uvicorn_config
from deskrig.listener import bind_listener
from deskrig.orchestrator.api import create_api
from deskrig.orchestrator.core import Orchestrator
from deskrig.orchestrator.memory_runtime import MemoryRuntime
from deskrig.orchestrator.models import OrchestratorConfig
from deskrig.orchestrator.runtime import Runtime

TOKEN = "dashboard-test-token-81ad"


@dataclass
class Served:
    base: str

    def api(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {TOKEN}"}
        return httpx.request(method, f"{self.base}{path}", headers=headers, timeout=30, **kwargs)


@contextlib.contextmanager
def serve(config: OrchestratorConfig, runtime: Runtime | None) -> Iterator[Served]:
    """The orchestrator on ``runtime`` (None: Docker) behind its HTTP API on a free port."""
    sock = bind_listener("127.0.0.1", 0)
    with anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(Orchestrator(config, runtime)) as orchestrator:
            server = uvicorn.Server(uvicorn_config(create_api(orchestrator, token=TOKEN), lifespan="off"))
            serving = portal.start_task_soon(lambda: server.serve(sockets=[sock]))
            yield Served(f"http://127.0.0.1:{sock.getsockname()[1]}")
            server.should_exit = True
            serving.result(timeout=30)
        if runtime is not None:  # the orchestrator closes only the Docker runtime it made
            portal.call(runtime.close)


@pytest.fixture
def served(config: OrchestratorConfig) -> Iterator[Served]:
    with serve(config, MemoryRuntime()) as served:
        yield served


def rows(page: Page, table: str) -> list[str]:
    rows: list[str] = page.eval_on_selector_all(f"#{table} tbody tr", "rows => rows.map(r => r.innerText)")
    return rows


def test_the_dashboard_lists_running_sessions_and_drops_a_stopped_one(
    served: Served, browser_page: Page, request: pytest.FixtureRequest
) -> None:
    first = served.api("POST", "/sessions", json={"name": "test_one", "app": "gedit"}).json()
    second = served.api("POST", "/sessions", json={"name": "test_two", "app": "xterm"}).json()

    open_page(browser_page, served.base, "/dashboard", TOKEN)
    browser_page.wait_for_function("document.querySelectorAll('#running tbody tr').length === 2")
    keep_screenshot(browser_page, request, "two-running")
    running = rows(browser_page, "running")
    assert any("test_one" in r and "gedit" in r and "ready" in r for r in running), running
    assert any("test_two" in r and "xterm" in r for r in running), running
    live = browser_page.get_attribute(f"tr[data-session='{first['id']}'] a:text('live screen')", "href")
    assert live == f"/dashboard/sessions/{first['id']}/live"

    assert served.api("DELETE", f"/sessions/{second['id']}").status_code == 200
    browser_page.wait_for_function(
        "document.querySelectorAll('#running tbody tr').length === 1", timeout=5000
    )
    keep_screenshot(browser_page, request, "one-stopped")
    assert "test_one" in rows(browser_page, "running")[0]
    ended = rows(browser_page, "ended")
    assert len(ended) == 1 and "test_two" in ended[0] and "stopped" in ended[0]


@pytest.mark.docker
def test_the_dashboard_of_docker_rigs_links_to_their_live_screen(
    rig_image: str, config: OrchestratorConfig, browser_page: Page, request: pytest.FixtureRequest
) -> None:
    """Two real rigs (the bare rig image, no recording: the cheapest there is), started at once."""
    page = browser_page
    with serve(config, None) as served, ThreadPoolExecutor(max_workers=2) as pool:
        specs = [{"name": name, "image": rig_image, "record": False} for name in ("docker_one", "docker_two")]
        started = [
            future.result()
            for future in [pool.submit(served.api, "POST", "/sessions", json=s) for s in specs]
        ]
        assert all(response.status_code == 201 for response in started), [r.text for r in started]
        first, second = (response.json() for response in started)

        open_page(page, served.base, "/dashboard", TOKEN)
        page.wait_for_function("document.querySelectorAll('#running tbody tr').length === 2")
        running = rows(page, "running")
        assert all(any(name in r and "ready" in r for r in running) for name in ("docker_one", "docker_two"))
        keep_screenshot(page, request, "two-running")

        # Followed as a person does: the link (a new tab), the redirect with the rig's token in its
        # fragment, the rig's sign-in, its live screen showing frames.
        with page.context.expect_page() as opened:
            page.click(f"tr[data-session='{first['id']}'] a:text('live screen')")
        live = opened.value
        live.wait_for_url(first["mcp_url"].removesuffix("/mcp") + "/live")
        live.wait_for_function("window.deskrigLive && window.deskrigLive.frames > 0", timeout=15_000)
        keep_screenshot(live, request, "live-screen")
        assert first["token"] not in live.url

        assert served.api("DELETE", f"/sessions/{second['id']}").status_code == 200
        page.wait_for_function("document.querySelectorAll('#running tbody tr').length === 1", timeout=10_000)
        keep_screenshot(page, request, "one-stopped")
        assert "docker_one" in rows(page, "running")[0]
        ended = rows(page, "ended")
        assert len(ended) == 1 and "docker_two" in ended[0] and "stopped" in ended[0]


def test_the_dashboard_hands_out_rig_tokens_only_in_a_redirects_fragment(served: Served) -> None:
    session = served.api("POST", "/sessions", json={"name": "linked"}).json()
    listed = served.api("GET", "/dashboard/sessions")
    assert listed.status_code == 200 and session["token"] not in listed.text
    moved = served.api("GET", f"/dashboard/sessions/{session['id']}/live", follow_redirects=False)
    assert moved.status_code == 303
    assert (
        moved.headers["location"]
        == session["mcp_url"].removesuffix("/mcp") + f"/live#token={session['token']}"
    )
    assert moved.headers["referrer-policy"] == "no-referrer"
    listing = served.api("GET", f"/dashboard/sessions/{session['id']}/artifacts/")
    assert listing.status_code == 200 and "linked: artifacts" in listing.text
    gone = served.api("GET", f"/dashboard/sessions/{session['id']}/artifacts/../../state/x")
    assert gone.status_code in (400, 404)


def test_the_dashboard_refuses_requests_without_the_token(served: Served) -> None:
    assert httpx.get(f"{served.base}/dashboard/sessions", timeout=5).status_code == 401
    page = httpx.get(f"{served.base}/dashboard", headers={"accept": "text/html"}, timeout=5)
    assert page.status_code == 401 and 'action="/auth/page"' in page.text and TOKEN not in page.text
    wrong = httpx.post(f"{served.base}/auth/page", data={"token": "nope", "next": "/dashboard"}, timeout=5)
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
