"""The trajectory viewer: a recording folder as a report people read, and as data pipelines read.

- :mod:`~deskrig.viewer.models`: what is read from a turn folder, as pydantic models;
- :mod:`~deskrig.viewer.load`: reading a recording folder (turns, video) into those models;
- :mod:`~deskrig.viewer.a11y_diff`: what changed in the accessibility tree across one action;
- :mod:`~deskrig.viewer.report`: the self-contained HTML report (``deskrig view``, the rig's ``/view``);
- :mod:`~deskrig.viewer.exports`: the report zipped with its files, and the JSONL of turns
  (``deskrig view --zip``, ``deskrig export --jsonl``).

Nothing is imported here: ``deskrig``'s command line registers ``view`` and ``export`` through
:mod:`~deskrig.viewer.cli` on every start, ``serve --stdio`` included, which must not pay for
Pillow and the recording models before it answers ``initialize``.
"""

#: The report's file name in a recording folder when ``deskrig view`` is given no -o.
DEFAULT_NAME = "report.html"
