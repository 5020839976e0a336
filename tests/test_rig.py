"""The in-rig supervisor against real Xvfb, openbox, sway, dbus-daemon, AT-SPI and real apps; the
tests that do not read the X server run on each backend.

The runner around it (signals, app exit, a killed supervisor) is in test_rig_runner.py.
"""

from __future__ import annotations

import asyncio
import json
import queue
import shutil
import stat
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dbus_fast import Message, MessageType
from dbus_fast.aio import MessageBus
from tests.polling import poll
from tests.rigprocs import (
    APPS,
    BACKENDS,
    SYSTEM_PYTHON,
    TK_EXIT_WHEN_TOLD,
    XTERM_TITLE,
    assert_all_gone,
    live_rig_processes,
)
from Xlib import X
from Xlib.display import Display

from deskrig.desktop.x11_probes import mapped_windows
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.rig import Rig, RigOptions, RigStartupError
from deskrig.rig.x11 import X11AppStage


def viewable_window(display: str, title: str) -> tuple[int, int | None]:
    """(id, _NET_WM_PID or None) of the viewable window titled ``title`` on ``display``."""
    conn = Display(display)
    try:
        pid_atom = conn.intern_atom("_NET_WM_PID")

        def walk(window: Any) -> tuple[int, int | None] | None:
            for child in window.query_tree().children:
                if child.get_wm_name() == title and child.get_attributes().map_state == X.IsViewable:
                    prop = child.get_full_property(pid_atom, X.AnyPropertyType)
                    return child.id, int(prop.value[0]) if prop else None
                if (found := walk(child)) is not None:
                    return found
            return None

        found = walk(conn.screen().root)
        assert found is not None, f"no viewable window titled {title!r} on {display}"
        return found
    finally:
        conn.close()


def a11y_call(address: str, destination: str, path: str, interface: str, member: str, *body: Any) -> Any:
    """One D-Bus method call; returns the reply body."""
    signature = "".join("s" for _ in body)

    async def call() -> Any:
        bus = await MessageBus(bus_address=address).connect()
        try:
            reply = await bus.call(
                Message(
                    destination=destination,
                    path=path,
                    interface=interface,
                    member=member,
                    signature=signature,
                    body=list(body),
                )
            )
        finally:
            bus.disconnect()
            await bus.wait_for_disconnect()
        assert reply.message_type == MessageType.METHOD_RETURN, (reply.error_name, reply.body)
        return reply.body

    return asyncio.run(call())


@pytest.fixture(scope="module")
def xterm_rig() -> Iterator[Rig]:
    with Rig(RigOptions(app=["xterm", "-T", XTERM_TITLE])) as rig:
        yield rig


def test_xterm_rig_is_ready_with_its_window_on_the_display(xterm_rig: Rig) -> None:
    status = xterm_rig.status()
    assert status.ready and status.display_up and status.wm_up and status.a11y_up and status.app_up
    assert status.display == xterm_rig.display and status.wm == "openbox" and status.diagnostics == []
    assert set(status.pids) == {"xvfb", "wm", "dbus", "at-spi", "app"}
    window, pid = viewable_window(xterm_rig.display, XTERM_TITLE)
    assert pid == status.app_pid
    conn = Display(xterm_rig.display)
    try:
        screen = conn.screen()
        assert (screen.width_in_pixels, screen.height_in_pixels, screen.root_depth) == (1280, 800, 24)
        for extension in ("Composite", "DAMAGE", "RANDR"):
            assert conn.query_extension(extension) is not None
        assert window in conn.screen().root.get_full_property(conn.intern_atom("_NET_CLIENT_LIST"), 0).value
    finally:
        conn.close()
    app_env = Path(f"/proc/{status.app_pid}/environ").read_bytes().split(b"\0")
    for key, value in xterm_rig.env.items():
        assert f"{key}={value}".encode() in app_env
    assert not any(entry.startswith(b"NO_AT_BRIDGE=") for entry in app_env)


def test_accessibility_is_switched_on_on_a_private_bus(xterm_rig: Rig) -> None:
    env, status = xterm_rig.env, xterm_rig.status()
    runtime_dir = Path(env["XDG_RUNTIME_DIR"])
    assert stat.S_IMODE(runtime_dir.stat().st_mode) == 0o700
    assert env["DBUS_SESSION_BUS_ADDRESS"].startswith(f"unix:path={runtime_dir}/bus,")
    bus = env["DBUS_SESSION_BUS_ADDRESS"]
    enabled = a11y_call(
        bus,
        "org.a11y.Bus",
        "/org/a11y/bus",
        "org.freedesktop.DBus.Properties",
        "Get",
        "org.a11y.Status",
        "IsEnabled",
    )
    assert enabled[0].value is True
    address = a11y_call(bus, "org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress")
    assert address[0] == status.a11y_bus and str(runtime_dir) in address[0]


def test_display_refuses_other_users_without_the_cookie(xterm_rig: Rig, tmp_path: Path) -> None:
    raw = Path(xterm_rig.env["XAUTHORITY"]).read_bytes()
    assert stat.S_IMODE(Path(xterm_rig.env["XAUTHORITY"]).stat().st_mode) == 0o600
    offset, fields = 2, []  # skip the family; then address, number, name, data, each counted
    for _ in range(4):
        (length,) = struct.unpack_from(">H", raw, offset)
        fields.append(raw[offset + 2 : offset + 2 + length])
        offset += 2 + length
    cookie = fields[3]
    handshake = (
        "import socket, struct, sys\n"
        "cookie = bytes.fromhex(sys.argv[2]); name = b'MIT-MAGIC-COOKIE-1' if cookie else b''\n"
        "pad = lambda b: b + bytes(-len(b) % 4)\n"
        "s = socket.socket(socket.AF_UNIX); s.connect('/tmp/.X11-unix/X' + sys.argv[1])\n"
        "s.sendall(struct.pack('<BxHHHHxx', 108, 11, 0, len(name), len(cookie)) + pad(name) + pad(cookie))\n"
        "print(s.recv(1)[0])\n"
    )
    number = xterm_rig.display.lstrip(":")

    def connect_as_nobody(cookie_hex: str) -> str:
        done = subprocess.run(
            [SYSTEM_PYTHON, "-c", handshake, number, cookie_hex],
            user=65534,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout.strip()

    assert connect_as_nobody("") == "0"  # 0: the server refused the connection
    assert connect_as_nobody("00" * len(cookie)) == "0"
    assert connect_as_nobody(cookie.hex()) == "1"


def test_two_rigs_run_side_by_side_with_separate_displays_and_buses(xterm_rig: Rig, tmp_path: Path) -> None:
    log = tmp_path / "tk.log"
    tk_app = [SYSTEM_PYTHON, str(APPS / "tk_color.py"), "--title", "tk-side", "--color", "#12a4e0"]
    with Rig(RigOptions(size="800x600", wm=None, app=[*tk_app, "--log", str(log)])) as other:
        status = other.status()
        assert status.ready and status.wm is None and not status.wm_up and status.app_up
        assert other.display != xterm_rig.display
        for key in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "XAUTHORITY"):
            assert other.env[key] != xterm_rig.env[key]
        assert status.a11y_bus != xterm_rig.status().a11y_bus
        window, net_wm_pid = viewable_window(other.display, "tk-side")
        assert net_wm_pid is None  # Tk sets none: the pid comes from the X-Resource extension
        ready = poll("the Tk fixture's log", lambda: log.exists() and log.read_text().splitlines(), 10)
        event = json.loads(ready[0])
        assert event["pid"] == status.app_pid
        conn = Display(other.display)
        try:
            assert (window, status.app_pid, "tk-side") in mapped_windows(conn)
            root = conn.screen().root
            assert (conn.screen().width_in_pixels, conn.screen().height_in_pixels) == (800, 600)
            x, y = event["x"] + event["width"] // 2, event["y"] + event["height"] // 2
            pixel = root.get_image(x, y, 1, 1, X.ZPixmap, 0xFFFFFFFF).data
            assert (pixel[2], pixel[1], pixel[0]) == (0x12, 0xA4, 0xE0)
        finally:
            conn.close()
        runtime_dir, pids = other.env["XDG_RUNTIME_DIR"], list(status.pids.values())
    assert not Path(runtime_dir).exists()
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)  # reaped, not even zombies
    assert_all_gone(runtime_dir, pids)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gtk_app_joins_the_rigs_accessibility_bus(app_dir: Path, backend: str) -> None:
    gtk_app = [SYSTEM_PYTHON, str(APPS / "gtk_color.py"), "--title", "gtk-a11y", "--color", "#00ff00"]
    with Rig(RigOptions(backend=backend, app=[*gtk_app, "--log", str(app_dir / "gtk.log")])) as rig:
        status = rig.status()
        assert status.ready and status.a11y_bus is not None

        def app_pids_on_a11y_bus() -> set[int]:
            root = ("org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root")
            children = a11y_call(status.a11y_bus, *root, "org.a11y.atspi.Accessible", "GetChildren")[0]
            dbus = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")
            return {
                a11y_call(status.a11y_bus, *dbus, "GetConnectionUnixProcessID", name)[0]
                for name, _ in children
            }

        poll("the GTK app on the accessibility bus", lambda: status.app_pid in app_pids_on_a11y_bus(), 15)
        # Exactly the rig's own two buses: the app autolaunched no stray dbus-daemon.
        runtime_dir = rig.env["XDG_RUNTIME_DIR"]
        daemons = [cmd for cmd in live_rig_processes(runtime_dir).values() if cmd == "dbus-daemon"]
        assert len(daemons) == 2
        pids = list(status.pids.values())
    assert_all_gone(runtime_dir, pids)


@pytest.mark.parametrize("backend", BACKENDS)
def test_app_that_dies_during_startup_raises_with_status_and_stderr_tail(backend: str) -> None:
    failing = [SYSTEM_PYTHON, "-c", "import sys; print('boom: no config', file=sys.stderr); sys.exit(3)"]
    rig = Rig(RigOptions(backend=backend, app=failing))
    with pytest.raises(RigStartupError) as caught:
        rig.start()
    error = caught.value
    assert error.code == ErrorCode.APP_NOT_RUNNING
    assert error.details is not None
    assert error.details["stage"] == "app" and error.details["exit_status"] == 3
    assert error.details["stderr_tail"] == ["boom: no config"]
    assert "status 3" in str(error) and "boom: no config" in str(error)
    status = rig.status()
    assert not status.ready and status.app_exit_status == 3
    assert not any(Path(f"/proc/{pid}").exists() for pid in status.pids.values())
    assert_all_gone(rig.env["XDG_RUNTIME_DIR"], list(status.pids.values()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_app_executable_is_an_invalid_argument(backend: str) -> None:
    rig = Rig(RigOptions(backend=backend, wm=None, a11y=False, app=["/nonexistent/app"]))
    with pytest.raises(RigStartupError) as caught:
        rig.start()
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT and caught.value.details is not None
    assert caught.value.details["stage"] == "app"
    assert not rig.status().display_up


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", ["1280", "63x800", "1280x8193", "axb", "1280x800x24", ""])
def test_invalid_size_is_rejected(size: str, backend: str) -> None:
    with pytest.raises(DeskrigError) as caught:
        Rig(RigOptions(backend=backend, size=size))
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT
    assert caught.value.details == {"argument": "size", "value": size, "min": 64, "max": 8192}


@pytest.mark.parametrize("backend", BACKENDS)
def test_app_exit_is_reported_to_waiters_and_callbacks(app_dir: Path, backend: str) -> None:
    trigger = app_dir / "exit-now"
    app = [SYSTEM_PYTHON, "-c", TK_EXIT_WHEN_TOLD, str(trigger)]
    rig = Rig(RigOptions(backend=backend, wm=None, a11y=False, app=app))
    with rig:
        statuses: queue.Queue[int] = queue.Queue()
        rig.on_app_exit(statuses.put)
        assert rig.wait_app_exit(timeout=0.1) is None
        trigger.touch()
        assert rig.wait_app_exit(timeout=10) == 5
        assert statuses.get(timeout=5) == 5
        status = rig.status()
        assert status.app_exit_status == 5 and not status.app_up and not status.ready
        late: list[int] = []
        rig.on_app_exit(late.append)  # registered after the exit: called at once
        assert late == [5]
        # Accessibility off by choice: no launcher, GTK's bridge off, and nothing to diagnose.
        assert "at-spi" not in status.pids and not status.a11y_up and status.diagnostics == []
        assert rig.env["NO_AT_BRIDGE"] == "1"


def test_bare_desktop_without_dbus_is_ready_and_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PATH with Xvfb and openbox only, as on a machine without the dbus package.
    for tool in ("Xvfb", "openbox"):
        (tmp_path / tool).symlink_to(shutil.which(tool) or tool)
    monkeypatch.setenv("PATH", str(tmp_path))
    with Rig(RigOptions()) as rig:
        status = rig.status()
        assert status.ready and status.wm_up and status.app_pid is None and not status.a11y_up
        assert set(status.pids) == {"xvfb", "wm"}
        assert any(d.startswith("dbus: dbus-daemon is not installed") for d in status.diagnostics)
        assert any(d.startswith("a11y: accessibility is off") for d in status.diagnostics)
        assert "DBUS_SESSION_BUS_ADDRESS" not in rig.launch_environment()


#: How long a rig's desktop may take to come up here.
STARTUP_DEADLINE_S = 30.0


def test_a_rig_whose_app_is_not_spawned_yet_is_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the desktop being up and the app stage spawning the app there is no app pid; the
    rig is not ready then (by what it runs, not by the pid)."""
    spawn = threading.Event()
    start_app = X11AppStage.start

    def held_start(stage: X11AppStage, host: Any) -> None:
        spawn.wait(STARTUP_DEADLINE_S)
        start_app(stage, host)

    monkeypatch.setattr(X11AppStage, "start", held_start)
    rig = Rig(RigOptions(app=["xterm"], a11y=False))
    starting = threading.Thread(target=rig.start)
    starting.start()
    try:
        assert rig.wait_desktop(STARTUP_DEADLINE_S)
        status = rig.status()
        assert status.display_up and status.runs_app and status.app_pid is None
        assert not status.ready
    finally:
        spawn.set()
        starting.join()
    try:
        assert rig.status().ready
    finally:
        rig.stop()
