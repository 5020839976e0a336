"""Helpers for the tests of the rig's pages in a real browser: sign in, read the live screen."""

from __future__ import annotations

from playwright.sync_api import Page
from tests.polling import poll

#: A pixel of the picture the live page shows, as [r, g, b], read back through a canvas.
PIXEL_JS = """([x, y]) => {
  const img = document.getElementById("screen");
  if (!img || !img.complete || !img.naturalWidth) return null;
  const canvas = document.createElement("canvas");
  canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
  const context = canvas.getContext("2d");
  context.drawImage(img, 0, 0);
  return Array.from(context.getImageData(x, y, 1, 1).data.slice(0, 3));
}"""


def open_page(page: Page, base: str, path: str, token: str) -> None:
    """Open ``path`` the way a person is told to: the token in the URL's fragment."""
    page.goto(f"{base}{path}#token={token}")
    page.wait_for_url(f"{base}{path}")


def live_pixel(page: Page, x: int, y: int) -> list[int] | None:
    pixel: list[int] | None = page.evaluate(PIXEL_JS, [x, y])
    return pixel


def near(pixel: list[int] | None, rgb: tuple[int, int, int], tolerance: int = 24) -> bool:
    """JPEG moves colours a little."""
    return pixel is not None and all(abs(a - b) <= tolerance for a, b in zip(pixel, rgb, strict=True))


def wait_for_pixel(page: Page, x: int, y: int, rgb: tuple[int, int, int]) -> None:
    """Wait until the live page shows ``rgb`` at (x, y): how soon is ``scripts/bench live``'s to say."""
    poll(f"the live page to show {rgb} at ({x}, {y})", lambda: near(live_pixel(page, x, y), rgb))
