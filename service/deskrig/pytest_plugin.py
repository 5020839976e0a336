"""pytest plugin: a deskrig rig per test (or per test session) from the host orchestrator.

Options, as command-line flags and as ini keys (the flag wins), echoed in the report header:

    --deskrig-image IMAGE      deskrig_image      rig image (default deskrig/rig:latest)
    --deskrig-app CMD          deskrig_app        app command line (default: the image's)
    --deskrig-backend NAME     deskrig_backend    the rigs' desktop: x11 or sway (default: the image's)
    --deskrig-scope SCOPE      deskrig_scope      function (default) or session
    --deskrig-video / --deskrig-no-video  deskrig_video   record an mp4 too (default on)
    --deskrig-keep             deskrig_keep       keep artifacts of passing tests too
    --deskrig-artifacts DIR    deskrig_artifacts  where artifacts go (default <rootdir>/deskrig-artifacts)
    --deskrig-max-sessions N   deskrig_max_sessions   rigs at once (default from CPUs and memory)
    --deskrig-ready-timeout S  deskrig_ready_timeout  seconds a rig may take to be ready (default 60)
    --deskrig-runtime NAME     deskrig_runtime    where rigs run: docker (default), swarm, kubernetes

The marker ``@pytest.mark.deskrig(image=..., app=..., backend=..., scope=..., video=..., size=..., env=...)``
overrides them per test. A passing test's rig leaves nothing behind (unless kept); a failing
test keeps its turn folders and video, and its report says where; the terminal summary names
the HTML trajectory report (``deskrig view``) written beside them. The fixtures live in
:mod:`deskrig.pytest_fixtures`; this module only wires options, markers and reports.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from deskrig import pytest_fixtures
from deskrig.pytest_fixtures import KEPT_KEY, REPORTS_KEY, RIG_KEY, PluginOptions

#: (name, help, kind) of the options that are one flag and one ini key each; video has two flags.
_OPTIONS: list[tuple[str, str, str]] = [
    ("image", "rig image (default deskrig/rig:latest)", "str"),
    ("app", "app command line for the rig (default: the image's)", "str"),
    ("backend", "the rig's desktop: x11 or sway (default: the image's)", "str"),
    ("scope", "rig per 'function' (default) or one per 'session'", "str"),
    ("keep", "keep the artifacts of passing tests too", "bool"),
    ("artifacts", "directory for rig artifacts (default <rootdir>/deskrig-artifacts)", "str"),
    ("max_sessions", "rigs at once (default from CPUs and memory)", "str"),
    ("ready_timeout", "seconds a rig may take to become ready (default 60)", "str"),
    ("runtime", "where rigs run: docker (default), swarm or kubernetes", "str"),
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("deskrig", "deskrig rigs (the deskrig_rig fixture)")
    for name, help_text, kind in _OPTIONS:
        flag = "--deskrig-" + name.replace("_", "-")
        if kind == "bool":
            group.addoption(flag, action="store_true", default=None, dest=f"deskrig_{name}", help=help_text)
            parser.addini(f"deskrig_{name}", help_text, type="bool", default=None)
        else:
            group.addoption(flag, default=None, dest=f"deskrig_{name}", help=help_text)
            parser.addini(f"deskrig_{name}", help_text, type="string", default=None)
    group.addoption(
        "--deskrig-video",
        action="store_true",
        default=None,
        dest="deskrig_video",
        help="record an mp4 (default)",
    )
    group.addoption(
        "--deskrig-no-video", action="store_false", dest="deskrig_video", help="do not record an mp4"
    )
    parser.addini("deskrig_video", "record an mp4 of each rig (default true)", type="bool", default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "deskrig(image=None, app=None, backend=None, scope=None, video=None, size=None, env=None): "
        "how the deskrig_rig fixture builds this test's rig",
    )
    config.pluginmanager.register(pytest_fixtures, "deskrig-fixtures")


def pytest_report_header(config: pytest.Config) -> str:
    return PluginOptions.from_config(config).header()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(REPORTS_KEY, {})[report.when] = report
    rig = item.stash.get(RIG_KEY, None)
    if rig is not None and report.failed:
        report.sections.append(("deskrig", f"rig {rig.id}: {rig.kept} are kept in {rig.artifacts_dir}"))
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    kept = config.stash.get(KEPT_KEY, [])
    if kept:
        terminalreporter.section("deskrig artifacts")
        for artifacts in kept:
            for line in artifacts.lines():
                terminalreporter.write_line(line)
