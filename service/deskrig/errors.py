"""Error codes, messages and remediation text: the one table every failure comes from.

Exception tree::

    DeskrigError                 every failure that reaches a client; carries an ErrorCode
    ├── ConfigError              bad settings file, env or flags (INVALID_ARGUMENT)
    └── BackendError             a platform library failed (Xlib, D-Bus, docker ...)

Backends translate their own library's exceptions at their boundary with
``raise DeskrigError(...) from exc``; :mod:`deskrig.error_responses` turns an error into what each
boundary sends (an MCP tool error, the acs envelope, an HTTP error response), and
:mod:`deskrig.cli_errors` into a line for a person at a shell.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError


class ErrorCode(StrEnum):
    PERMISSION_DENIED = "PERMISSION_DENIED"
    INVALID_PATH = "INVALID_PATH"
    WINDOW_NOT_FOUND = "WINDOW_NOT_FOUND"
    DISPLAY_NOT_FOUND = "DISPLAY_NOT_FOUND"
    UNSUPPORTED_FORMAT = "UNSUPPORTED_FORMAT"
    CAPTURE_FAILED = "CAPTURE_FAILED"
    RATE_LIMIT_EXCEEDED = "RATE_LIMIT_EXCEEDED"
    SECURITY_ERROR = "SECURITY_ERROR"
    INVALID_REGION = "INVALID_REGION"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    ENCODING_FAILED = "ENCODING_FAILED"
    FILE_SYSTEM_ERROR = "FILE_SYSTEM_ERROR"
    ELEMENT_NOT_FOUND = "ELEMENT_NOT_FOUND"
    AMBIGUOUS_TARGET = "AMBIGUOUS_TARGET"
    APP_NOT_RUNNING = "APP_NOT_RUNNING"
    A11Y_UNAVAILABLE = "A11Y_UNAVAILABLE"
    INPUT_FAILED = "INPUT_FAILED"
    RECORDING_ERROR = "RECORDING_ERROR"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    TIMEOUT = "TIMEOUT"
    BUSY = "BUSY"
    CANCELLED = "CANCELLED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    # Host orchestrator (deskrig.orchestrator)
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
    QUEUE_TIMEOUT = "QUEUE_TIMEOUT"
    RIG_FAILED = "RIG_FAILED"
    RUNTIME_UNAVAILABLE = "RUNTIME_UNAVAILABLE"


#: Default remediation text per code: what the caller can do about it.
REMEDIATION: dict[ErrorCode, str] = {
    ErrorCode.PERMISSION_DENIED: "The rig's policy or the OS refused this; check the rig configuration.",
    ErrorCode.INVALID_PATH: "Use an absolute or ~-rooted path inside one of the allowed directories "
    "(see details.allowed_directories).",
    ErrorCode.WINDOW_NOT_FOUND: "Call list_windows for current window ids and titles.",
    ErrorCode.DISPLAY_NOT_FOUND: "Call list_displays for the valid display ids.",
    ErrorCode.UNSUPPORTED_FORMAT: "Use one of: png, jpeg, webp, bmp.",
    ErrorCode.CAPTURE_FAILED: "Retry; if it persists, run `deskrig doctor` and check the display server.",
    ErrorCode.RATE_LIMIT_EXCEEDED: "Wait until details.reset_at before capturing again.",
    ErrorCode.SECURITY_ERROR: "This window is blocked by the rig's security policy; it cannot be captured.",
    ErrorCode.INVALID_REGION: "Give a region with positive width and height that lies on the screen "
    "(see get_screen_size).",
    ErrorCode.OUT_OF_MEMORY: "Capture a smaller region or pass max_width to scale the image down.",
    ErrorCode.ENCODING_FAILED: "Try another format (png is the safest).",
    ErrorCode.FILE_SYSTEM_ERROR: "Check that the directory is writable and the disk is not full.",
    ErrorCode.ELEMENT_NOT_FOUND: "Call get_app_state again for a fresh snapshot and element indices.",
    ErrorCode.AMBIGUOUS_TARGET: "Several targets matched; pick one of details.candidates by id.",
    ErrorCode.APP_NOT_RUNNING: "The process is gone; call list_apps or launch_app.",
    ErrorCode.A11Y_UNAVAILABLE: "This app exposes no accessibility tree; use coordinates from a screenshot.",
    ErrorCode.INPUT_FAILED: "The input could not be delivered; check that the display is up.",
    ErrorCode.RECORDING_ERROR: "Check get_recording_state for the last error.",
    ErrorCode.INVALID_ARGUMENT: "Fix the argument named in details and call again.",
    ErrorCode.TIMEOUT: "The condition did not hold in time; check details.observed, then wait longer or retry.",
    ErrorCode.BUSY: "Another client's input is still being delivered (see details.holder); retry after "
    "details.retry_after_seconds, or ask the rig operator to raise input_lock_timeout.",
    ErrorCode.CANCELLED: "The call was cancelled by its client or its client went away; nothing more was "
    "delivered (details say how far it got).",
    ErrorCode.INTERNAL_ERROR: "An unexpected failure inside the rig; see the rig's log.",
    ErrorCode.SESSION_NOT_FOUND: "Run `deskrig session ls` for the sessions this orchestrator knows.",
    ErrorCode.QUEUE_TIMEOUT: "All rig slots stayed busy; stop a session, raise max_sessions or the queue timeout.",
    ErrorCode.RIG_FAILED: "The rig did not start or stopped unexpectedly; see details.logs for its last lines.",
    ErrorCode.RUNTIME_UNAVAILABLE: "Start the container engine (scripts/docker-setup) and check that you may use it.",
}


class ErrorInfo(BaseModel):
    """The structured error every client receives: ``{code, message, details?, remediation?}``."""

    code: ErrorCode
    message: str
    details: dict[str, Any] | None = None
    remediation: str | None = None


class ToolResultLike(Protocol):
    """An MCP ``CallToolResult``, as far as :func:`tool_error` reads it."""

    @property
    def is_error(self) -> bool | None: ...

    @property
    def structured_content(self) -> Any: ...

    @property
    def content(self) -> Sequence[object]: ...


def tool_error(result: ToolResultLike) -> dict[str, Any] | None:
    """The ``{code, message, details?, remediation?}`` of a failed tool call, or None if it succeeded.

    The one reader of error results: the error is in the structured content when the tool's output
    schema admits it (the acs envelope), and otherwise in the JSON of the result's text block.
    """
    if not result.is_error:
        return None
    texts = [text for block in result.content if isinstance(text := getattr(block, "text", None), str)]
    for body in [result.structured_content, *texts]:
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                continue
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            return error
    return {"code": ErrorCode.INTERNAL_ERROR.value, "message": " ".join(texts) or "the tool call failed"}


def http_error_info(body: str) -> ErrorInfo | None:
    """The error of a failed HTTP request's ``{"error": {code, message, ...}}`` body, or None when
    the body is not one (a proxy's page, a truncated answer)."""
    try:
        return ErrorInfo.model_validate(json.loads(body)["error"])
    except (ValueError, TypeError, KeyError, ValidationError):
        return None


class DeskrigError(Exception):
    """The root of every deskrig failure. Carries an :class:`ErrorCode`."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        remediation: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        self.remediation = remediation if remediation is not None else REMEDIATION[code]

    def info(self) -> ErrorInfo:
        return ErrorInfo(
            code=self.code, message=self.message, details=self.details, remediation=self.remediation
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code.value}, {self.message!r})"


class ConfigError(DeskrigError):
    """Settings that cannot be used: a bad file, environment variable or flag."""

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(
            ErrorCode.INVALID_ARGUMENT,
            message,
            details=details,
            remediation="Fix the configuration file, DESKRIG_* variable or flag named in the message.",
        )


class BackendError(DeskrigError):
    """A platform library failed underneath a backend."""


class ValidationProblems(Protocol):
    """Input a pydantic model refused: a :class:`pydantic.ValidationError`, or FastAPI's
    ``RequestValidationError`` (whose field paths start with where the value was: body, query ...)."""

    def errors(self) -> Sequence[Any]: ...


def invalid_argument(
    exc: ValidationProblems, what: str = "invalid arguments", whole: str = "(arguments)"
) -> DeskrigError:
    """INVALID_ARGUMENT for input a pydantic model refused, with each problem's field in details
    (``whole`` names a problem with the input as a whole): the one formatter of validation errors."""
    problems = [
        {"field": ".".join(str(part) for part in err["loc"]) or whole, "problem": err["msg"]}
        for err in exc.errors()
    ]
    return DeskrigError(
        ErrorCode.INVALID_ARGUMENT,
        f"{what}: " + "; ".join(f"{p['field']}: {p['problem']}" for p in problems),
        details={"problems": problems},
    )


def file_system_error(action: str, path: Path, exc: OSError) -> DeskrigError:
    """FILE_SYSTEM_ERROR for an OSError while doing ``action`` ("write", "create" ...) to ``path``."""
    return DeskrigError(
        ErrorCode.FILE_SYSTEM_ERROR,
        f"cannot {action} {path}: {exc.strerror or exc}",
        details={"path": str(path), "errno": exc.errno, "error": errno.errorcode.get(exc.errno or 0)},
    )
