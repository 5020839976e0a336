"""The tree detector's memory of what elements showed, over a scripted mirror (no AT-SPI bus):
the tree can be ahead of the pixels, so findings an element just stopped showing (its text
changed, or it left the tree) stay masked until the app has had time to repaint; and an entry's
character extents, a round trip to the app, are read again only when what it shows changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from PIL import Image

from deskrig.a11y import Element, ElementRef
from deskrig.config import PiiMaskingPolicy
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.grabs import Grab
from deskrig.model import Bounds, WindowInfo
from deskrig.observation import Observation
from deskrig.privacy.masker import PiiMasker
from deskrig.privacy.tree import STALE_GRACE_S, TextBox
from deskrig.security import WindowBlocklist

LABEL = Bounds(x=10, y=10, width=200, height=20)
SCREEN = Bounds(x=0, y=0, width=320, height=200)
EMAIL = "jane.doe@example.com"
CHAR_WIDTH = 5


class ScriptedMirror:
    """The two calls the tree detector makes of an accessibility client, over a settable tree."""

    def __init__(self) -> None:
        self.text = EMAIL
        self.events = 0
        self.label_shown = True
        self.app_running = True
        #: An editable entry rather than a label, whose toolkit says where its characters are:
        #: each character ``CHAR_WIDTH`` wide from the entry's left edge, shifted by ``scrolled``.
        self.entry = False
        self.scrolled = 0

    async def current_elements(self, pid: int) -> list[Element]:
        if not self.app_running:
            raise DeskrigError(ErrorCode.APP_NOT_RUNNING, f"no app with pid {pid}")
        if not self.label_shown:
            return []
        label = Element(
            index=1,
            parent=0,
            depth=1,
            role="entry" if self.entry else "label",
            name="" if self.entry else self.text,
            text=self.text if self.entry else None,
            states=["showing", "visible", *(["editable"] if self.entry else [])],
            bounds=LABEL,
            ref=ElementRef(":1.7", "/org/a11y/atspi/accessible/7"),
        )
        return [label]

    def events_version(self) -> tuple[int, int]:
        return (0, self.events)

    async def text_extents(self, element: Element, spans: list[tuple[int, int]]) -> list[Bounds | None]:
        if not self.entry:
            return [None for _ in spans]
        left = LABEL.x - self.scrolled
        return [
            Bounds(
                x=left + start * CHAR_WIDTH, y=LABEL.y, width=(end - start) * CHAR_WIDTH, height=LABEL.height
            )
            for start, end in spans
        ]


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


def boxes(masker: PiiMasker, pids: tuple[int, ...] = (42,)) -> list[TextBox]:
    assert masker.tree is not None
    return anyio.run(masker.tree.boxes, list(pids))


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


def _remove_label(mirror: ScriptedMirror) -> tuple[int, ...]:
    mirror.label_shown, mirror.events = False, 1
    return (42,)


def _quit_app(mirror: ScriptedMirror) -> tuple[int, ...]:
    mirror.app_running, mirror.events = False, 1
    return (42,)


def _close_window(mirror: ScriptedMirror) -> tuple[int, ...]:
    mirror.events = 1
    return ()  # the app's window is gone from the screen: its pid is not asked about


@pytest.mark.parametrize(
    "leave",
    [_remove_label, _quit_app, _close_window],
    ids=["removed-from-the-tree", "app-gone", "window-closed"],
)
def test_findings_of_an_element_that_left_the_tree_stay_masked_until_the_grace_ends(
    leave: Callable[[ScriptedMirror], tuple[int, ...]],
) -> None:
    mirror, clock = ScriptedMirror(), Clock()
    masker = masker_over(mirror, clock)
    assert boxes(masker) == [TextBox(LABEL, (("email", 1),))]

    pids = leave(mirror)  # the tree says it is gone; its pixels may not be yet
    assert boxes(masker, pids) == [TextBox(LABEL, stale=True)]

    clock.now += STALE_GRACE_S / 2
    assert boxes(masker, pids) == [TextBox(LABEL, stale=True)]
    clock.now += STALE_GRACE_S
    assert boxes(masker, pids) == []


def test_an_element_that_left_the_tree_is_held_once() -> None:
    """Held from when it was last seen: reading on while it stays gone does not extend the hold."""
    mirror, clock = ScriptedMirror(), Clock()
    masker = masker_over(mirror, clock)
    boxes(masker)
    _remove_label(mirror)
    for _ in range(3):
        assert boxes(masker) == [TextBox(LABEL, stale=True)]
        clock.now += STALE_GRACE_S / 3
    clock.now += STALE_GRACE_S / 3
    assert boxes(masker) == []


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


def test_a_screen_capture_just_after_the_last_window_closed_still_masks_what_it_showed() -> None:
    """With no window left to ask about, the capture still asks the tree detector for held boxes."""
    mirror, clock = ScriptedMirror(), Clock()
    masker = masker_over(mirror, clock)
    white = Grab.of(Image.new("RGB", (SCREEN.width, SCREEN.height), "white"))
    window = WindowInfo(id=1, title="contacts", app="contacts", pid=42, bounds=SCREEN)

    def capture(windows: list[WindowInfo]) -> Image.Image:
        observation = Observation(None, WindowBlocklist([]), windows, masker)  # type: ignore[arg-type]

        async def redacted() -> Image.Image:
            pixels = await anyio.to_thread.run_sync(observation.redact, white, SCREEN)
            return pixels.frame.image()

        return anyio.run(redacted)

    assert capture([window]).getpixel((100, 20)) == (0, 0, 0)
    mirror.events = 1
    assert capture([]).getpixel((100, 20)) == (0, 0, 0)  # closed, maybe not yet repainted
    clock.now += 2 * STALE_GRACE_S
    assert capture([]).getpixel((100, 20)) == (255, 255, 255)


def test_an_entrys_character_extents_are_read_once_while_it_shows_the_same() -> None:
    """A finding in an editable entry is masked by its characters' own boxes, which cost a round
    trip to the app (GetRangeExtents): read once while the entry shows the same text in the same
    place, and again once that changes."""
    mirror, clock = ScriptedMirror(), Clock()
    mirror.entry = True
    mirror.text = f"mail {EMAIL}"
    masker = masker_over(mirror, clock)
    assert masker.tree is not None
    email = Bounds(x=LABEL.x + 5 * CHAR_WIDTH, y=LABEL.y, width=len(EMAIL) * CHAR_WIDTH, height=LABEL.height)
    for _ in range(3):
        mirror.events += 1
        assert boxes(masker) == [TextBox(LABEL), TextBox(email, (("email", 1),))]
    assert masker.tree.extent_reads == 1

    mirror.text, mirror.events = f"e-mail {EMAIL}", mirror.events + 1
    moved = Bounds(x=email.x + 2 * CHAR_WIDTH, y=email.y, width=email.width, height=email.height)
    assert TextBox(moved, (("email", 1),)) in boxes(masker)
    assert masker.tree.extent_reads == 2


def test_an_entry_scrolled_past_its_edges_has_its_extents_read_every_time() -> None:
    """Characters beyond an entry's edges move with its caret, which no event reports: such an
    entry's boxes are not kept."""
    mirror, clock = ScriptedMirror(), Clock()
    mirror.entry, mirror.scrolled = True, 2 * CHAR_WIDTH
    mirror.text = f"mail {EMAIL} and a long tail that runs past the entry's right edge"
    masker = masker_over(mirror, clock)
    assert masker.tree is not None
    for reads in (1, 2, 3):
        assert any(box.counts == (("email", 1),) for box in boxes(masker))
        assert masker.tree.extent_reads == reads
