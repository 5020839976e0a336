"""deskrig.procs: what a managed process's output tail shows once it has exited."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import IO

import pytest

from deskrig.procs import ManagedProcess, Stream, spawn


def test_the_tail_of_an_exited_process_holds_what_it_wrote_before_exiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its exit can be seen before its pipes are read (the readers are threads, late on a loaded
    machine): a start-up failure then quoted no stderr. The first look after the exit waits."""
    readers_may_read = threading.Event()
    read = ManagedProcess._read

    def late_read(self: ManagedProcess, stream: Stream, pipe: IO[bytes]) -> None:
        readers_may_read.wait(10)
        read(self, stream, pipe)

    monkeypatch.setattr(ManagedProcess, "_read", late_read)
    proc = spawn("boom", ["sh", "-c", "echo boom >&2; exit 3"], env=dict(os.environ), log_dir=tmp_path)
    try:
        assert proc.wait(10) == 3
        threading.Timer(0.05, readers_may_read.set).start()
        assert proc.tail(5, "stderr") == ["boom"]
    finally:
        readers_may_read.set()
        proc.stop()
