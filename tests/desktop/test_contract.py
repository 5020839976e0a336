"""The Desktop contract (tests/contract.py): the same assertions against the scripted fake and the
real Linux backends.

Every test here runs on four subjects: the scripted desktop (``deskrig.desktop.scripted``), the
X11 backend on the session's Xvfb desktops of ``conftest.py``, with openbox and without a window
manager, and the sway backend on a headless sway of its own (``sway_scene.py``). Each shows the
same scene, a green GTK window and a red Tk window, apart; the scripted one is decorated like
openbox, sway's are floating (undecorated, as in a rig). A fake that passes here behaves like the real thing where the tool-layer
tests (tests/tools) rely on it, so it cannot drift unnoticed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.contract import *  # noqa: F403  (the contract's tests, run here on these subjects)
from tests.contract import SCENE, Subject
from tests.polling import poll

from deskrig.desktop.scripted import MANAGED_FRAME, ScriptedBackend, ScriptedDesktop
from deskrig.desktop.scripted_input import ScriptedInput
from deskrig.desktop.sway import PointerState, SwayBackend, SwaySockets
from deskrig.desktop.sway_input import SwayInput
from deskrig.desktop.x11 import X11Backend
from deskrig.desktop.x11_input import X11Input
from deskrig.model import Bounds, WindowInfo

from .conftest import SCREEN, Desktop
from .sway_scene import SwayScene, sway_scene

#: The screen of every desktop here (conftest.py's, and sway's).
WHOLE_SCREEN = Bounds(x=0, y=0, width=SCREEN[0], height=SCREEN[1])


def scripted_subject() -> Subject:
    world = ScriptedDesktop(frame=MANAGED_FRAME)
    windows = {
        kind: world.add_window(f"{kind}-scripted", bounds, colour, app=kind, pid=1000 + n)
        for n, (kind, (colour, bounds)) in enumerate(SCENE.items())
    }
    backend = ScriptedBackend(world)

    def settled(kind: str) -> WindowInfo:
        return next(w for w in backend.windows() if w.id == windows[kind].id)

    return Subject(
        name="scripted",
        backend=backend,
        input=ScriptedInput(world),
        colours={kind: colour for kind, (colour, _) in SCENE.items()},
        settled=settled,
        new_input=lambda: ScriptedInput(world),
        screen=WHOLE_SCREEN,
    )


@pytest.fixture(scope="module")
def x11_devices() -> Iterator[dict[str, tuple[X11Backend, X11Input]]]:
    """One backend and one input device per X desktop, opened on first use."""
    opened: dict[str, tuple[X11Backend, X11Input]] = {}
    yield opened
    for backend, device in opened.values():
        device.close()
        backend.close()


def x11_subject(desktop: Desktop, devices: dict[str, tuple[X11Backend, X11Input]]) -> Subject:
    if desktop.mode not in devices:
        devices[desktop.mode] = (X11Backend(desktop.display), X11Input(desktop.display))
    backend, device = devices[desktop.mode]
    apps = {app.kind: app for app in desktop.apps}
    return Subject(
        name=desktop.mode,
        backend=backend,
        input=device,
        colours={kind: app.color for kind, app in apps.items()},
        settled=lambda kind: desktop.settled_window(backend, apps[kind]),
        new_input=lambda: X11Input(desktop.display),
        screen=WHOLE_SCREEN,
    )


@pytest.fixture(scope="module")
def sway_devices(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SwayScene, SwayBackend, SwayInput]]:
    """The scene on a sway of its own, with the backend and input device a server would open."""
    with sway_scene(tmp_path_factory.mktemp("contract-sway"), SCENE) as scene:
        sockets, pointer = SwaySockets.from_environment(scene.sway.env), PointerState()
        backend, device = SwayBackend(sockets, pointer), SwayInput(sockets, pointer)
        yield scene, backend, device
        device.close()
        backend.close()


def sway_subject(scene: SwayScene, backend: SwayBackend, device: SwayInput) -> Subject:
    def settled(kind: str) -> WindowInfo:
        pid, bounds = scene.apps[kind].pid, SCENE[kind][1]
        return poll(
            f"the {kind} window listed where it was placed",
            lambda: next((w for w in backend.windows() if w.pid == pid and w.bounds == bounds), None),
        )

    sockets = SwaySockets.from_environment(scene.sway.env)
    return Subject(
        name="sway",
        backend=backend,
        input=device,
        colours={kind: app.color for kind, app in scene.apps.items()},
        settled=settled,
        new_input=lambda: SwayInput(sockets, PointerState()),
        screen=WHOLE_SCREEN,
    )


def make_subject(request: pytest.FixtureRequest) -> Subject:
    if request.param == "scripted":
        return scripted_subject()
    if request.param == "sway":
        return sway_subject(*request.getfixturevalue("sway_devices"))
    desktop = request.getfixturevalue("openbox_desktop" if request.param == "openbox" else "bare_desktop")
    return x11_subject(desktop, request.getfixturevalue("x11_devices"))


@pytest.fixture(params=["scripted", "openbox", "no_wm", "sway"])
def subject(request: pytest.FixtureRequest) -> Subject:
    return make_subject(request)


@pytest.fixture(params=["scripted", "openbox", "sway"])
def managed_subject(request: pytest.FixtureRequest) -> Subject:
    """The subjects with a click-to-focus window manager (the scripted desktop acts as one)."""
    return make_subject(request)
