"""A real recorded session for the viewer tests: the GTK form in a rig recording from boot with
video (``--record DIR --record-video``), driven through four turns:

1. click the Name entry;
2. click "Click me" (the status label goes from "clicked 0" to "clicked 1");
3. click the Name entry again;
4. click a stale element: ELEMENT_NOT_FOUND, an error turn.

The rig stays up for the tests of its live ``/view``; the video is finalised (``POST
/recording/finalize``) so the static report can play it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from tests.polling import poll
from tests.server.rigproc import DESKRIG, FormRig, start_form

T = TypeVar("T")
#: Seconds between the recorded turns, so each has its own place in the video.
TURN_GAP = 0.6
STALE_ELEMENT = {"element": {"snapshot_id": "0123456789ab", "index": 3}}


@dataclass
class RecordedSession:
    form: FormRig
    folder: Path

    @property
    def base(self) -> str:
        return self.form.rig.base

    @property
    def auth(self) -> dict[str, str]:
        return self.form.rig.auth

    def turns(self) -> list[Path]:
        return sorted(p for p in self.folder.iterdir() if p.name.startswith("turn-"))

    def wait_turns(self, count: int) -> list[Path]:
        return poll(f"{count} turn folders", lambda: turns if len(turns := self.turns()) >= count else None)

    def click(self, widget: str) -> dict[str, Any]:
        x, y = self.form.widget_center(widget)
        return off_loop(lambda: self.form.ok("click", {"x": x, "y": y}))


def off_loop(call: Callable[[], T]) -> T:
    """``call()`` in a thread of its own: Playwright's sync API keeps an event loop running in the
    test's thread (the session's browser starts before any rig), where anyio.run cannot start one."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result()


@pytest.fixture(scope="package")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordedSession]:
    tmp = tmp_path_factory.mktemp("viewer")
    folder = tmp / "recording"
    form = start_form(tmp, "gtk_form", "Viewer Form", extra=["--record", str(folder), "--record-video"])
    session = RecordedSession(form, folder)
    try:
        time.sleep(TURN_GAP)
        session.click("entry")
        time.sleep(TURN_GAP)
        session.click("button")
        form.wait_event("button", lambda e: e["count"] == 1)
        time.sleep(TURN_GAP)
        session.click("entry")
        time.sleep(TURN_GAP)
        assert off_loop(lambda: form.error("click", STALE_ELEMENT))["code"] == "ELEMENT_NOT_FOUND"
        session.wait_turns(4)
        finalized = httpx.post(f"{form.rig.base}/recording/finalize", headers=form.rig.auth, timeout=30)
        assert finalized.status_code == 200, finalized.text
        poll("the video", lambda: (folder / "recording.mp4").stat().st_size > 0)
        yield session
    finally:
        form.rig.stop()


def deskrig(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``deskrig`` command line (``deskrig view``, ``deskrig export`` ...)."""
    return subprocess.run([*DESKRIG, *args], capture_output=True, text=True, timeout=120)
