"""run_command on a real rig of each backend, through a real MCP client: it runs as the rig's apps
run (on a sway rig started as root: the unprivileged app user), so what it starts reaches their
display as they do (Xwayland admits only its own user's clients)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.rigprocs import open_dir
from tests.server.rigproc import FormRig, start_form


@pytest.fixture(scope="module")
def tk_form(backend: str) -> Iterator[FormRig]:
    # open_dir: a sway rig run as root runs the form as an unprivileged user, who writes its log.
    with open_dir(f"deskrig-{backend}-commands-") as tmp:
        form = start_form(tmp, "tk_form", "Commands Tk", extra=["--backend", backend, "--allow-commands"])
        yield form
        form.rig.stop()


def uid_of(pid: int) -> int:
    line = next(
        line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:")
    )
    return int(line.split()[1])


def test_run_command_runs_as_the_apps_user_and_reaches_their_display(tk_form: FormRig) -> None:
    whoami = tk_form.ok("run_command", {"argv": ["id", "-u"]})
    assert whoami["exit_code"] == 0 and int(whoami["stdout"]) == uid_of(tk_form.pid)
    # An X client on the app's display, which lists the Tk form's window.
    tree = tk_form.ok("run_command", {"argv": ["xwininfo", "-root", "-tree"]})
    assert tree["exit_code"] == 0, tree["stderr"]
    assert '"Commands Tk"' in tree["stdout"]
