"""A missing extra is a structured error that names the extra to install; nothing else is caught.

The packages are hidden in this process (``sys.modules[name] = None`` makes Python's import raise
ModuleNotFoundError, as for a package never installed); ``tests/test_packaging.py`` runs the same
commands in a venv really without the extras.
"""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.extras import needs_extra
from deskrig.orchestrator import cli_session
from deskrig.orchestrator.cli_common import stderr_console
from deskrig.orchestrator.models import OrchestratorConfig
from deskrig.orchestrator.runtimes import make_runtime


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """``modules`` (and any module already loaded under them) cannot be imported until the test ends."""
    for name in list(sys.modules):
        if name in modules or name.partition(".")[0] in modules:
            monkeypatch.delitem(sys.modules, name)
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def test_an_import_of_the_extras_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "rich")
    with pytest.raises(DeskrigError) as raised:
        stderr_console()
    error = raised.value
    assert error.code is ErrorCode.RUNTIME_UNAVAILABLE
    assert error.message == (
        "the orchestrator CLI's progress display needs the 'rich' package, which deskrig's 'orchestrator' extra installs"
    )
    assert error.remediation == "pip install 'deskrig[orchestrator]'"
    assert error.details == {"extra": "orchestrator", "module": "rich"}
    assert isinstance(error.__cause__, ModuleNotFoundError)


@pytest.mark.parametrize("runtime", ["docker", "swarm"])
def test_a_runtime_without_its_extra_says_which_to_install(
    monkeypatch: pytest.MonkeyPatch, runtime: str
) -> None:
    hide(monkeypatch, "docker")
    for loaded in ("deskrig.orchestrator.docker_backend", "deskrig.orchestrator.swarm_backend"):
        monkeypatch.delitem(sys.modules, loaded, raising=False)  # imported again, without docker
    with pytest.raises(DeskrigError) as raised:
        make_runtime(OrchestratorConfig.model_validate({"runtime": runtime}))
    assert raised.value.code is ErrorCode.RUNTIME_UNAVAILABLE
    assert raised.value.message.startswith(f"the {runtime} runtime needs the 'docker' package")
    assert raised.value.remediation == "pip install 'deskrig[orchestrator]'"


def test_any_other_missing_module_passes_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "kubernetes")
    with pytest.raises(ModuleNotFoundError) as raised, needs_extra("orchestrator", "a test"):
        import kubernetes  # noqa: F401  (another extra's package)
    assert raised.value.name == "kubernetes"
    with pytest.raises(ModuleNotFoundError), needs_extra("orchestrator", "a test"):
        import deskrig_no_such_module  # type: ignore[import-not-found]  # noqa: F401


class NoSessions:
    """An orchestrator service's client that has no sessions to list."""

    def __enter__(self) -> NoSessions:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def list(self) -> list[object]:
        return []


def test_session_ls_answers_json_without_the_extra_and_names_it_for_its_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hide(monkeypatch, "rich")
    monkeypatch.setattr(cli_session, "service_client", lambda args: NoSessions())
    assert cli_session.ls(argparse.Namespace(json=True)) == 0
    assert json.loads(capsys.readouterr().out) == []
    with pytest.raises(DeskrigError) as raised:
        cli_session.ls(argparse.Namespace(json=False))
    assert raised.value.message.startswith("session ls's table needs the 'rich' package")
    assert raised.value.remediation == "pip install 'deskrig[orchestrator]'"
