"""The AT-SPI client's one boundary for failures: D-Bus errors and timeouts become
:class:`~deskrig.errors.DeskrigError` s with the code that says what happened.

A missing process is APP_NOT_RUNNING, a process with no accessible application is
A11Y_UNAVAILABLE, a vanished object is ELEMENT_NOT_FOUND (stale).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from deskrig.a11y.connection import CallFailed, Disconnected
from deskrig.a11y.tree import ElementRef
from deskrig.errors import DeskrigError, ErrorCode


@asynccontextmanager
async def translate_failures(
    doing: str, timeout_s: float, *, pid: int | None = None, ref: ElementRef | None = None
) -> AsyncIterator[None]:
    """Bound the time (``timeout_s``) and turn D-Bus failures into DeskrigErrors, in this one place."""
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError as exc:
        raise DeskrigError(
            ErrorCode.A11Y_UNAVAILABLE,
            f"{doing}: no answer within {timeout_s:g} s (the app may be busy or hung)",
            details={"pid": pid, "element": ref._asdict() if ref else None},
            remediation="Retry once the app is idle; use coordinates from a screenshot meanwhile.",
        ) from exc
    except Disconnected as exc:
        raise app_gone(doing, pid, ref, str(exc)) from exc
    except CallFailed as exc:
        if exc.peer_gone:
            raise app_gone(doing, pid, ref, str(exc)) from exc
        if ref is not None and exc.object_gone:
            raise DeskrigError(
                ErrorCode.ELEMENT_NOT_FOUND,
                f"{doing}: the element no longer exists in the app (stale: the UI changed since "
                "the snapshot was taken)",
                details={"element": ref._asdict(), "reason": "stale"},
            ) from exc
        if ref is not None and exc.error_name.endswith(("UnknownMethod", "UnknownInterface", "InvalidArgs")):
            raise DeskrigError(
                ErrorCode.INVALID_ARGUMENT,
                f"{doing}: the element does not support this ({exc.text or exc.error_name})",
                details={"element": ref._asdict(), "dbus_error": exc.error_name},
                remediation="Check the element's role and actions in get_app_state; use "
                "coordinate input for elements without the needed interface.",
            ) from exc
        raise DeskrigError(
            ErrorCode.INTERNAL_ERROR,
            f"{doing}: AT-SPI call failed: {exc}",
            details={"dbus_error": exc.error_name},
        ) from exc


def require_running(pid: int) -> None:
    """APP_NOT_RUNNING unless ``pid`` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        state = None
    else:
        state = stat.rsplit(")", 1)[1].split()[0]
    if state is None or state in ("Z", "X"):
        raise DeskrigError(
            ErrorCode.APP_NOT_RUNNING,
            f"no running process with pid {pid}" + (" (it has exited)" if state else ""),
            details={"pid": pid},
        )


def app_gone(doing: str, pid: int | None, ref: ElementRef | None, why: str) -> DeskrigError:
    return DeskrigError(
        ErrorCode.APP_NOT_RUNNING,
        f"{doing}: the application went away ({why})",
        details={"pid": pid, "element": ref._asdict() if ref else None},
    )


def invalid_argument(argument: str, value: object, message: str) -> DeskrigError:
    return DeskrigError(ErrorCode.INVALID_ARGUMENT, message, details={"argument": argument, "value": value})
