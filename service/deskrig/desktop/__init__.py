"""Pick a desktop backend at run time; other platforms' libraries are never imported.

:func:`choose_backend` is light: ``deskrig serve --stdio`` calls it before answering ``initialize``,
so the facade (and Pillow with it) is imported on first use of ``Desktop`` or ``DesktopBackend``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from deskrig.errors import DeskrigError, ErrorCode

if TYPE_CHECKING:
    from deskrig.desktop.base import Desktop, DesktopBackend, InputDevice

__all__ = ["Desktop", "DesktopBackend", "choose_backend", "open_desktop"]


def __getattr__(name: str) -> object:
    if name in ("Desktop", "DesktopBackend"):
        from deskrig.desktop import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def choose_backend(
    backend: str = "auto", env: Mapping[str, str] | None = None, display: str | None = None
) -> str:
    """Resolve ``auto`` from the platform, an explicit X ``display``, or the environment: sway when
    ``$WAYLAND_DISPLAY`` and ``$SWAYSOCK`` are set (an Xwayland ``$DISPLAY`` beside them is sway's
    own), else X11 when ``$DISPLAY`` is."""
    if backend != "auto":
        return backend
    env = os.environ if env is None else env
    if display:
        return "x11"
    if sys.platform == "darwin":
        return "macos"
    if sys.platform == "win32":
        return "windows"
    if env.get("WAYLAND_DISPLAY") and env.get("SWAYSOCK"):
        return "sway"
    if env.get("DISPLAY"):
        return "x11"
    raise DeskrigError(
        ErrorCode.DISPLAY_NOT_FOUND,
        "no display: neither DISPLAY nor WAYLAND_DISPLAY and SWAYSOCK are set",
        remediation="Run inside a desktop session, or use `deskrig rig run` to start a virtual one.",
    )


def open_desktop(
    backend: str = "auto", display: str | None = None, env: Mapping[str, str] | None = None
) -> Desktop:
    """Open the desktop named by ``display`` or, for sway, by ``env`` (default: the environment's)
    with ``backend``."""
    from deskrig.desktop.base import Desktop

    name = choose_backend(backend, env=env, display=display)
    if name == "x11":
        from deskrig.desktop.x11 import X11Backend
        from deskrig.desktop.x11_clipboard import X11Selections

        def open_input() -> InputDevice:
            from deskrig.desktop.x11_input import X11Input

            return X11Input(display)

        return Desktop(X11Backend(display), selections=X11Selections(display), open_input=open_input)
    elif name == "sway":
        from deskrig.desktop.sway import PointerState, SwayBackend, SwaySockets
        from deskrig.desktop.sway_clipboard import WaylandSelections
        from deskrig.desktop.sway_input import SwayInput

        sockets, pointer = SwaySockets.from_environment(env), PointerState()
        impl: DesktopBackend = SwayBackend(sockets, pointer)
        try:
            return Desktop(impl, SwayInput(sockets, pointer), WaylandSelections(sockets))
        except DeskrigError:
            impl.close()
            raise
    elif name == "macos":
        from deskrig.desktop.macos import MacOSBackend
        from deskrig.desktop.macos_clipboard import PasteboardSelections
        from deskrig.desktop.macos_input import MacOSInput

        try:
            from deskrig.desktop.macos_quartz import GeneralPasteboard, QuartzEvents, QuartzSession
        except ImportError as exc:  # another OS, or pyobjc missing: say so, not a traceback
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                f"the macos backend cannot load Quartz: {exc}",
                details={"backend": name, "platform": sys.platform},
                remediation="Run on macOS with deskrig installed by pip there (it brings "
                "pyobjc-framework-Quartz and pyobjc-framework-ApplicationServices).",
            ) from exc
        session = QuartzSession()
        impl = MacOSBackend(session)
        return Desktop(impl, MacOSInput(QuartzEvents(session)), PasteboardSelections(GeneralPasteboard()))
    elif name == "windows":
        if sys.platform == "win32":  # mypy checks this branch with --platform win32
            from deskrig.desktop.windows import WindowsBackend
            from deskrig.desktop.windows_clipboard import WindowsClipboard
            from deskrig.desktop.windows_input import WindowsInput

            windows = WindowsBackend()
            try:
                return Desktop(windows, WindowsInput(), WindowsClipboard())
            except DeskrigError:
                windows.close()
                raise
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            "the windows desktop backend runs on Windows only",
            details={"backend": name, "platform": sys.platform},
            remediation="Use backend x11 or sway on Linux.",
        )
    else:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"desktop backend {name!r} is not available in this build",
            details={"backend": name, "available": ["x11", "sway", "macos"]},
            remediation="Use backend x11 (set DISPLAY) or sway (set WAYLAND_DISPLAY and SWAYSOCK), "
            "or macos on a Mac.",
        )
