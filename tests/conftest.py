"""Hooks every test directory shares: the ``toolkit`` parameters declared in tests/toolkits.py,
and ``app_dir``, a folder the rig's apps can use whoever they run as."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.toolkits import TOOLKITS, toolkits_for

#: Fixtures shared across folders: ``browser_page`` (Debian's Chromium through Playwright).
pytest_plugins = ["tests.browser"]

#: Why toolkits were left out of tests, for the summary: test -> reasons.
_LEFT_OUT: dict[str, list[str]] = {}


@contextlib.contextmanager
def shared_app_dir() -> Iterator[Path]:
    """A folder for the files an app in a rig reads and writes (logs, triggers). A sway rig run
    as root runs its app as an unprivileged user, who cannot enter pytest's (root's) tmp_path."""
    path = Path(tempfile.mkdtemp(prefix="deskrig-test-app-"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def app_dir() -> Iterator[Path]:
    """:func:`shared_app_dir` for one test."""
    with shared_app_dir() as path:
        yield path


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(*capabilities): run only on toolkits with these capabilities")
    config.addinivalue_line("markers", "without(*capabilities): run only on toolkits lacking these")
    config.addinivalue_line("markers", "only_on(*toolkits, why): run only on these toolkits, saying why")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "toolkit" not in metafunc.fixturenames:
        return
    chosen, left_out = toolkits_for(metafunc)
    assert chosen, f"{metafunc.definition.nodeid} applies to no toolkit: {left_out}"
    if left_out:
        _LEFT_OUT[metafunc.definition.nodeid] = left_out
    # Module scope: each toolkit's rig starts once per test module, not once per test.
    metafunc.parametrize("toolkit", chosen, ids=[t.name for t in chosen], scope="module")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run a module's tests toolkit by toolkit, so each toolkit's rig starts once per module.

    pytest groups tests by a module-scoped parameter only when every test has the same values;
    tests generated for fewer toolkits would otherwise make it start the same rig again."""
    module_rank: dict[str, int] = {}
    for item in items:
        module_rank.setdefault(item.nodeid.split("::")[0], len(module_rank))

    def toolkit_rank(item: pytest.Item) -> int:
        callspec = getattr(item, "callspec", None)
        toolkit = callspec.params.get("toolkit") if callspec is not None else None
        return TOOLKITS.index(toolkit) if toolkit is not None else -1

    items.sort(key=lambda item: (module_rank[item.nodeid.split("::")[0]], toolkit_rank(item)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _LEFT_OUT:
        return
    terminalreporter.section("toolkits left out (declared in tests/toolkits.py)")
    for nodeid, reasons in sorted(_LEFT_OUT.items()):
        terminalreporter.write_line(f"{nodeid}: not on " + "; ".join(reasons))
