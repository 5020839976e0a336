"""A real browser for the tests of deskrig's pages (viewer, live screen, dashboard): Debian's
Chromium driven by Playwright through ``executable_path`` — never a downloaded browser.

Use the ``browser_page`` fixture; each test's screenshots go to ``artifacts/browser/`` (kept by CI
as test artifacts) through :func:`keep_screenshot`.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    # Imported when a browser is first asked for: tests/conftest.py loads this module as a plugin
    # for every run, including the packaging test's runs in venvs without the dev extras.
    from playwright.sync_api import Browser, Page

#: Where the page screenshots taken by tests are kept, for people to look at after a run.
SCREENSHOT_DIR = Path(__file__).resolve().parent.parent / "artifacts" / "browser"


def chromium_path() -> str:
    path = shutil.which("chromium")
    assert path, "Debian's chromium is not installed: run scripts/setup"
    return path


# Module scope, not session: while Playwright's sync API is open it marks an event loop as running
# in the test thread, and every later anyio test of the session failed ("Cannot run the event loop
# while another loop is running"). It ends with the browser tests' module instead.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # --no-sandbox: the tests run as root, where Chromium refuses its sandbox.
        launched = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def browser_page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def keep_screenshot(page: Page, request: pytest.FixtureRequest, label: str) -> Path:
    """Save what the page shows now as artifacts/browser/<test>-<label>.png and return its path."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{request.node.name}-{label}")
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOT_DIR / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
