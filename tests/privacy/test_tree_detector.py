"""The tree detector's memory of what elements showed, over a scripted mirror (no AT-SPI bus):
the tree can be ahead of the pixels, so findings an element just stopped showing stay masked
until the app has had time to repaint."""

from __future__ import annotations

from typing import Any

import anyio
from PIL import Image

from deskrig.a11y import Element, ElementRef
from deskrig.config import PiiMaskingPolicy
from deskrig.grabs import Grab
from deskrig.model import Bounds
from deskrig.privacy.masker import PiiMasker
from deskrig.privacy.tree import STALE_GRACE_S, TextBox

LABEL = Bounds(x=10, y=10, width=200, height=20)
EMAIL = "jane.doe@example.com"


class ScriptedMirror:
    """The two calls the tree detector makes of an accessibility client, over a settable tree."""

    def __init__(self) -> None:
        self.text = EMAIL
        self.events = 0

    async def current_elements(self, pid: int) -> list[Element]:
        label = Element(
            index=1,
            parent=0,
            depth=1,
            role="label",
            name=self.text,
            states=["showing", "visible"],
            bounds=LABEL,
            ref=ElementRef(":1.7", "/org/a11y/atspi/accessible/7"),
        )
        return [label]

    def events_version(self) -> tuple[int, int]:
        return (0, self.events)

    async def text_extents(self, element: Element, spans: list[tuple[int, int]]) -> list[Bounds | None]:
        return [None for _ in spans]


class ScriptedAccess:
    def __init__(self, mirror: ScriptedMirror) -> None:
        self.mirror = mirror

    async def client(self) -> Any:
        return self.mirror


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def masker_over(mirror: ScriptedMirror, clock: Clock) -> PiiMasker:
    masker = PiiMasker(PiiMaskingPolicy(enabled=True, ocr=False), a11y=ScriptedAccess(mirror))  # type: ignore[arg-type]
    assert masker.tree is not None
    masker.tree.clock = clock
    return masker


def boxes(masker: PiiMasker) -> list[TextBox]:
    assert masker.tree is not None
    return anyio.run(masker.tree.boxes, [42])


def test_findings_an_element_stopped_showing_stay_masked_until_the_grace_ends() -> None:
    mirror, clock = ScriptedMirror(), Clock()
    masker = masker_over(mirror, clock)
    assert boxes(masker) == [TextBox(LABEL, (("email", 1),))]

    mirror.text, mirror.events = "nothing personal", 1  # the tree changed; the pixels may not have
    assert boxes(masker) == [TextBox(LABEL), TextBox(LABEL, stale=True)]

    clock.now += STALE_GRACE_S / 2
    assert TextBox(LABEL, stale=True) in boxes(masker)
    clock.now += STALE_GRACE_S
    assert boxes(masker) == [TextBox(LABEL)]


def test_a_held_box_is_filled_but_not_counted_nor_reused_past_its_deadline() -> None:
    mirror, clock = ScriptedMirror(), Clock()
    masker = masker_over(mirror, clock)
    white = Grab.of(Image.new("RGB", (320, 200), "white"))
    assert masker.tree is not None

    def capture() -> tuple[Image.Image, dict[str, int]]:
        found = boxes(masker)
        masked, report = masker.mask(white, (0, 0), tree=lambda: found, unchanged="screen-1")
        return masked.image(), dict(report.counts)

    image, counts = capture()
    assert counts == {"email": 1} and image.getpixel((100, 20)) == (0, 0, 0)

    mirror.text, mirror.events = "nothing personal", 1
    image, counts = capture()
    assert counts == {} and image.getpixel((100, 20)) == (0, 0, 0)  # masked, not counted

    clock.now += 2 * STALE_GRACE_S  # same pixels, same events: only the deadline passed
    image, counts = capture()
    assert counts == {} and image.getpixel((100, 20)) == (255, 255, 255)
