"""The accessibility half of masking: text boxes for the image detector, redacted snapshots for text.

A snapshot's leaf elements (labels, entries, cells) say what text they show and where; they are
the tree detector's :class:`~deskrig.privacy.masker.TextBox` es. A snapshot sent to a client
(``get_app_state``, the recorder's state files) has every detected string replaced in its names,
descriptions and texts; the stored snapshot keeps the originals, so element lookups still work.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from deskrig.a11y import Element, Snapshot
from deskrig.a11y.access import A11yAccess
from deskrig.errors import DeskrigError
from deskrig.privacy.detectors import Detectors
from deskrig.privacy.masker import MaskReport, PiiMasker, TextBox

if TYPE_CHECKING:  # the AT-SPI client loads dbus-fast, a Linux-only dependency
    from deskrig.a11y.atspi import AccessibilityClient

#: Elements read per app for the tree detector (the mirror holds them; this only caps the copy).
MAX_TREE_ELEMENTS = 5000


def text_boxes(elements: Iterable[Element]) -> list[TextBox]:
    """The text each showing leaf element displays (its text, else its name), with its bounds.

    Containers are left out: their bounds cover their children's, and a box that large would
    explain (and keep OCR from reading) everything inside it."""
    boxes = []
    for element in elements:
        if element.bounds is None or element.child_count > 0 or element.bounds.width <= 0:
            continue
        for text in {element.text or "", element.name}:
            if text.strip():
                boxes.append(TextBox(text, element.bounds))
    return boxes


async def app_text_boxes(a11y: A11yAccess, pids: Iterable[int], detectors: Detectors) -> list[TextBox]:
    """The tree detector's boxes for the apps with ``pids``; an app without a tree adds none (OCR
    reads its windows instead)."""
    boxes: list[TextBox] = []
    try:
        client = await a11y.client()
    except DeskrigError:
        return boxes
    for pid in sorted(set(pids)):
        try:
            snapshot = await client.snapshot(pid, max_elements=MAX_TREE_ELEMENTS)
            for element in snapshot.elements:
                boxes += await _element_boxes(client, element, detectors)
        except DeskrigError:
            continue
    return boxes


async def _element_boxes(
    client: AccessibilityClient, element: Element, detectors: Detectors
) -> list[TextBox]:
    """The element's text box; for an entry whose text holds a finding, the finding's own span
    (Text.GetRangeExtents), so the text around it stays readable; the whole element where the
    toolkit does not say where its characters are."""
    boxes = text_boxes([element])
    if not boxes or "editable" not in element.states or not element.text or element.text_truncated:
        return boxes
    findings = detectors.find(element.text)
    if not findings:
        return boxes
    spans = await client.text_extents(element, [(f.start, f.end) for f in findings])
    if any(span is None for span in spans):
        return boxes
    # The rest of the entry is explained by the tree with nothing to mask: a box of no findings.
    rest = [TextBox("", box.box) for box in boxes]
    return rest + [
        TextBox(element.text[f.start : f.end], span) for f, span in zip(findings, spans, strict=True) if span
    ]


def redact_snapshot(masker: PiiMasker, snapshot: Snapshot) -> tuple[Snapshot, MaskReport]:
    """A copy of ``snapshot`` with every detected string replaced, and what was replaced."""
    report = masker.new_report()

    def redact(element: Element) -> Element:
        update = {
            "name": masker.redact_text(element.name, report),
            "description": masker.redact_text(element.description, report),
        }
        if element.text is not None:
            update["text"] = masker.redact_text(element.text, report)
        return element.model_copy(update=update)

    elements = [redact(element) for element in snapshot.elements]
    app_name = masker.redact_text(snapshot.app_name, report)
    return snapshot.model_copy(update={"elements": elements, "app_name": app_name}), report
