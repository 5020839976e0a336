"""One tool call's outcome as its client saw it, the tally of many, and the suite's Markdown report
of them on stdout."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Literal

from pydantic import BaseModel, Field

OutcomeKind = Literal["ok", "error", "hang", "protocol"]


class Outcome(BaseModel):
    """One tool call as its client saw it."""

    tool: str
    kind: OutcomeKind
    #: The error code for ``error``; the exception's name or JSON-RPC code for ``protocol``.
    code: str | None = None
    ms: float
    #: For errors: whether the result matched the tool's outputSchema (a strict client checks).
    schema_valid: bool | None = None


class Tally(BaseModel):
    """Counts of outcomes: the figures every call-making part reports."""

    calls: int = 0
    ok: int = 0
    errors_by_code: dict[str, int] = Field(default_factory=dict)
    hangs: int = 0
    protocol_errors: dict[str, int] = Field(default_factory=dict)
    #: Error results that do not match the tool's outputSchema (a strict client drops them).
    errors_off_schema: int = 0

    @property
    def internal_errors(self) -> int:
        return self.errors_by_code.get("INTERNAL_ERROR", 0)

    @property
    def failures(self) -> int:
        """Outcomes that are defects whatever the input: internal errors, hangs, protocol errors."""
        return self.internal_errors + self.hangs + sum(self.protocol_errors.values())

    def add(self, outcome: Outcome) -> None:
        self.calls += 1
        if outcome.kind == "ok":
            self.ok += 1
        elif outcome.kind == "hang":
            self.hangs += 1
        elif outcome.kind == "error":
            _bump(self.errors_by_code, outcome.code or "(no code)")
            self.errors_off_schema += outcome.schema_valid is False
        else:
            _bump(self.protocol_errors, outcome.code or "?")

    def merge(self, other: Tally) -> None:
        self.calls += other.calls
        self.ok += other.ok
        self.hangs += other.hangs
        self.errors_off_schema += other.errors_off_schema
        for mine, theirs in (
            (self.errors_by_code, other.errors_by_code),
            (self.protocol_errors, other.protocol_errors),
        ):
            for key, count in theirs.items():
                _bump(mine, key, count)


def _bump(counts: dict[str, int], key: str, by: int = 1) -> None:
    counts[key] = counts.get(key, 0) + by


def format_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{key} {n}" for key, n in Counter(counts).most_common()) or "-"


def write(text: str) -> None:
    """The suite's report on stdout (a benchmark's own output, not a server's)."""
    sys.stdout.write(text)
    sys.stdout.flush()


def table(title: str, header: list[str], rows: list[list[str]], numeric_from: int = 1) -> None:
    """A Markdown table; columns from ``numeric_from`` on are right-aligned."""
    lines = [f"\n### {title}\n", "| " + " | ".join(header) + " |"]
    lines.append("|" + "---|" * numeric_from + "---:|" * (len(header) - numeric_from))
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    write("\n".join(lines) + "\n")


def tally_row(name: str, tally: Tally) -> list[str]:
    return [
        name,
        str(tally.calls),
        str(tally.ok),
        format_counts(tally.errors_by_code),
        str(tally.internal_errors),
        str(tally.hangs),
        format_counts(tally.protocol_errors),
    ]


TALLY_HEADER = ["", "calls", "ok", "errors by code", "INTERNAL_ERROR", "hangs", "protocol errors"]
