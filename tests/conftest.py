"""Hooks every test directory shares: the ``toolkit`` parameters declared in tests/toolkits.py,
the ``backend`` parameter (every desktop backend in tests/rigprocs.py), and ``app_dir``, a folder
the rig's apps can use whoever they run as."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.rigprocs import BACKENDS, open_dir
from tests.toolkits import TOOLKITS, backends_for, runs_for, toolkits_for

#: Fixtures shared across folders: ``browser_page`` (Debian's Chromium through Playwright),
#: ``compressed_rows`` and ``compressing_threads`` (the bands TurboJPEG compresses) and ``ca_loads`` (CA bundles loaded).
pytest_plugins = ["tests.browser", "tests.frames", "tests.tls"]

#: Why toolkits were left out of tests, for the summary: test -> reasons.
_LEFT_OUT: dict[str, list[str]] = {}


@pytest.fixture
def app_dir() -> Iterator[Path]:
    """A folder for the files an app in a rig reads and writes (logs, triggers)."""
    with open_dir("deskrig-test-app-") as path:
        yield path


@pytest.fixture(scope="module")
def backend(request: pytest.FixtureRequest) -> str:
    """The desktop backend a rig runs (``deskrig rig run --backend``): a test asking for it runs on
    each in turn, as python-mss runs every test on every backend; module-scoped, so a module's rigs
    start once per backend. (A folder may override it to return that backend's desktop: the
    parameter is the backend's name, given by :func:`pytest_generate_tests`.)"""
    return str(request.param)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(*capabilities): run only on toolkits with these capabilities")
    config.addinivalue_line("markers", "without(*capabilities): run only on toolkits lacking these")
    config.addinivalue_line("markers", "only_on(*toolkits, why): run only on these toolkits, saying why")
    config.addinivalue_line("markers", "not_on(backend, why): leave this desktop backend out, saying why")


def _parametrized_by_mark(metafunc: pytest.Metafunc, argname: str) -> bool:
    """Whether the test names its own values for ``argname`` in a ``parametrize`` mark."""
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        if argname in ([n.strip() for n in names.split(",")] if isinstance(names, str) else names):
            return True
    return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every backend for a test asking for ``backend``, every toolkit for one asking for ``toolkit``
    that has what the test needs; for both, the pairs whose form runs on that backend."""
    uses_backend = "backend" in metafunc.fixturenames and not _parametrized_by_mark(metafunc, "backend")
    nodeid = metafunc.definition.nodeid
    if "toolkit" not in metafunc.fixturenames:
        if uses_backend:
            backends, left_out = backends_for(metafunc)
            assert backends, f"{nodeid} applies to no backend: {left_out}"
            if left_out:
                _LEFT_OUT[nodeid] = left_out
            metafunc.parametrize("backend", backends, indirect=True)
        return
    # Module scope: each toolkit's rig starts once per test module, not once per test.
    if uses_backend:
        runs, left_out = runs_for(metafunc)
        assert runs, f"{nodeid} applies to no toolkit on any backend: {left_out}"
        ids = [f"{backend}-{toolkit.name}" for backend, toolkit in runs]
        metafunc.parametrize(("backend", "toolkit"), runs, ids=ids, indirect=["backend"], scope="module")
    else:
        chosen, left_out = toolkits_for(metafunc)
        assert chosen, f"{nodeid} applies to no toolkit: {left_out}"
        metafunc.parametrize("toolkit", chosen, ids=[t.name for t in chosen], scope="module")
    if left_out:
        _LEFT_OUT[nodeid] = left_out


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run a module's tests backend by backend and toolkit by toolkit, so each rig starts once per
    module.

    pytest groups tests by a module-scoped parameter only when every test has the same values;
    tests generated for fewer toolkits would otherwise make it start the same rig again."""
    module_rank: dict[str, int] = {}
    for item in items:
        module_rank.setdefault(item.nodeid.split("::")[0], len(module_rank))

    def rank(item: pytest.Item) -> tuple[int, int]:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        backend, toolkit = params.get("backend"), params.get("toolkit")
        return (
            BACKENDS.index(backend) if backend in BACKENDS else -1,
            TOOLKITS.index(toolkit) if toolkit is not None else -1,
        )

    items.sort(key=lambda item: (module_rank[item.nodeid.split("::")[0]], *rank(item)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _LEFT_OUT:
        return
    terminalreporter.section("toolkits left out (declared in tests/toolkits.py)")
    for nodeid, reasons in sorted(_LEFT_OUT.items()):
        terminalreporter.write_line(f"{nodeid}: not on " + "; ".join(reasons))
