"""Signalling an app (kill_app's ``terminate``): a process that is gone is APP_NOT_RUNNING whatever
the OS calls it (Linux: ProcessLookupError; Windows: a plain OSError such as "the parameter is
incorrect"), and one that lives but may not be signalled is PERMISSION_DENIED."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from deskrig import launcher
from deskrig.errors import DeskrigError, ErrorCode


def windows_kill(pid: int, sig: int) -> None:
    """os.kill as Windows answers it: OSError [WinError 87] for any process it cannot open."""
    raise OSError(errno.EINVAL, "The parameter is incorrect")


@pytest.fixture
def gone_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # reaped: the pid names no process now
    return process.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process.pid
    process.kill()
    process.wait()


@pytest.mark.parametrize("os_answer", ["ProcessLookupError", "Windows-style OSError"])
def test_a_gone_process_is_not_running(
    gone_pid: int, os_answer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os_answer != "ProcessLookupError":
        monkeypatch.setattr(os, "kill", windows_kill)
    with pytest.raises(DeskrigError) as caught:
        launcher.terminate(gone_pid)
    assert caught.value.code is ErrorCode.APP_NOT_RUNNING
    assert caught.value.details == {"pid": gone_pid}


def test_a_live_process_that_may_not_be_signalled_is_a_permission_error(
    live_pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "kill", windows_kill)
    with pytest.raises(DeskrigError) as caught:
        launcher.terminate(live_pid)
    assert caught.value.code is ErrorCode.PERMISSION_DENIED
    assert "cannot signal process" in caught.value.message and caught.value.remediation
