"""The rig's own viewer at ``/view``: its current recording (here the boot one) as it is written,
behind the rig's token.

Runs after test_report.py (the file name sorts last): it records a fifth turn on the shared rig.
"""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import Page, expect
from tests.browser import keep_screenshot
from tests.viewer.conftest import RecordedSession


def test_view_shows_the_recording_and_follows_new_turns(
    recorded: RecordedSession, browser_page: Page, request: pytest.FixtureRequest
) -> None:
    page = browser_page
    # As a person opens it: the token in the fragment, exchanged for the page cookie, which must
    # also open the feed and the files the page reads (no Authorization header in this browser).
    token = recorded.form.rig.token
    assert token
    with page.expect_response(lambda r: r.url == f"{recorded.base}/view" and r.status == 200) as shown:
        page.goto(f"{recorded.base}/view#token={token}")
    assert shown.value.headers["referrer-policy"] == "no-referrer"
    assert token not in page.url
    rows = page.locator("#turns .turn")
    expect(rows).to_have_count(4)
    expect(page.locator("#stats .live-badge")).to_have_text("LIVE")
    page.locator('#turns [data-turn="4"]').click()  # at the end: the page follows new turns

    recorded.click("button")  # "clicked 1" -> "clicked 2", written as turn 5 while the page is open
    expect(rows).to_have_count(5, timeout=10_000)
    # The video was finalised before turn 5: it is not in it, and has no marker there.
    assert not (recorded.folder / "turn-00005" / "video.json").exists()
    assert (recorded.folder / "turn-00004" / "video.json").exists()
    expect(page.locator('#markers [data-turn="5"]')).to_have_count(0)
    expect(page.locator(".turn-detail h2")).to_have_text("Turn 5 · click")
    expect(page.locator(".a11y-diff li.renamed")).to_contain_text('label "clicked 1" → "clicked 2"')
    expect(page.locator(".shot.after img")).to_have_js_property("complete", True)
    assert page.locator(".shot.after img").evaluate("img => img.naturalWidth") > 0
    keep_screenshot(page, request, "live")


def test_view_needs_the_token(recorded: RecordedSession) -> None:
    page = httpx.get(f"{recorded.base}/view", headers=recorded.auth, timeout=10)
    found = re.search(r"view/recordings/(\d+)/", page.text)
    assert page.status_code == 200 and found, page.text[:200]
    own = f"{recorded.base}/view/recordings/{found.group(1)}"
    for url in (f"{recorded.base}/view", f"{own}/turns/1", f"{own}/files/turn-00001/action.json"):
        assert httpx.get(url, timeout=10).status_code == 401
    turn = httpx.get(f"{own}/turns/1", headers=recorded.auth, timeout=10)
    assert turn.status_code == 200 and turn.json()["action"]["tool"] == "click"
    missing = httpx.get(f"{own}/turns/999", headers=recorded.auth, timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "INVALID_ARGUMENT"
    other = httpx.get(f"{recorded.base}/view/recordings/999999/turns/1", headers=recorded.auth, timeout=10)
    assert other.status_code == 404 and other.json()["error"]["code"] == "RECORDING_ERROR"
