"""Finding personal data in text: e-mail addresses, phone numbers, payment cards, IBANs, custom regexes.

Each detector is a regex plus, where the data has one, a checksum: a card number must pass the
Luhn check and an IBAN the ISO 13616 mod-97 check, so order numbers and dates are left alone.
Detectors run in a fixed order (custom patterns, cards, IBANs, e-mail, phones) and a span claimed
by one is not claimed again, so a card number is never also counted as a phone number.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from deskrig.config import PiiMaskingPolicy

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<![\w.])\d(?:[ -]?\d){12,18}(?![\w.])")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
#: International (+CC ...) or grouped national numbers; 7 to 15 digits (E.164) are checked below.
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,8}(?:[ .-]\d{2,8}){1,4}(?![\w])"
)
#: Dates look like grouped numbers; they are not phone numbers.
_DATE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}")

#: What replaces a detected string in text (accessibility trees, recorded arguments).
REDACTED = "[redacted:{kind}]"


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def luhn_valid(number: str) -> bool:
    """The Luhn check of a card number's digits (separators ignored)."""
    digits = [int(ch) for ch in _digits(number)]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2:
            digit *= 2
            digit -= 9 if digit > 9 else 0
        total += digit
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """The ISO 13616 mod-97 check of an IBAN (spaces ignored)."""
    iban = text.replace(" ", "").upper()
    if not 15 <= len(iban) <= 34:
        return False
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _phone_valid(text: str) -> bool:
    return 7 <= len(_digits(text)) <= 15 and not _DATE.fullmatch(text)


@dataclass(frozen=True)
class Finding:
    """One detected string: which detector, and where it lies in the text."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class _Detector:
    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[str], bool] | None = None


_BUILT_IN = {
    "card": _Detector("card", _CARD, luhn_valid),
    "iban": _Detector("iban", _IBAN, iban_valid),
    "email": _Detector("email", _EMAIL),
    "phone": _Detector("phone", _PHONE, _phone_valid),
}
_ORDER = ("card", "iban", "email", "phone")


class Detectors:
    """The detectors a policy turns on, compiled once."""

    def __init__(self, policy: PiiMaskingPolicy) -> None:
        custom = [_Detector(name, re.compile(pattern)) for name, pattern in policy.custom_patterns.items()]
        self._detectors = custom + [_BUILT_IN[kind] for kind in _ORDER if kind in policy.detectors]
        self.kinds = [detector.kind for detector in self._detectors]

    def find(self, text: str) -> list[Finding]:
        """Every detected string in ``text``, without overlaps, in text order."""
        findings: list[Finding] = []
        for detector in self._detectors:
            for match in detector.pattern.finditer(text):
                start, end = match.span()
                if start == end or any(f.start < end and start < f.end for f in findings):
                    continue
                if detector.valid is None or detector.valid(match.group()):
                    findings.append(Finding(detector.kind, start, end))
        return sorted(findings, key=lambda f: f.start)

    def redact(self, text: str) -> tuple[str, Counter[str]]:
        """``text`` with every finding replaced by :data:`REDACTED`, and the count per detector."""
        counts: Counter[str] = Counter()
        parts: list[str] = []
        last = 0
        for finding in self.find(text):
            parts += [text[last : finding.start], REDACTED.format(kind=finding.kind)]
            counts[finding.kind] += 1
            last = finding.end
        return "".join(parts) + text[last:], counts
