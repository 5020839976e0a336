"""deskrig.files: the one atomic-write helper the rig, the tools and the orchestrator share."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from deskrig.files import write_atomic, write_temp


@pytest.fixture
def umask() -> Iterator[None]:
    """A restrictive umask for one test, so an explicit mode visibly overrides it."""
    old = os.umask(0o077)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_replaces_the_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    write_atomic(target, b'{"v": 1}')
    write_atomic(target, b'{"v": 2}')
    assert target.read_bytes() == b'{"v": 2}'
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_an_explicit_mode_is_exact_whatever_the_umask(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "journal.json"
    write_atomic(target, b"{}", mode=mode)
    assert _mode(target) == mode


@pytest.mark.usefixtures("umask")
def test_without_a_mode_the_umask_decides(tmp_path: Path) -> None:
    target = tmp_path / "shot.png"
    write_atomic(target, b"png")
    assert _mode(target) == 0o600  # 0o666 under the fixture's umask 077


def test_a_secret_is_never_readable_by_others_even_as_a_temp_file(tmp_path: Path) -> None:
    temp = write_temp(tmp_path, b"cookie", mode=0o600)
    assert _mode(temp) == 0o600 and temp.read_bytes() == b"cookie"
    assert temp.name.startswith(".") and temp.parent == tmp_path


def test_missing_parents_are_an_error_unless_asked_for(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "session.json"
    with pytest.raises(FileNotFoundError):
        write_atomic(target, b"{}")
    write_atomic(target, b"{}", parents=True)
    assert target.read_bytes() == b"{}"


def test_a_failed_rename_removes_the_temp_file(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep").write_bytes(b"")
    with pytest.raises(OSError):
        write_atomic(tmp_path / "taken", b"data")  # a non-empty directory cannot be replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
