"""The Desktop contract (tests/contract.py) on the native backends, on the real host's desktop.

Every native backend in ``NATIVE_BACKENDS`` (conftest.py) is a subject on its own platform; its
operating system's window manager focuses a clicked window, so each is a managed subject too.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.contract import *  # noqa: F403  (the contract's tests, run here on these subjects)
from tests.contract import Subject

from deskrig.desktop.base import DesktopBackend, InputDevice

from .conftest import NATIVE_BACKENDS, NativeScene, native_subject

Devices = dict[str, tuple[DesktopBackend, InputDevice, Callable[[], InputDevice]]]


@pytest.fixture(params=NATIVE_BACKENDS)
def subject(request: pytest.FixtureRequest, native_scene: NativeScene, native_devices: Devices) -> Subject:
    return native_subject(request.param, native_scene, native_devices)


@pytest.fixture(params=NATIVE_BACKENDS)
def managed_subject(
    request: pytest.FixtureRequest, native_scene: NativeScene, native_devices: Devices
) -> Subject:
    return native_subject(request.param, native_scene, native_devices)
