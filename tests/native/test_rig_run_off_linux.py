"""`deskrig rig run` starts a Linux desktop (Xvfb or sway, D-Bus, the app under /proc): on macOS
and Windows it is refused with a structured error that points at `deskrig serve`, before anything
starts. Run on Linux with ``sys.platform`` saying otherwise."""

from __future__ import annotations

import sys

import pytest

from deskrig import cli


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_rig_run_off_linux_is_a_clear_error(
    platform: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[str] = []
    monkeypatch.setattr(cli, "_listener", lambda transport: started.append("listener"))
    monkeypatch.setattr(sys, "platform", platform)
    status = cli.main(["rig", "run", "--http", "127.0.0.1:8765", "--", "xterm"])
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and started == []
    assert err.startswith("deskrig: INVALID_ARGUMENT: rig run is Linux-only; use deskrig serve. ")
