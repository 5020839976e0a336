"""`deskrig rig run --backend sway` over HTTP: a GTK app under native Wayland, a Tk app under
Xwayland, the rig's programs unprivileged in a private runtime dir, and the flags. (The tests shared
with X11, sway's death among them, are parametrized over the backend in test_rig.py,
test_rig_runner.py and tests/server/.)"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from i3ipc import Connection
from tests.rigprocs import SYSTEM_PYTHON, live_rig_processes
from tests.server.rigproc import APPS, DESKRIG, FormRig, RigProcess, start_form

from deskrig.desktop.sway import close_ipc
from deskrig.errors import ErrorCode
from deskrig.rig import Rig, RigOptions, RigStartupError
from deskrig.rig.sway import FALLBACK_RUN_AS


@pytest.fixture
def gtk_form(app_dir: Path) -> FormRig:
    return start_form(app_dir, "gtk_form", "sway-gtk-form", extra=["--backend", "sway", "--size", "1024x700"])


def test_gtk_form_under_wayland_and_tk_form_under_xwayland_are_listed(
    gtk_form: FormRig, app_dir: Path
) -> None:
    rig = gtk_form.rig
    try:
        details = rig.wait_ready()["details"]
        assert (details["backend"], details["wm"], details["wm_up"], details["a11y_up"]) == (
            "sway",
            "sway",
            True,
            True,
        )
        assert set(details["pids"]) == {"sway", "dbus", "at-spi", "app"}
        (screen,) = gtk_form.ok("list_displays", {})["displays"]
        assert (screen["name"], screen["bounds"]["width"], screen["bounds"]["height"]) == (
            "HEADLESS-1",
            1024,
            700,
        )
        (gtk,) = gtk_form.ok("list_windows", {})["windows"]
        assert (gtk["title"], gtk["app"], gtk["pid"]) == ("sway-gtk-form", "gtk_form.py", gtk_form.pid)
        # GTK's accessibility reaches the server: the rig's buses admit it, run as another user.
        assert gtk_form.element("push button", "Click me")["name"] == "Click me"

        tk_log = app_dir / "tk.log"
        tk = [SYSTEM_PYTHON, str(APPS / "tk_form.py"), "--title", "sway-tk-form", "--log", str(tk_log)]
        launched = gtk_form.ok("launch_app", {"command": tk})
        windows = {w["title"]: w for w in gtk_form.ok("list_windows", {})["windows"]}
        assert set(windows) == {"sway-gtk-form", "sway-tk-form"}
        tk_window = windows["sway-tk-form"]
        assert tk_window["pid"] == launched["pid"] and tk_window["app"] == "Tk"  # the X11 class
        # Both run as the rig's unprivileged user, the Tk form on the rig's Xwayland.
        for pid in (gtk_form.pid, launched["pid"]):
            assert os.stat(f"/proc/{pid}").st_uid != 0
        environ = Path(f"/proc/{launched['pid']}/environ").read_bytes().split(b"\0")
        assert any(entry.startswith(b"DISPLAY=:") for entry in environ)
        assert b"GDK_BACKEND=wayland" in environ and b"QT_QPA_PLATFORM=wayland" in environ
    finally:
        assert rig.stop() == 0


def test_the_rigs_sway_is_unprivileged_private_and_bare() -> None:
    with Rig(RigOptions(backend="sway", size="800x600", a11y=False)) as rig:
        runtime_dir = Path(rig.env["XDG_RUNTIME_DIR"])
        info = runtime_dir.stat()
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid != 0
        status = rig.status()
        sway_pid = status.pids["sway"]
        assert os.stat(f"/proc/{sway_pid}").st_uid == info.st_uid
        assert rig.env["SWAYSOCK"] == str(runtime_dir / "sway-ipc.sock")
        assert status.display == str(runtime_dir / rig.env["WAYLAND_DISPLAY"])
        ipc = Connection(socket_path=rig.env["SWAYSOCK"])
        try:
            (output,) = ipc.get_outputs()
            assert (output.name, output.rect.width, output.rect.height, output.scale) == (
                "HEADLESS-1",
                800,
                600,
                1.0,
            )
            assert ipc.get_bar_config_list() == []
        finally:
            close_ipc(ipc)
        # No bar, no wallpaper, no idle daemon; Xwayland waits for its first X client.
        programs = set(live_rig_processes(str(runtime_dir)).values())
        assert programs == {"sway", "dbus-daemon"}, programs
        assert rig.env["DISPLAY"].startswith(":")


def test_run_as_names_an_existing_unprivileged_user() -> None:
    for user in ("no-such-user-here", "root"):
        with pytest.raises(RigStartupError) as caught:
            Rig(RigOptions(backend="sway", run_as=user))
        assert caught.value.code == ErrorCode.INVALID_ARGUMENT and caught.value.details is not None
        assert caught.value.details["run_as"] == user


def test_the_cli_rejects_x11_flags_for_sway_and_run_as_for_x11(tmp_path: Path) -> None:
    for flags, message in [
        (["--backend", "sway", "--no-wm"], "sway is the window manager"),
        (
            ["--backend", "x11", "--run-as", FALLBACK_RUN_AS],
            "--run-as (DESKRIG_RUN_AS) is for the sway backend",
        ),
        (["--backend", "wayland"], "a rig's backend is x11 or sway"),
    ]:
        out = subprocess.run(
            [*DESKRIG, "rig", "run", "--stdio", *flags, "--", "true"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        assert out.returncode != 0 and message in out.stderr and out.stdout == "", out.stderr


def test_deskrig_backend_sway_in_the_environment_runs_a_sway_rig(app_dir: Path) -> None:
    log = app_dir / "color.log"
    argv = [
        SYSTEM_PYTHON,
        str(APPS / "gtk_color.py"),
        "--title",
        "env-sway",
        "--color",
        "#00aa00",
        "--log",
        str(log),
    ]
    rig = RigProcess(app=argv, env={"DESKRIG_BACKEND": "sway"}).start(app_dir)
    try:
        assert rig.wait_ready()["details"]["backend"] == "sway"
    finally:
        assert rig.stop() == 0


def test_without_xwayland_the_rig_runs_and_says_so(app_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A PATH (that sway's user can read) with sway and the shell its config's exec runs, and no
    # Xwayland (nor D-Bus).
    for tool in ("sway", "sh"):
        (app_dir / tool).symlink_to(shutil.which(tool) or tool)
    monkeypatch.setenv("PATH", str(app_dir))
    with Rig(RigOptions(backend="sway", a11y=False, startup_timeout=15)) as rig:
        status = rig.status()
        assert status.ready and status.wm_up and set(status.pids) == {"sway"}
        assert (
            "display: Xwayland is not installed: X11-only apps cannot run (install xwayland)"
            in status.diagnostics
        )
        assert "DISPLAY" not in rig.env


def test_without_sway_the_rig_fails_with_display_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    rig = Rig(RigOptions(backend="sway"))
    with pytest.raises(RigStartupError) as caught:
        rig.start()
    assert caught.value.code == ErrorCode.DISPLAY_NOT_FOUND
    assert caught.value.details == {"stage": "display", "executable": "sway"}
