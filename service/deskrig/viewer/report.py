"""The trajectory report: one HTML file with its styles, script and data inline, that opens from
a CI artifact with no server. Images and the video are linked (relative to the report), never
inlined: only the selected turn's two images are ever loaded.
"""

from __future__ import annotations

import json
import os
import re
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel

from deskrig.errors import file_system_error
from deskrig.files import write_atomic
from deskrig.viewer.models import RecordingView

_PLACEHOLDER = re.compile(r"__(TITLE|CSS|JS|DATA)__")


class LiveFeed(BaseModel):
    """Where a live page follows its recording: the turn event stream and each turn's data."""

    #: The recording feed (Server-Sent Events, ``deskrig.feed``); ``?after=SEQ`` is appended.
    events: str
    #: The URL a turn's number is appended to, for its :class:`~deskrig.viewer.models.TurnView`.
    turn: str


@cache
def _asset(name: str) -> str:
    return (resources.files("deskrig.viewer") / "page" / name).read_text("utf-8")


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _script_json(view: RecordingView, base: str, live: LiveFeed | None) -> str:
    """The page's data as JSON that cannot end its <script> element early (``</script>`` inside a
    string). Each turn is serialised by pydantic-core straight to JSON text (a third of the time
    of making Python objects of it first, for a thousand turns)."""
    head = {
        "title": view.title,
        "base": base,
        "videos": view.videos,
        "live": live.model_dump() if live else None,
    }
    turns = ",".join(turn.model_dump_json(exclude_none=True) for turn in view.turns)
    text = json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1] + f',"turns":[{turns}]}}'
    return text.replace("</", "<\\/")


def render_report(view: RecordingView, base: str = "", live: LiveFeed | None = None) -> str:
    """The page for ``view``; ``base`` is prefixed to the recording's relative file paths."""
    parts = {
        "TITLE": _escape_html(view.title),
        "CSS": _asset("report.css"),
        "JS": _asset("report.js"),
        "DATA": _script_json(view, base, live),
    }
    # One pass, so nothing inserted (a title, a typed text) is ever taken for a placeholder.
    return _PLACEHOLDER.sub(lambda match: parts[match.group(1)], _asset("report.html"))


def base_for(report: Path, root: Path) -> str:
    """The recording folder as seen from the report's folder (a relative URL prefix)."""
    relative = os.path.relpath(root.resolve(), report.resolve().parent)
    return "" if relative == "." else Path(relative).as_posix() + "/"


def write_report(view: RecordingView, root: Path, out: Path) -> Path:
    """Write the report of the recording in ``root`` to ``out`` atomically; FILE_SYSTEM_ERROR if it cannot be."""
    page = render_report(view, base_for(out, root))
    try:
        write_atomic(out, page.encode("utf-8"))
    except OSError as exc:
        raise file_system_error("write the report to", out, exc) from exc
    return out
