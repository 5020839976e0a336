"""Personal data masked in what leaves the rig: detectors, OCR, the masker and its tree half.

The policy is :class:`deskrig.config.PiiMaskingPolicy`; :class:`PiiMasker` applies it, and
``deskrig.observation`` calls it on every image and accessibility snapshot a client or a
recording gets.
"""

from deskrig.privacy.detectors import Detectors, Finding, iban_valid, luhn_valid
from deskrig.privacy.masker import MaskReport, PiiMasker, masking_audit
from deskrig.privacy.ocr import OcrEngine
from deskrig.privacy.tree import TextBox, TreeDetector

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
