"""The report of a real recorded session, in a real browser (Debian's Chromium): what a person sees."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image, ImageChops, ImageStat
from playwright.sync_api import Page, expect
from tests.browser import keep_screenshot
from tests.viewer.conftest import RecordedSession, deskrig

Box = tuple[float, float, float, float]
WHOLE: Box = (0.0, 0.0, 1.0, 1.0)


def shown_like(page: Page, selector: str, png: Path, box: Box = WHOLE) -> float:
    """How far (mean difference per channel, 0..255) what the page shows in ``selector`` is from
    ``png`` scaled to the same size, within ``box`` (fractions of the image: left, top, right, bottom)."""
    shown = Image.open(io.BytesIO(page.locator(selector).screenshot())).convert("RGB")
    with Image.open(png) as original:
        expected = original.convert("RGB").resize(shown.size, Image.Resampling.BILINEAR)
    width, height = shown.size
    crop = (box[0] * width, box[1] * height, box[2] * width, box[3] * height)
    return max(ImageStat.Stat(ImageChops.difference(shown.crop(crop), expected.crop(crop))).mean)


def pixels(image: Image.Image, box: Box) -> tuple[int, int, int, int]:
    """``box`` (fractions) in ``image``'s pixels."""
    return (
        round(box[0] * image.width),
        round(box[1] * image.height),
        round(box[2] * image.width),
        round(box[3] * image.height),
    )


def widget_box(recorded: RecordedSession, turn: Path, widget: str) -> Box:
    """Where ``widget`` of the form lies in the turn's before.png, as fractions of the image."""
    region = json.loads((turn / "evidence.json").read_text())["before.png"]["region"]
    w = recorded.form.ready["widgets"][widget]
    left, top = (w["x"] - region["x"]) / region["width"], (w["y"] - region["y"]) / region["height"]
    return left, top, left + w["width"] / region["width"], top + w["height"] / region["height"]


def focus_change(turn: Path, role: str, name: str) -> str | None:
    """The sign the report gives (plus or minus) when the element ``role`` ``name`` gained or lost
    focus in ``turn``'s recorded states, else None."""

    def focused(state_file: str) -> bool:
        elements = json.loads((turn / state_file).read_text())["elements"]
        return any(
            e["role"] == role and e.get("name") == name and "focused" in e.get("states", []) for e in elements
        )

    was, now = focused("before_state.json"), focused("after_state.json")
    return None if was == now else "+" if now else "−"


@pytest.fixture(scope="module")
def report(recorded: RecordedSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"  # outside the recording: relative links
    written = deskrig("view", str(recorded.folder), "-o", str(out))
    assert written.returncode == 0, written.stderr
    assert f"wrote {out} (4 turns, 1 failed)" in written.stderr and not written.stdout
    return out


def test_the_report_shows_every_turn_its_images_its_a11y_diff_and_its_error(
    recorded: RecordedSession, report: Path, browser_page: Page, request: pytest.FixtureRequest
) -> None:
    page = browser_page
    page.goto(report.as_uri())
    rows = page.locator("#turns .turn")
    expect(rows).to_have_count(4)
    expect(page.locator("#stats")).to_contain_text("4 turns")
    assert rows.nth(3).get_attribute("class") == "turn error"
    expect(rows.nth(3)).to_contain_text("ELEMENT_NOT_FOUND")

    rows.nth(1).click()
    expect(page.locator(".turn-detail h2")).to_have_text("Turn 2 · click")
    folder = recorded.folder / "turn-00002"
    for name, selector in (("before.png", ".shot.before img"), ("after.png", ".shot.after img")):
        image = page.locator(selector)
        expect(image).to_have_js_property("complete", True)
        with Image.open(folder / name) as png:
            assert image.evaluate("img => img.naturalWidth") == png.width
        assert shown_like(page, selector, folder / name) < 6, name
    # The status label reads "clicked 0" before and "clicked 1" after: each side shows its own.
    # Under load the after image can be taken before the label is repainted (its text is already
    # in the accessibility state): then the two files are alike there, and the whole image tells.
    label = widget_box(recorded, folder, "status")
    with Image.open(folder / "before.png") as before, Image.open(folder / "after.png") as after:
        box = (
            label
            if ImageChops.difference(
                before.convert("RGB").crop(pixels(before, label)),
                after.convert("RGB").crop(pixels(after, label)),
            ).getbbox()
            else WHOLE
        )
        # Heavier load still: the after image taken before anything was repainted. The two files
        # are then the same picture, which each side showing its own file (above) already covers.
        differ = ImageChops.difference(before.convert("RGB"), after.convert("RGB")).getbbox() is not None
    for side, own, other in (("before", "before.png", "after.png"), ("after", "after.png", "before.png")):
        selector = f".shot.{side} img"
        if differ:
            assert shown_like(page, selector, folder / own, box) < shown_like(
                page, selector, folder / other, box
            )
    expect(page.locator(".shot.before .click-marker")).to_be_visible()
    renamed = page.locator(".a11y-diff li.renamed")
    expect(renamed).to_contain_text('label "clicked 0" → "clicked 1"')
    # Focus moves from the entry to the button, but GTK tells of the button's focus from an idle
    # callback, which a loaded machine can run after the after state was read: the report shows
    # each focus change the two files hold, in tree order (the button's row before the entry's).
    states = page.locator(".a11y-diff li.states").filter(has_text="focused")
    expected = [
        f"{role} {json.dumps(name)}: {sign}focused"
        for role, name in (("push button", "Click me"), ("text", "Name"))
        if (sign := focus_change(folder, role, name))
    ]
    assert expected, "neither the button's nor the entry's focus changed in the recorded states"
    expect(states).to_have_count(len(expected))
    for row, text in zip(states.all(), expected, strict=True):
        expect(row).to_contain_text(text)
    expect(page.locator(".a11y-diff")).not_to_contain_text("null")
    keep_screenshot(page, request, "turn-2")
    renamed.scroll_into_view_if_needed()
    keep_screenshot(page, request, "turn-2-a11y-diff")

    page.keyboard.press("ArrowRight")
    expect(page.locator(".turn-detail h2")).to_have_text("Turn 3 · click")
    page.keyboard.press("ArrowRight")
    expect(page.locator(".turn-detail .error-box")).to_contain_text("ELEMENT_NOT_FOUND")
    keep_screenshot(page, request, "error-turn")


def test_clicking_a_turn_seeks_the_video_to_it(
    recorded: RecordedSession, report: Path, browser_page: Page, request: pytest.FixtureRequest
) -> None:
    page = browser_page
    page.goto(report.as_uri())
    video = page.locator("#video")
    expect(page.locator("#markers .mark")).to_have_count(4)  # the video's metadata is in
    offsets = [json.loads((t / "video.json").read_text())["offset_s"] for t in recorded.turns()]
    assert offsets == sorted(offsets) and offsets[0] > 0
    page.locator('#turns [data-turn="3"]').click()
    page.wait_for_function(
        f"Math.abs(document.getElementById('video').currentTime - {offsets[2]}) < 0.01", timeout=5000
    )
    assert video.evaluate("v => v.paused")
    page.locator('#markers [data-turn="1"]').click()
    expect(page.locator(".turn-detail h2")).to_have_text("Turn 1 · click")
    keep_screenshot(page, request, "video")
