"""The buses stage: a private D-Bus session bus and the AT-SPI accessibility bus on it.

The session bus listens on a socket in the rig's fresh ``XDG_RUNTIME_DIR`` (mode 0700); then
**at-spi-bus-launcher** starts on it. Ready: ``org.a11y.Bus.GetAddress`` answers (asked again
each time the launcher's name changes owner), after ``org.a11y.Status.IsEnabled`` has been
switched on. Missing D-Bus or AT-SPI is not fatal: the rig
carries on without accessibility and says so in its diagnostics. Nothing here depends on the
display protocol.
"""

from __future__ import annotations

import html
import os
import pwd
import shutil
import signal
from pathlib import Path

from deskrig.a11y.launcher_probe import LauncherWatch
from deskrig.files import write_atomic
from deskrig.procs import ManagedProcess, PipeLine
from deskrig.rig.options import RigStartupError
from deskrig.rig.stages import A11yStage, StageHost

#: Where Debian and other distributions install the AT-SPI bus launcher.
A11Y_LAUNCHERS = (
    "/usr/libexec/at-spi-bus-launcher",
    "/usr/lib/at-spi2-core/at-spi-bus-launcher",
    "/usr/lib/at-spi2/at-spi-bus-launcher",
)
SESSION_CONF = "/usr/share/dbus-1/session.conf"


def admitting_supervisor(directory: Path) -> list[str]:
    """dbus-daemon flags for a session bus that the supervisor's user may join besides the
    daemon's own (a bus admits only its own user by default; the AT-SPI bus admits root)."""
    user = pwd.getpwuid(os.getuid()).pw_name
    config = directory / "session-bus.conf"
    text = (
        '<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"'
        ' "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">\n'
        f"<busconfig>\n  <include>{SESSION_CONF}</include>\n"
        # html's escape, not xml.sax.saxutils's: that module imports urllib.request (some 30 ms
        # of the rig's start-up); both make a double-quoted XML attribute of any user name.
        f'  <policy context="default"><allow user="{html.escape(user)}"/></policy>\n</busconfig>\n'
    )
    write_atomic(config, text.encode(), mode=0o644)
    return [f"--config-file={config}"]


class SessionA11yStage(A11yStage):
    """dbus-daemon, then (with ``a11y``) at-spi-bus-launcher on it."""

    def __init__(self, *, a11y: bool) -> None:
        super().__init__()
        self._a11y = a11y
        self._session_bus: str | None = None
        self._launcher: ManagedProcess | None = None
        self._a11y_bus: str | None = None

    @property
    def a11y_bus(self) -> str | None:
        return self._a11y_bus

    @property
    def up(self) -> bool:
        launcher = self._launcher
        return launcher is not None and launcher.alive and self._a11y_bus is not None

    def env(self) -> dict[str, str]:
        env = {}
        if self._session_bus is not None:
            env["DBUS_SESSION_BUS_ADDRESS"] = self._session_bus
        if self._a11y_bus is None:
            env["NO_AT_BRIDGE"] = "1"  # else GTK would look for (and try to start) a bus launcher
        return env

    def start(self, host: StageHost) -> None:
        self._start_session_bus(host)
        if self._a11y:
            self._start_a11y(host)

    def _start_session_bus(self, host: StageHost) -> None:
        if shutil.which("dbus-daemon") is None:
            host.note("dbus", "dbus-daemon is not installed: no session bus, no accessibility")
            return
        pipe = PipeLine()
        try:
            argv = ["dbus-daemon", "--nofork", "--nopidfile", f"--print-address={pipe.write_fd}"]
            argv += ["--session"] if host.account is None else admitting_supervisor(host.runtime_dir)
            argv.append(f"--address=unix:path={host.runtime_dir / 'bus'}")
            bus = host.spawn(
                self,
                "dbus",
                argv,
                host.launch_environment(),
                pass_fds=[pipe.write_fd],
                death_signal=signal.SIGTERM,
            )
            address = host.poll(
                "its address on --print-address", pipe.poll, bus, lambda: "nothing yet", wake=pipe.wait
            )
        finally:
            pipe.close()
        self._session_bus = address.strip()

    def _start_a11y(self, host: StageHost) -> None:
        launcher = next((path for path in A11Y_LAUNCHERS if os.access(path, os.X_OK)), None)
        session_bus = self._session_bus
        if session_bus is None or launcher is None:
            missing = "a session bus" if session_bus is None else "at-spi-bus-launcher (at-spi2-core)"
            host.note("a11y", f"accessibility is off: {missing} is not available")
            return
        # A memory GSettings backend: switching accessibility on must not write the user's dconf.
        env = host.launch_environment({"GSETTINGS_BACKEND": "memory"})
        # SIGTERM, not SIGKILL, as death signal: the launcher then takes its own bus daemon down.
        self._launcher = launcher_proc = host.spawn(
            self, "at-spi", [launcher, "--launch-immediately"], env, death_signal=signal.SIGTERM
        )
        try:
            # One connection for the wait, woken when the launcher takes its name, not polled.
            with LauncherWatch(session_bus) as watch:
                address = host.poll(
                    "org.a11y.Bus.GetAddress to answer",
                    watch.address,
                    launcher_proc,
                    lambda: "org.a11y.Bus has no owner on the session bus",
                    wake=watch.wait_for_owner,
                )
                watch.enable()
        except RigStartupError:
            raise
        except Exception as exc:  # dbus-fast's errors and OSError
            raise host.failure(launcher_proc, f"the accessibility bus did not come up: {exc}") from exc
        self._a11y_bus = address
