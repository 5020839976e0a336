"""What the ``session`` and ``orchestrator`` command handlers share: the state directory, the
service's client, the stderr console for progress, and JSON on stdout."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError
    from rich.console import Console

    from deskrig.orchestrator.service import ServiceClient


def state_path(args: argparse.Namespace) -> Path:
    from deskrig.orchestrator.models import default_state_dir

    return Path(args.state_dir) if args.state_dir else default_state_dir()


def stderr_console() -> Console:
    from deskrig.extras import needs_extra

    with needs_extra("orchestrator", "the orchestrator CLI's progress display"):
        from rich.console import Console

    return Console(stderr=True)


def service_client(args: argparse.Namespace) -> ServiceClient:
    from deskrig.errors import DeskrigError, ErrorCode
    from deskrig.orchestrator.service import connect_service

    client = connect_service(state_path(args))
    if client is None:
        raise DeskrigError(
            ErrorCode.RUNTIME_UNAVAILABLE,
            "no orchestrator service is running",
            remediation="`deskrig session start` starts one; or run `deskrig orchestrator serve --background`.",
        )
    return client


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


def validation_problems(exc: ValidationError) -> str:
    """A pydantic error as the flags that caused it: ``--max-duration: Input should be ...``."""
    return "; ".join(
        f"--{'.'.join(str(part) for part in err['loc']).replace('_', '-')}: "
        + err["msg"].removeprefix("Value error, ")
        for err in exc.errors(include_url=False)
    )
