"""The README and the files that point into the repository stay true to the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deskrig.errors import ErrorCode

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    """The README section under ``## title`` (or ``### title``), up to the next heading of that level."""
    match = re.search(rf"^(#+) {re.escape(title)}\n(.*?)(?=^\1 )", README, re.S | re.M)
    assert match, f"README has no section {title!r}"
    return match.group(2)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_error_code_is_documented(code: ErrorCode) -> None:
    assert f"`{code.value}`" in section("Errors")


def test_benchmarks_section_has_a_table() -> None:
    lines = section("Benchmarks").splitlines()
    header = [i for i, line in enumerate(lines) if line.startswith("|")]
    assert header, "the Benchmarks section has no table"
    assert re.match(r"^\|(\s*-+\s*\|)+$", lines[header[0] + 1]), "the table has no separator row"
    assert len(header) > 2, "the table has no rows"


def pointer_files() -> list[Path]:
    return [ROOT / "compose.yaml", *ROOT.glob("images/**/Dockerfile"), *ROOT.glob("scripts/*")]


@pytest.mark.parametrize("path", pointer_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_documents_pointed_to_exist(path: Path) -> None:
    """Comments like "see images/README.md" name files that are in the repository."""
    for reference in re.findall(r"[\w./-]+\.md\b", path.read_text()):
        if reference.startswith("/"):
            continue
        assert (ROOT / reference).is_file(), f"{path.name} points to {reference}, which does not exist"
