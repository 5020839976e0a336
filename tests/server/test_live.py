"""The live screen (/live), the live viewer (/view) and page sign-in, in a real browser against a
real rig (X11 and sway)."""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio.from_thread
import httpx
import pytest
from playwright.sync_api import Page, Request, expect
from tests.browser import keep_screenshot
from tests.polling import poll
from tests.rigprocs import open_dir
from tests.server.live_pages import live_pixel, near, open_page, wait_for_pixel
from tests.server.rigproc import RigProcess, color_app, read_events

from deskrig.client import connect

GREEN, RED, BLUE = (0x20, 0xC0, 0x40), (0xE0, 0x20, 0x20), (0x20, 0x40, 0xE0)
TOKEN = "live-test-token-5f2c"


class ToggleRig:
    """A rig whose app flips between GREEN and RED on every click (tests/apps/tk_color.py --toggle-to)."""

    def __init__(self, rig: RigProcess, log: Path, tmp: Path) -> None:
        self.rig, self.log, self.tmp = rig, log, tmp
        ready = poll("toggle app ready", lambda: read_events(log, "ready"), timeout=40)[-1]
        self.center = (ready["x"] + ready["width"] // 2, ready["y"] + ready["height"] // 2)

    def click(self) -> None:
        result = self.rig.call("click", {"x": self.center[0], "y": self.center[1]})
        assert not result.is_error, result


@pytest.fixture(scope="module", params=["x11", "sway"])
def toggle_rig(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ToggleRig]:
    """On both desktops: X11 (sleeps on DAMAGE) and sway (compares grabs); the app runs under
    Xwayland on sway, as the rig's own user (hence its log in a shared folder)."""
    stack = contextlib.ExitStack()
    tmp = tmp_path_factory.mktemp(f"live-rig-{request.param}")
    shared = stack.enter_context(open_dir("deskrig-test-app-"))
    log = shared / "toggle.log"
    app = color_app("Toggle", "#20c040", log, toolkit="tk", size="300x200", pos="100,120")
    app += ["--toggle-to", "#e02020"]
    extra = ["--backend", request.param, "--blocked-window", "^Secret", "--verbose"]
    with stack:
        rig = RigProcess(app=app, token=TOKEN, extra=extra).start(tmp)
        yield ToggleRig(rig, log, shared)
        rig.stop()


def in_thread(work: Any) -> None:
    """Run ``work`` beside Playwright's sync loop (the MCP client runs its own event loop)."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # re-raised in the test's thread
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    if failure:
        raise failure[0]


def test_the_live_screen_shows_a_click(
    toggle_rig: ToggleRig, browser_page: Page, request: pytest.FixtureRequest
) -> None:
    open_page(browser_page, toggle_rig.rig.base, "/live", TOKEN)
    # Beside the click point: sway's copies include the pointer, drawn where the click went.
    x, y = toggle_rig.center[0] + 40, toggle_rig.center[1] + 40
    before = poll("the app on the live page", lambda: live_pixel(browser_page, x, y), timeout=10)
    assert near(before, GREEN) or near(before, RED), before
    colour = RED if near(before, GREEN) else GREEN
    keep_screenshot(browser_page, request, "before")
    frames = browser_page.evaluate("window.deskrigLive.frames")

    in_thread(toggle_rig.click)
    wait_for_pixel(browser_page, x, y, colour)

    keep_screenshot(browser_page, request, "after")
    assert browser_page.evaluate("window.deskrigLive.frames") > frames
    assert "frame" in browser_page.inner_text("#info")


def test_blocked_windows_are_black_on_the_live_screen(
    toggle_rig: ToggleRig, browser_page: Page, request: pytest.FixtureRequest
) -> None:
    log = toggle_rig.tmp / "secret.log"
    secret = color_app("Secret Plans", "#2040e0", log, toolkit="tk", size="200x150", pos="600,200")
    launched: list[Any] = []
    in_thread(lambda: launched.append(toggle_rig.rig.call("launch_app", {"command": secret})))
    assert not launched[0].is_error, launched[0]
    try:
        poll("secret window ready", lambda: read_events(log, "ready"))
        open_page(browser_page, toggle_rig.rig.base, "/live", TOKEN)

        def secret_center() -> tuple[int, int]:
            where = read_events(log)[-1]  # sway tiles it: its latest geometry
            return where["x"] + where["width"] // 2, where["y"] + where["height"] // 2

        def black_there() -> bool:
            return near(live_pixel(browser_page, *secret_center()), (0, 0, 0), tolerance=8)

        poll("the secret window black on the live page", black_there, timeout=10)
        keep_screenshot(browser_page, request, "blocked")
        assert not near(live_pixel(browser_page, *secret_center()), BLUE)
    finally:
        pid = launched[0].structured_content["pid"]
        in_thread(lambda: toggle_rig.rig.call("kill_app", {"pid": pid}))


def test_pages_and_streams_refuse_requests_without_the_token(toggle_rig: ToggleRig) -> None:
    base = toggle_rig.rig.base
    stream = httpx.get(f"{base}/live/frames", timeout=5)
    assert stream.status_code == 401
    assert stream.json()["error"]["code"] == "PERMISSION_DENIED"
    for path in ("/view", "/view/recordings/1/events", "/view/recordings/1/files/turn-00001/before.png"):
        refused = httpx.get(f"{base}{path}", timeout=5)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "PERMISSION_DENIED", path
    page = httpx.get(f"{base}/live", headers={"accept": "text/html"}, timeout=5)
    assert page.status_code == 401 and 'action="/auth/page"' in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    forged = httpx.get(f"{base}/live/frames", cookies={"deskrig_page": TOKEN}, timeout=5)
    assert forged.status_code == 401
    wrong = httpx.post(f"{base}/auth/page", data={"token": "wrong", "next": "/live"}, timeout=5)
    assert wrong.status_code == 401 and "not valid" in wrong.text and "set-cookie" not in wrong.headers
    cross_site = httpx.post(
        f"{base}/auth/page", data={"token": TOKEN}, headers={"origin": "http://evil.example"}, timeout=5
    )
    assert cross_site.status_code == 403 and "set-cookie" not in cross_site.headers


def test_a_page_cookie_opens_pages_only_and_never_holds_the_token(toggle_rig: ToggleRig) -> None:
    base = toggle_rig.rig.base
    with httpx.Client(base_url=base, timeout=5) as client:
        signed_in = client.post("/auth/page", data={"token": TOKEN, "next": "/live"})
        assert signed_in.status_code == 303 and signed_in.headers["location"] == "/live"
        cookies = signed_in.headers.get_list("set-cookie")
        assert {c.split("Path=")[1].split(";")[0] for c in cookies} == {"/live", "/view"}
        assert all("HttpOnly" in c and "SameSite=strict" in c for c in cookies)
        assert all(TOKEN not in c for c in cookies)
        assert client.get("/live").status_code == 200
        with client.stream("GET", "/live/frames") as frames:
            assert frames.status_code == 200
            assert frames.headers["content-type"].startswith("multipart/x-mixed-replace")
        # The cookie watches; it never drives: the MCP endpoint and the probes' details need the token.
        session = client.cookies.get("deskrig_page", path="/live")
        mcp = httpx.post(f"{base}/mcp", cookies={"deskrig_page": session or ""}, json={}, timeout=5)
        assert mcp.status_code == 401


def test_the_token_reaches_no_url_header_or_log(
    toggle_rig: ToggleRig, browser_page: Page, request: pytest.FixtureRequest
) -> None:
    seen: list[Request] = []
    browser_page.on("request", lambda sent: seen.append(sent))
    open_page(browser_page, toggle_rig.rig.base, "/live", TOKEN)
    poll("a frame", lambda: browser_page.evaluate("window.deskrigLive.frames"))
    keep_screenshot(browser_page, request, "signed-in")

    assert TOKEN not in browser_page.url
    assert TOKEN not in browser_page.evaluate("location.href + document.cookie + document.body.innerHTML")
    assert len(seen) >= 3  # the page, the sign-in post, the page again, the stream
    for sent in seen:
        assert TOKEN not in sent.url
        assert all(TOKEN not in value for value in sent.all_headers().values())
    cookies = browser_page.context.cookies()
    assert {c["path"] for c in cookies} == {"/live", "/view"}
    assert all(c["httpOnly"] and c["sameSite"] == "Strict" and c["value"] != TOKEN for c in cookies)
    assert TOKEN not in toggle_rig.rig.stderr()  # the rig's log, debug level (--verbose)


@contextlib.contextmanager
def mcp_session(rig: RigProcess) -> Iterator[Callable[[str, dict[str, Any]], dict[str, Any]]]:
    """One MCP session kept open (a session recording is its client's), called from this thread;
    its event loop runs on a thread of its own, beside Playwright's sync loop."""
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connect(rig.url, rig.token)) as client,
    ):

        def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = portal.call(client.call_tool, tool, arguments)
            assert not result.is_error, result.content
            return result.structured_content  # type: ignore[no-any-return]

        yield call


def test_view_follows_the_recording_started_last(
    toggle_rig: ToggleRig, browser_page: Page, request: pytest.FixtureRequest
) -> None:
    """/view shows a recording started with start_recording, each turn as it lands (no reload),
    and switches to the next recording when another starts."""
    page, rig = browser_page, toggle_rig.rig
    names = [f"view-{which}-{request.node.callspec.id}" for which in ("first", "second")]
    open_page(page, rig.base, "/view", TOKEN)
    expect(page.locator("#no-recording")).to_have_text("This rig is not recording")
    keep_screenshot(page, request, "no-recording")
    with mcp_session(rig) as call:
        for number, name in enumerate(names, start=1):
            call("start_recording", {"output_dir": f"~/deskrig/{name}"})
            expect(page.locator("#title")).to_have_text(name, timeout=10_000)  # reloaded by itself
            expect(page.locator("#turns .turn")).to_have_count(0)
            page.evaluate("window.deskrigSamePage = true")
            call("click", {"x": toggle_rig.center[0], "y": toggle_rig.center[1]})
            expect(page.locator("#turns .turn")).to_have_count(1, timeout=10_000)
            expect(page.locator(".turn-detail h2")).to_have_text("Turn 1 · click")
            expect(page.locator(".shot.after img")).to_have_js_property("complete", True)
            assert page.locator(".shot.after img").evaluate("img => img.naturalWidth") > 0
            assert page.evaluate("window.deskrigSamePage") is True  # the turn came in, no reload
            keep_screenshot(page, request, f"recording-{number}")
            call("stop_recording", {})
    # A stopped recording stays on show until another starts.
    page.reload()
    expect(page.locator("#title")).to_have_text(names[-1])
    expect(page.locator("#turns .turn")).to_have_count(1)
    # Its folder removed under it: a structured refusal, not a server error.
    assert rig.stderr_path is not None
    shutil.rmtree(rig.stderr_path.parent / "home" / "deskrig" / names[-1])
    gone = httpx.get(f"{rig.base}/view", headers=rig.auth, timeout=10)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "INVALID_PATH", gone.text


def test_a_watched_rig_stops_without_waiting_for_its_viewers(tmp_path: Path) -> None:
    """An open stream ends as the server begins to stop, rather than holding the rig's exit for
    uvicorn's whole graceful-shutdown timeout (8 s)."""
    rig = RigProcess(app=color_app("Watched", "#20c040", tmp_path / "app.log"), token=TOKEN).start(tmp_path)
    ended: list[str] = []
    first_frame = threading.Event()

    def watch() -> None:
        with httpx.stream("GET", f"{rig.base}/live/frames", headers=rig.auth, timeout=30) as stream:
            try:
                for _ in stream.iter_bytes():
                    first_frame.set()
                ended.append("closed")
            except httpx.HTTPError as exc:
                ended.append(type(exc).__name__)

    viewer = threading.Thread(target=watch)
    viewer.start()
    poll("the stream's first frame", first_frame.is_set, timeout=15)
    assert rig.stop() == 0
    viewer.join(timeout=10)
    assert ended == ["closed"], "the viewer's stream ended as the rig stopped, not cut off"
    rig.assert_exit_not_held("a viewer's stream")
