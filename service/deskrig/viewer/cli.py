"""``deskrig view`` and ``deskrig export``: the command lines of the viewer (argument parsing only)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from deskrig.viewer import DEFAULT_NAME

if TYPE_CHECKING:
    from deskrig.viewer.models import RecordingView

COMMANDS = ("view", "export")


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str, description: str
) -> argparse.ArgumentParser:
    """A subcommand reading the recording folder DIR."""
    parser = commands.add_parser(name, help=summary, description=description)
    parser.add_argument("dir", type=Path, metavar="DIR", help="the recording folder (holds turn-00001 ...)")
    return parser


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    view = _command(
        commands,
        "view",
        "turn a recording folder into a self-contained HTML report",
        "Write an HTML report of the recording in DIR (its turn folders and video) that opens in a "
        "browser with no server. --zip packs the report and the files it shows into one archive.",
    )
    view.add_argument(
        "-o", "--output", type=Path, metavar="OUT", help=f"the report to write (default DIR/{DEFAULT_NAME})"
    )
    view.add_argument("--zip", type=Path, metavar="OUT.zip", help="write report and files as one zip instead")
    export = _command(
        commands,
        "export",
        "export a recording's turns as JSON lines",
        "Write one JSON object per turn of the recording in DIR: timestamp, tool, arguments, result, "
        "effect, before/after image paths (relative to DIR) and the accessibility diff.",
    )
    export.add_argument("--jsonl", type=Path, metavar="OUT.jsonl", required=True, help="the file to write")


def _said(written: Path, view: RecordingView) -> None:
    failed = sum(1 for turn in view.turns if turn.action.is_error or turn.problem)
    sys.stderr.write(f"deskrig: wrote {written} ({len(view.turns)} turns, {failed} failed)\n")


def run(args: argparse.Namespace) -> int:
    """Blocking; raises DeskrigError (INVALID_PATH, FILE_SYSTEM_ERROR) for the caller to report."""
    # Imported here: registering the commands runs on every start of the command line.
    from deskrig.viewer.exports import export_jsonl, write_zip
    from deskrig.viewer.load import idle_cpus, load_recording
    from deskrig.viewer.report import write_report

    root: Path = args.dir
    view = load_recording(root, workers=idle_cpus())  # the command line runs no other thread
    if args.command == "export":
        _said(export_jsonl(view, args.jsonl), view)
        return 0
    if args.zip is not None:
        _said(write_zip(view, root, args.zip), view)
    if args.zip is None or args.output is not None:
        _said(write_report(view, root, args.output or root / DEFAULT_NAME), view)
    return 0
