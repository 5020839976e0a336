"""How a command line reports a :class:`DeskrigError`: one line on stderr, with a hint for a person.

The default remediation texts in :mod:`deskrig.errors` speak to an MCP client ("call list_apps");
a person at a shell gets the hints below instead. A remediation written for the case at hand
(not the code's default) is kept: it names what to do about exactly this failure.
"""

from __future__ import annotations

import json
import sys

from deskrig.errors import REMEDIATION, DeskrigError, ErrorCode

EXIT_ERROR = 1
EXIT_USAGE = 2

#: Hints for a person at a shell, for the codes whose default remediation is advice to an MCP client.
CLI_HINTS: dict[ErrorCode, str] = {
    ErrorCode.WINDOW_NOT_FOUND: "The window is gone; `deskrig doctor` shows the windows on the display.",
    ErrorCode.DISPLAY_NOT_FOUND: "Check --display or $DISPLAY; `deskrig doctor` shows the displays.",
    ErrorCode.INVALID_REGION: "Give a region that lies on the screen; `deskrig doctor` shows its size.",
    ErrorCode.OUT_OF_MEMORY: "Give the rig more memory, or capture less at once.",
    ErrorCode.ELEMENT_NOT_FOUND: "The element is gone from the app's accessibility tree.",
    ErrorCode.APP_NOT_RUNNING: "The app exited; check its command line, then the rig's log (-v for more).",
    ErrorCode.RECORDING_ERROR: "Check that the recording directory (--record) is writable.",
    ErrorCode.INVALID_ARGUMENT: "Fix the flag or DESKRIG_* variable named above; --help lists them.",
    ErrorCode.TIMEOUT: "It did not happen in time; raise the timeout or look at the log.",
    ErrorCode.BUSY: "Another client's input was still being delivered; try again shortly.",
    ErrorCode.CANCELLED: "It was stopped before it finished; nothing more was done.",
    ErrorCode.INTERNAL_ERROR: "This is a bug in deskrig; rerun with -v and report the log.",
}


def cli_hint(error: DeskrigError) -> str:
    """What a person can do: the error's own remediation, unless it is the code's MCP-facing default."""
    if error.remediation is not None and error.remediation != REMEDIATION[error.code]:
        return error.remediation
    return CLI_HINTS.get(error.code, error.remediation or "")


def cli_error_line(error: DeskrigError, program: str = "deskrig") -> str:
    """``deskrig: CODE: message. hint`` on one line, whatever line breaks the message had."""
    message = " ".join(error.message.split()).rstrip(".")
    hint = " ".join(cli_hint(error).split())
    return f"{program}: {error.code.value}: {message}." + (f" {hint}" if hint else "")


def report_cli_error(error: DeskrigError, *, verbose: bool = False) -> int:
    """Print ``error`` for a person (its details too with ``verbose``); return the exit status."""
    sys.stderr.write(cli_error_line(error) + "\n")
    if verbose and error.details:
        sys.stderr.write(f"deskrig: details: {json.dumps(error.details, default=str)}\n")
    return EXIT_USAGE if error.code is ErrorCode.INVALID_ARGUMENT else EXIT_ERROR
