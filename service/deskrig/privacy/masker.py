"""Masking personal data in an image and in text, with two detectors used together.

The accessibility tree says what text each element shows and where (:mod:`deskrig.privacy.tree`):
a match there is masked with no OCR at all. What the tree does not explain (a canvas, an image of
text, an app without AT-SPI) is read by OCR: the tree's text boxes are painted over first, so OCR
reads only the rest, and its reads are cached by content (:mod:`deskrig.privacy.ocr`).

A capture of an unchanged screen reuses the boxes found before without looking at its pixels: the
caller vouches for the pixels (the desktop's damage serial, read before the grab, and the
blocked windows blacked out in them) and the tree detector for the trees (no AT-SPI event since).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from PIL import Image, ImageDraw, ImageFilter

from deskrig.a11y import Element, ElementQuery, Snapshot
from deskrig.a11y.access import A11yAccess
from deskrig.config import PiiMaskingPolicy
from deskrig.grabs import Grab
from deskrig.model import Bounds
from deskrig.privacy.detectors import Detectors
from deskrig.privacy.ocr import OcrEngine, Word
from deskrig.privacy.report import MaskReport
from deskrig.privacy.tree import TextBox, TreeDetector

#: Unchanged screens and regions whose boxes are remembered.
MASKED_CACHE_SIZE = 16
#: Pixels added around a masked box: glyphs overhang the boxes OCR and toolkits report.
PAD = 3
#: Radius of the blur fill, large enough that no glyph survives it.
BLUR_RADIUS = 12


class PiiMasker:
    """A policy's detectors, its tree detector, its OCR engine (loaded on first use) and its fill."""

    def __init__(
        self, policy: PiiMaskingPolicy, a11y: A11yAccess | None = None, ocr: OcrEngine | None = None
    ) -> None:
        """``a11y``: the accessibility client whose live mirrors the tree detector reads (it
        stores no snapshot, so never evicts an agent's); None: OCR alone."""
        self.policy = policy
        self.detectors = Detectors(policy)
        self.tree = TreeDetector(a11y, self.detectors) if a11y is not None else None
        self.ocr = (ocr or OcrEngine()) if policy.ocr else None
        self._lock = threading.Lock()
        #: Boxes found per unchanged screen (see :meth:`mask`): reused without a look at the pixels.
        self._masked: OrderedDict[Hashable, tuple[list[Bounds], MaskReport]] = OrderedDict()

    def wanted(self, asked: bool | None) -> bool:
        """Whether a call masks: always under a policy that is on (a call cannot turn it off),
        else when the call asks (``mask_pii`` / ``enablePIIMasking``)."""
        return self.policy.enabled or bool(asked)

    def new_report(self) -> MaskReport:
        return MaskReport(fill=self.policy.fill)

    def redact_text(self, text: str, report: MaskReport) -> str:
        redacted, counts = self.detectors.redact(text)
        report.add(counts, "tree")
        return redacted

    def redact_data(self, value: Any) -> Any:
        """JSON-ready ``value`` with every string in it redacted (the counts are not kept)."""
        if isinstance(value, str):
            return self.detectors.redact(value)[0]
        if isinstance(value, dict):
            return {key: self.redact_data(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.redact_data(item) for item in value]
        return value

    def redact_snapshot(
        self, snapshot: Snapshot, query: ElementQuery | None = None
    ) -> tuple[Snapshot, MaskReport]:
        """A copy of ``snapshot`` with every detected string replaced, and what was replaced;
        with ``query``, only the elements whose redacted names match it (what the client sees is
        what a query can match: a query for a masked string finds nothing, so it cannot tell
        whether the string is there)."""
        redacted: list[Element] = []
        found: dict[int, MaskReport] = {}
        for element in snapshot.elements:
            report = found[element.index] = self.new_report()
            update = {
                "name": self.redact_text(element.name, report),
                "description": self.redact_text(element.description, report),
            }
            if element.text is not None:
                update["text"] = self.redact_text(element.text, report)
            redacted.append(element.model_copy(update=update))
        total = self.new_report()
        app_name = self.redact_text(snapshot.app_name, total)
        copy = snapshot.model_copy(update={"elements": redacted, "app_name": app_name})
        if query is not None:
            copy = copy.matching(query)
        for element in copy.elements:
            total = total.merged(found[element.index])
        return copy, total

    def mask(
        self,
        grab: Grab,
        origin: tuple[int, int],
        tree: Callable[[], Iterable[TextBox]] = list,
        unchanged: Hashable | None = None,
    ) -> tuple[Grab, MaskReport]:
        """``grab`` (whose pixel (0, 0) is screen ``origin``) masked, and what was masked; ``tree``
        gives the tree detector's boxes. ``unchanged``: the caller's word for these pixels (the
        damage serial read before the grab, and what it blacked out): boxes found before for the
        same word, origin and size, with no AT-SPI event since, are reused without a look at the
        pixels or the trees. The input is never modified; without a finding it is handed back."""
        key = self._unchanged_key(grab, origin, unchanged)
        known = None
        if key is not None:
            with self._lock:
                known = self._masked.get(key)
                if known is not None:
                    self._masked.move_to_end(key)
        if known is not None:
            boxes, report = known[0], known[1].model_copy(deep=True)
        else:
            boxes, report, stale = self._find(grab, origin, tree())
            if key is not None and not stale:  # a held box must end with its deadline
                with self._lock:
                    self._masked[key] = (boxes, report.model_copy(deep=True))
                    if len(self._masked) > MASKED_CACHE_SIZE:
                        self._masked.popitem(last=False)
        return (self._fill(grab, boxes) if boxes else grab), report

    def _unchanged_key(
        self, grab: Grab, origin: tuple[int, int], unchanged: Hashable | None
    ) -> Hashable | None:
        """What an earlier capture must have matched for its boxes to be reused; None: nothing is.
        The trees' version is read before they are (in :meth:`mask`'s ``tree``), so an event that
        comes in while they are read makes the next capture search again."""
        if unchanged is None:
            return None
        trees = self.tree.version() if self.tree is not None else ()
        return None if trees is None else (unchanged, origin, grab.size, trees)

    def _find(
        self, grab: Grab, origin: tuple[int, int], tree: Iterable[TextBox]
    ) -> tuple[list[Bounds], MaskReport, bool]:
        """The boxes to fill and what they hold; and whether one is a finding held past its text."""
        report = self.new_report()
        stale = False
        frame = Bounds(x=origin[0], y=origin[1], width=grab.width, height=grab.height)
        boxes: list[Bounds] = []
        explained: list[Bounds] = []
        for text_box in tree:
            local = text_box.box.intersection(frame)
            if local is None:
                continue
            local = Bounds(x=local.x - frame.x, y=local.y - frame.y, width=local.width, height=local.height)
            explained.append(local)
            if text_box.counts:
                boxes.append(local)
                report.add(Counter(dict(text_box.counts)), "tree")
            elif text_box.stale:
                boxes.append(local)
                stale = True
        if self.ocr is not None:
            boxes += self._ocr_boxes(grab.image(), explained, report)
        return boxes, report, stale

    def _ocr_boxes(self, image: Image.Image, explained: list[Bounds], report: MaskReport) -> list[Bounds]:
        assert self.ocr is not None
        unexplained = image.convert("L")
        draw = ImageDraw.Draw(unexplained)
        for box in explained:
            # What the tree explains is not read again: painted out, in the colour at its corner
            # (an edge of another colour would be one more thing for OCR to look at).
            draw.rectangle(_corners(box), fill=unexplained.getpixel((box.x, box.y)))
        boxes: list[Bounds] = []
        counts: Counter[str] = Counter()
        for line in _lines(self.ocr.words(unexplained)):
            text, spans = _line_text(line)
            for finding in self.detectors.find(text):
                covered = [
                    word.box
                    for word, (start, end) in zip(line, spans, strict=True)
                    if start < finding.end and finding.start < end
                ]
                boxes.append(_union(covered))
                counts[finding.kind] += 1
        report.add(counts, "ocr")
        return boxes

    def _fill(self, grab: Grab, boxes: list[Bounds]) -> Grab:
        padded = [_padded(box, grab.size) for box in boxes]
        if self.policy.fill == "black":
            return grab.blacked_out(padded)  # on the grabbed pixels: no conversion, no re-encode path
        masked = grab.image().copy()
        for box in padded:
            region = masked.crop(box).filter(ImageFilter.GaussianBlur(BLUR_RADIUS))
            # A blur of a short string can still show its shape: flatten it to its mean colour.
            masked.paste(region.resize((1, 1)).resize(region.size), box)
        return Grab.of(masked)

    def forget(self) -> None:
        """Forget every screen searched and every OCR read (the benchmark's "changed screen"); the
        tree detector's elements stay known (each is keyed by what its boxes depend on)."""
        with self._lock:
            self._masked.clear()
        if self.ocr is not None:
            self.ocr.forget()

    def close(self) -> None:
        if self.ocr is not None:
            self.ocr.close()


def _corners(box: Bounds) -> tuple[int, int, int, int]:
    return box.x, box.y, box.x + box.width - 1, box.y + box.height - 1


def _padded(box: Bounds, size: tuple[int, int]) -> tuple[int, int, int, int]:
    return (
        max(box.x - PAD, 0),
        max(box.y - PAD, 0),
        min(box.x + box.width + PAD, size[0]),
        min(box.y + box.height + PAD, size[1]),
    )


def _union(boxes: list[Bounds]) -> Bounds:
    left, top = min(b.x for b in boxes), min(b.y for b in boxes)
    right, bottom = max(b.x + b.width for b in boxes), max(b.y + b.height for b in boxes)
    return Bounds(x=left, y=top, width=right - left, height=bottom - top)


def _lines(words: list[Word]) -> list[list[Word]]:
    lines: dict[tuple[int, int, int], list[Word]] = {}
    for word in words:
        lines.setdefault(word.line, []).append(word)
    return list(lines.values())


def _line_text(line: list[Word]) -> tuple[str, list[tuple[int, int]]]:
    """The line's words joined by spaces, and each word's span in that text."""
    spans = []
    position = 0
    for word in line:
        spans.append((position, position + len(word.text)))
        position += len(word.text) + 1
    return " ".join(word.text for word in line), spans
