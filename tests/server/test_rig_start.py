"""`deskrig rig run` builds its MCP server while the rig starts, and still says ready only once
the app's window is mapped and MCP answers (an app that dies in start-up: test_runner_teardown)."""

from __future__ import annotations

from pathlib import Path

import httpx
from tests.polling import poll
from tests.rigprocs import SYSTEM_PYTHON
from tests.server.rigproc import INITIALIZE, RigProcess, http_status

# A Tk window that shows itself only once the file named by argv[1] exists.
TK_SHOW_WHEN_TOLD = (
    "import os, sys, time, tkinter as tk\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
    "root = tk.Tk(); root.title('late'); root.geometry('200x100'); root.mainloop()\n"
)


def test_the_server_is_built_while_the_app_starts_and_readyz_waits_for_its_window(tmp_path: Path) -> None:
    go = tmp_path / "go"
    rig = RigProcess(app=[SYSTEM_PYTHON, "-c", TK_SHOW_WHEN_TOLD, str(go)], extra=["--verbose"])
    rig.start(tmp_path, wait=False)
    try:
        poll("the server built", lambda: "MCP server built" in rig.stderr() or None, timeout=40)
        # The app has no window yet: the rig is not ready, and the port does not answer at all.
        assert "rig ready" not in rig.stderr()
        assert http_status(f"{rig.base}/readyz") is None
        go.touch()
        status = rig.wait_ready()
        assert status["checks"] == {"display": True, "app": True, "window_manager": True}
        headers = {**rig.auth, "accept": "application/json, text/event-stream"}
        assert httpx.post(rig.url, json=INITIALIZE, headers=headers).status_code == 200
        assert rig.stderr().index("MCP server built") < rig.stderr().index("rig ready")
    finally:
        assert rig.stop() == 0
