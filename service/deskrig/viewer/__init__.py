"""The trajectory viewer: a recording folder as a report people read, and as data pipelines read.

- :mod:`~deskrig.viewer.models`: what is read from a turn folder, as pydantic models;
- :mod:`~deskrig.viewer.load`: reading a recording folder (turns, video) into those models;
- :mod:`~deskrig.viewer.a11y_diff`: what changed in the accessibility tree across one action;
- :mod:`~deskrig.viewer.report`: the self-contained HTML report (``deskrig view``, the rig's ``/view``);
- :mod:`~deskrig.viewer.exports`: the report zipped with its files, and the JSONL of turns
  (``deskrig view --zip``, ``deskrig export --jsonl``).
"""

from deskrig.viewer.exports import export_jsonl, write_zip
from deskrig.viewer.load import load_recording
from deskrig.viewer.report import render_report, write_report

__all__ = ["export_jsonl", "load_recording", "render_report", "write_report", "write_zip"]
