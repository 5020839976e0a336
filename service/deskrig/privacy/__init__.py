"""Personal data masked in what leaves the rig: detectors, OCR, the masker and its tree half.

The policy is :class:`deskrig.config.PiiMaskingPolicy`; :class:`PiiMasker` applies it, and
``deskrig.observation`` calls it on every image and accessibility snapshot a client or a
recording gets.

Each name loads its own module on first use: a reader of recorded turns wants :class:`MaskReport`
alone, not the OCR engine and the accessibility client the masker brings.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deskrig.privacy.detectors import Detectors, Finding, iban_valid, luhn_valid
    from deskrig.privacy.masker import PiiMasker
    from deskrig.privacy.ocr import OcrEngine
    from deskrig.privacy.report import MaskReport, masking_audit
    from deskrig.privacy.tree import TextBox, TreeDetector

#: The module of each name this package exports.
_MODULES = {
    "Detectors": "detectors",
    "Finding": "detectors",
    "iban_valid": "detectors",
    "luhn_valid": "detectors",
    "MaskReport": "report",
    "masking_audit": "report",
    "OcrEngine": "ocr",
    "PiiMasker": "masker",
    "TextBox": "tree",
    "TreeDetector": "tree",
}

__all__ = [
    "Detectors",
    "Finding",
    "MaskReport",
    "OcrEngine",
    "PiiMasker",
    "TextBox",
    "TreeDetector",
    "iban_valid",
    "luhn_valid",
    "masking_audit",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
