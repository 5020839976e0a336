"""The rig's start-up probe of the AT-SPI bus launcher (``deskrig.a11y.launcher_probe``).

The a11y desktop fixture comes up through the probe itself; here, a session bus with no
launcher on it: the probe must answer "not yet" and must not make the bus start a launcher of
its own (dbus-daemon can activate one from ``org.a11y.Bus.service``), which would then race the
rig's own.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from deskrig.a11y.connection import call, close_bus, open_bus
from deskrig.a11y.launcher_probe import LauncherWatch

from .conftest import AT_SPI_BUS_LAUNCHER, STARTUP_TIMEOUT_S, A11yDesktop, _stop, start_session_bus


async def _has_owner(address: str, name: str) -> bool:
    bus = await open_bus(address)
    try:
        (owned,) = await call(
            bus,
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "NameHasOwner",
            "s",
            [name],
        )
        return bool(owned)
    finally:
        await close_bus(bus)


def _bus_env(tmp_path: Path) -> dict[str, str]:
    tmp_path.chmod(0o700)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "XDG_RUNTIME_DIR": str(tmp_path),
    }


def test_a_bus_without_a_launcher_is_not_ready_yet_and_gets_none_started(tmp_path: Path) -> None:
    env = _bus_env(tmp_path)
    dbus, address = start_session_bus(env)
    try:
        with LauncherWatch(address) as watch:
            assert watch.address() is None
        assert not asyncio.run(_has_owner(address, "org.a11y.Bus")), "the probe had the bus start a launcher"
    finally:
        _stop(dbus)


def test_the_probe_finds_the_launchers_bus(a11y_desktop: A11yDesktop) -> None:
    with LauncherWatch(a11y_desktop.session_bus_address) as watch:
        address = watch.address()
    assert address is not None and address.startswith("unix:")


def test_a_watch_is_woken_when_the_launcher_takes_its_name_and_then_finds_its_bus(tmp_path: Path) -> None:
    """The rig waits for the launcher over one connection, woken by NameOwnerChanged, not polled."""
    env = _bus_env(tmp_path)
    dbus, address = start_session_bus(env)
    launcher = None
    try:
        with LauncherWatch(address) as watch:
            assert watch.address() is None
            assert not watch.wait_for_owner(0.05), "woken with no launcher on the bus"
            assert not asyncio.run(_has_owner(address, "org.a11y.Bus")), (
                "the watch had the bus start a launcher"
            )
            launcher = subprocess.Popen(
                [AT_SPI_BUS_LAUNCHER, "--launch-immediately"],
                env={**env, "DBUS_SESSION_BUS_ADDRESS": address},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            assert watch.wait_for_owner(STARTUP_TIMEOUT_S), "not woken when the launcher took its name"
            bus = watch.address()
            assert bus is not None and bus.startswith("unix:")
            watch.enable()
    finally:
        if launcher is not None:
            _stop(launcher)
        _stop(dbus)
