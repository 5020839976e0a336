"""The test tree's own house rules, read from its sources: shared helpers live in helper modules
(``helpers.py``, ``conftest.py``, ``tests/frames.py`` ...), never in a test module another one
imports, and a skip reason that names a file names one that exists."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
#: A file named in a skip reason: ``test_native_host.py``, ``.github/workflows/macos.yml``.
FILE_NAME = re.compile(r"[\w./-]+\.(?:py|ya?ml)\b")


def sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(TESTS.rglob("*.py")):
        if "apps" not in path.relative_to(TESTS).parts:  # the fixture apps are programs, not tests
            yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))


def imported_modules(node: ast.AST) -> list[str]:
    """The modules an import statement takes names from (``from . import test_x`` takes test_x)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.module:
            return [node.module]
        return [alias.name for alias in node.names]
    return []


def test_no_test_module_imports_from_another() -> None:
    offending = [
        f"{where}:{node.lineno} imports {module}"
        for where, tree in sources()
        for node in ast.walk(tree)
        for module in imported_modules(node)
        if module.rpartition(".")[2].startswith("test_")
    ]
    assert not offending, "move what they share into a helper module (helpers.py, conftest.py)"


def skip_reasons(tree: ast.Module) -> Iterator[str]:
    """The reasons of ``pytest.mark.skipif(..., reason=...)`` and ``pytest.skip(...)`` calls."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = ast.unparse(node.func)
        texts = [k.value for k in node.keywords if k.arg == "reason"]
        if called in ("pytest.skip", "pytest.mark.skip", "pytest.mark.skipif"):
            texts += node.args[:1] if called == "pytest.skip" else []
            for text in texts:
                if isinstance(text, ast.Constant) and isinstance(text.value, str):
                    yield text.value


def test_skip_reasons_name_files_that_exist() -> None:
    test_files = {path.name for path in TESTS.rglob("*.py")}
    missing = [
        f"{where}: {reason!r}"
        for where, tree in sources()
        for reason in skip_reasons(tree)
        for name in FILE_NAME.findall(reason)
        if not (ROOT / name).exists() and name not in test_files
    ]
    assert not missing
