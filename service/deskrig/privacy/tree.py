"""The accessibility half of masking: what the tree says is shown where, for the image detector.

A leaf element (label, entry, cell) says what text it shows and where: it is a :class:`TextBox`
with what the detectors find in that text. The boxes come from the platform's accessibility source
(:meth:`~deskrig.a11y.source.AccessibilitySource.current_elements`: on Linux the live mirror of
each app's tree, one sync with the app per read, so it is never older than the pixels it explains) and are remembered per element, keyed by what
they depend on (the element, its texts, its bounds): an element that did not change costs neither
a detector pass nor a D-Bus call. An entry's findings are placed by the toolkit's character
extents (Text.GetRangeExtents); those are remembered only while the whole text fits in the entry,
since a field that scrolls moves its characters without changing its text or bounds.

The tree can be ahead of the pixels: an element whose findings were just replaced by other text,
or that just left the tree (removed, its window closed or unmapped, its app gone), may still show
them until the app or compositor repaints. Its last findings stay masked, uncounted, for
:data:`STALE_GRACE_S`.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deskrig.a11y import Element, ElementRef
from deskrig.a11y.access import A11yAccess
from deskrig.errors import DeskrigError
from deskrig.model import Bounds
from deskrig.privacy.detectors import Detectors

if TYPE_CHECKING:
    from deskrig.a11y.source import AccessibilitySource

#: Elements whose boxes are remembered (a few apps' worth).
ELEMENT_CACHE_SIZE = 8192
#: How long an element's findings stay masked after its text changed to something else or it left
#: the tree: the tree can be ahead of the pixels (the app repaints on its next frame, later on a
#: loaded machine), and a capture in between still shows the old text where the tree says otherwise.
STALE_GRACE_S = 1.0
_ElementKey = tuple[Hashable, ...]


@dataclass(frozen=True)
class TextBox:
    """A box (screen pixels) whose text the accessibility tree explains, and the personal data
    found in it per detector: none means nothing there to mask (and nothing for OCR to read)."""

    box: Bounds
    counts: tuple[tuple[str, int], ...] = ()
    #: Masked but not counted: what the element showed until just now (or where it was, until it
    #: left the tree) held personal data, and its pixels may not have been repainted yet
    #: (:data:`STALE_GRACE_S`).
    stale: bool = False


def _counted(detectors: Detectors, text: str) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(Counter(finding.kind for finding in detectors.find(text)).items()))


class TreeDetector:
    """The tree detector of one masker: the apps' text boxes, read from their mirrors."""

    def __init__(self, a11y: A11yAccess, detectors: Detectors, cache_size: int = ELEMENT_CACHE_SIZE) -> None:
        self.a11y = a11y
        self.detectors = detectors
        self._cache_size = cache_size
        self._elements: OrderedDict[_ElementKey, tuple[TextBox, ...]] = OrderedDict()
        self._client: AccessibilitySource | None = None
        #: What each element last showed (its key and boxes), to notice when that changes or goes.
        self._shown: OrderedDict[ElementRef, tuple[_ElementKey, tuple[TextBox, ...]]] = OrderedDict()
        #: Findings of what elements showed until just now, per what they showed, masked until their
        #: deadline: at most what :attr:`_shown` held within the last :data:`STALE_GRACE_S`.
        self._stale: dict[_ElementKey, tuple[tuple[TextBox, ...], float]] = {}
        self.clock: Callable[[], float] = time.monotonic
        #: GetRangeExtents batches asked (cache misses), for the tests of the cache.
        self.extent_reads = 0

    def version(self) -> Hashable | None:
        """Changes whenever the trees may have changed (an AT-SPI event arrived); None when that
        cannot be told (no tree read yet, no event feed). Any thread may ask."""
        client = self._client
        if client is None:
            return None
        events = client.events_version()
        return None if events is None else (id(client), *events)

    async def boxes(self, pids: Iterable[int]) -> list[TextBox]:
        """The text boxes of the apps with ``pids``; an app without a tree adds none (OCR reads
        its windows instead). Elements read before but not now (of these apps or of apps no
        longer asked about: their windows closed or unmapped) leave their findings held."""
        found: list[TextBox] = []
        now = self.clock()
        seen: set[ElementRef] = set()
        wanted = sorted(set(pids))
        client = await self._client_for(wanted)
        if client is not None:
            found += await self._read(client, wanted, now, seen)
        for gone in self._shown.keys() - seen:
            self._hold(*self._shown.pop(gone), now)
        self._stale = {key: held for key, held in self._stale.items() if held[1] > now}
        for held, _ in self._stale.values():
            found += held
        return found

    async def _read(
        self, client: AccessibilitySource, pids: list[int], now: float, seen: set[ElementRef]
    ) -> list[TextBox]:
        """The boxes of the apps with ``pids`` as they are now; adds the elements read to ``seen``."""
        found: list[TextBox] = []
        for pid in pids:
            try:
                elements = await client.current_elements(pid)
                for element in elements:
                    key, boxes = await self._element_boxes(client, element)
                    self._note_shown(element.ref, key, boxes, now)
                    seen.add(element.ref)
                    found += boxes
            except DeskrigError:
                continue
        return found

    async def _client_for(self, pids: list[int]) -> AccessibilitySource | None:
        """The accessibility client, when there are apps to read and a bus to read them on. With
        no app to read none is started: what was shown before is only held."""
        if not pids:
            return None
        try:
            self._client = await self.a11y.client()
        except DeskrigError:
            return None
        return self._client

    def _note_shown(self, ref: ElementRef, key: _ElementKey, boxes: tuple[TextBox, ...], now: float) -> None:
        """Remember what ``ref`` shows; when that changed from findings, hold those masked a while."""
        previous = self._shown.get(ref)
        self._shown[ref] = (key, boxes)
        self._shown.move_to_end(ref)
        if len(self._shown) > self._cache_size:
            self._shown.popitem(last=False)
        if previous is not None and previous[0] != key:
            self._hold(*previous, now)

    def _hold(self, key: _ElementKey, boxes: tuple[TextBox, ...], now: float) -> None:
        """Keep the findings among ``boxes`` (what an element showed as ``key``) masked a while."""
        held = tuple(TextBox(box.box, stale=True) for box in boxes if box.counts)
        if held:
            self._stale[key] = (held, now + STALE_GRACE_S)

    def forget(self) -> None:
        """Forget every element's boxes (the benchmark's "nothing known")."""
        self._elements.clear()

    async def _element_boxes(
        self, client: AccessibilitySource, element: Element
    ) -> tuple[_ElementKey, tuple[TextBox, ...]]:
        """The element's boxes, and the key of what they depend on."""
        bounds = element.bounds
        # Containers are left out: their bounds cover their children's, and a box that large
        # would explain (and keep OCR from reading) everything inside it.
        if bounds is None or element.child_count > 0 or bounds.width <= 0 or bounds.height <= 0:
            return (element.ref,), ()
        editable = "editable" in element.states
        key = (element.ref, element.name, element.text, element.text_truncated, bounds, editable)
        known = self._elements.get(key)
        if known is not None:
            self._elements.move_to_end(key)
            return key, known
        boxes, lasting = await self._find(client, element, bounds, editable)
        if lasting:
            self._elements[key] = boxes
            if len(self._elements) > self._cache_size:
                self._elements.popitem(last=False)
        return key, boxes

    async def _find(
        self, client: AccessibilitySource, element: Element, bounds: Bounds, editable: bool
    ) -> tuple[tuple[TextBox, ...], bool]:
        """The element's boxes, and whether they last while its key does. The whole element
        unless it is an entry whose text holds a finding and whose toolkit says where its
        characters are: then each finding's own span, and the rest stays readable."""
        shown = {t for t in (element.text or "", element.name) if t.strip()}
        if not shown:
            return (), True
        counts: Counter[str] = Counter()
        for each in shown:
            counts.update(dict(_counted(self.detectors, each)))
        whole = (TextBox(bounds, tuple(sorted(counts.items()))),)
        text = element.text
        if not counts or not editable or not text or element.text_truncated:
            return whole, True
        findings = self.detectors.find(text)
        if not findings:
            return whole, True
        self.extent_reads += 1
        spans = await client.text_extents(element, [(f.start, f.end) for f in findings] + [(0, len(text))])
        *found, laid_out = spans
        if laid_out is None or any(span is None for span in found):
            return whole, True  # the toolkit does not say where its characters are
        # Characters beyond the entry's edges scroll with the caret: read them again next time.
        lasting = laid_out.intersection(bounds) == laid_out
        boxes = [TextBox(bounds)]  # the rest of the entry: explained, nothing to mask
        for finding, span in zip(findings, found, strict=True):
            visible = span.intersection(bounds) if span is not None else None
            if visible is not None:
                boxes.append(TextBox(visible, ((finding.kind, 1),)))
        return tuple(boxes), lasting
