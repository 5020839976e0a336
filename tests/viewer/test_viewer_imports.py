"""``deskrig view`` reads turn folders, whose masking reports are :class:`deskrig.privacy.MaskReport`:
importing its turn reader loads that report alone, not the masker's OCR engine or accessibility
client (a fresh interpreter, so nothing another test imported counts)."""

from __future__ import annotations

import json
import subprocess
import sys

#: What the masker brings, and a reader of recorded turns does not need.
MASKER_MODULES = ("deskrig.privacy.ocr", "deskrig.privacy.masker", "deskrig.privacy.tree", "deskrig.a11y")


def test_the_turn_reader_loads_no_ocr_nor_accessibility_module() -> None:
    script = "import json, sys\nimport deskrig.viewer.load\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(done.stdout)
    assert "deskrig.privacy.report" in loaded  # the turns' masking reports are read
    assert [m for m in loaded if m.startswith(MASKER_MODULES)] == []
