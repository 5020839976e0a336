"""What masking did to one image or text (counts per detector and engine, never the text): the
part of :mod:`deskrig.privacy` that recorded turns and audit lines carry. It loads no detector,
OCR engine or accessibility client, so reading recorded turns (``deskrig view``) loads none.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

#: The ACS metadata's names for the built-in detectors' counts.
ACS_COUNT_NAMES = {
    "email": "emailsRedacted",
    "phone": "phonesRedacted",
    "card": "creditCardsRedacted",
}


class MaskReport(BaseModel):
    """What was masked in one image or text: never the text itself."""

    enabled: bool = True
    counts: dict[str, int] = Field(default_factory=dict, description="Masked strings per detector")
    engines: dict[str, int] = Field(
        default_factory=dict, description="Masked strings per engine: tree (accessibility) or OCR (tesseract)"
    )
    fill: str = "black"

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, counts: Counter[str], engine: str) -> None:
        for kind, count in counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + count
        if counts:
            self.engines[engine] = self.engines.get(engine, 0) + sum(counts.values())

    def merged(self, other: MaskReport) -> MaskReport:
        merged = self.model_copy(deep=True)
        for engine, count in other.engines.items():
            merged.engines[engine] = merged.engines.get(engine, 0) + count
        for kind, count in other.counts.items():
            merged.counts[kind] = merged.counts.get(kind, 0) + count
        return merged

    def acs(self) -> dict[str, object]:
        """The ACS server's ``piiMasking`` metadata, plus the per-detector and per-engine counts."""
        built_in = {name: self.counts.get(kind, 0) for kind, name in ACS_COUNT_NAMES.items()}
        custom = sum(c for kind, c in self.counts.items() if kind not in ACS_COUNT_NAMES and kind != "iban")
        return {
            "enabled": self.enabled,
            **built_in,
            "ibansRedacted": self.counts.get("iban", 0),
            "customPatternsRedacted": custom,
            "counts": dict(self.counts),
            "engines": dict(self.engines),
        }


def masking_audit(report: MaskReport | None) -> dict[str, Any]:
    """The audit line's ``pii_masking`` field for a call whose output ``report`` describes."""
    return {} if report is None else {"pii_masking": report.model_dump(mode="json")}
