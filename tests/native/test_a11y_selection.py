"""``open_access`` picks the accessibility source by the desktop's backend at run time, and another
platform's source fails structured, never with an ImportError (its library is loaded on first use)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from deskrig.a11y.access import open_access
from deskrig.a11y.macos_ax import MacAX
from deskrig.a11y.source import NativeTreeSource
from deskrig.a11y.windows_uia import WindowsUIA
from deskrig.desktop.base import Desktop
from deskrig.errors import DeskrigError, ErrorCode
from deskrig.model import Point, WindowInfo

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class NamedDesktop:
    """What ``open_access`` asks of a desktop: its backend's name and its windows."""

    backend_name: str

    def windows(self) -> list[WindowInfo]:
        return []

    def a11y_origins(self, pid: int) -> list[tuple[WindowInfo, Point]]:
        return []


def desktop(name: str) -> Desktop:
    return NamedDesktop(name)  # type: ignore[return-value]


@pytest.mark.parametrize(("backend", "platform"), [("macos", MacAX), ("windows", WindowsUIA)])
async def test_macos_and_windows_get_their_native_source(backend: str, platform: type) -> None:
    access = open_access(desktop(backend), "unix:path=/nonexistent")
    assert access is not None
    client = await access.client()
    assert isinstance(client, NativeTreeSource) and isinstance(client.platform, platform)
    assert client.snapshots is access.snapshots

    with pytest.raises(DeskrigError) as caught:  # Linux has neither pyobjc nor UI Automation
        await client.snapshot(1234)
    assert caught.value.code is ErrorCode.A11Y_UNAVAILABLE
    await access.close()


@pytest.mark.parametrize("backend", ["x11", "sway", "scripted"])
def test_linux_desktops_use_at_spi_on_their_session_bus_or_nothing(backend: str) -> None:
    assert open_access(desktop(backend), None) is None
    assert open_access(desktop(backend), "unix:path=/run/bus") is not None


class HungReader:
    """A reader whose app never answers (until released)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def tree(self, pid: int) -> dict[str, object]:
        self.release.wait(30)
        return {}

    def perform(
        self, pid: int, address: Sequence[int], operation: str, value: str | float | None = None
    ) -> None:
        self.release.wait(30)


async def test_a_hung_app_is_a11y_unavailable_within_the_timeout() -> None:
    reader = HungReader()
    source = NativeTreeSource(MacAX(), lambda: reader, timeout_s=0.2)
    try:
        with pytest.raises(DeskrigError) as caught:
            await source.snapshot(1)
        assert caught.value.code is ErrorCode.A11Y_UNAVAILABLE and "0.2 s" in caught.value.message
    finally:
        reader.release.set()
        await source.close()
