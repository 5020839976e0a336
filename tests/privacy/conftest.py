"""A rig per PII fixture app (tests/apps/gtk_pii.py, tk_pii.py) with the masking policy on.

Each rig records every action from boot (its turn folders are what the recorder tests read) and
writes an audit log. The apps show pii_content.SECRETS in labels, entries and a canvas.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.privacy.reading import pii
from tests.server.rigproc import FormRig, start_form

#: The fixture apps: GTK (accessibility tree + an image of text) and Tk (no AT-SPI: OCR only).
PII_APPS = ["gtk", "tk"]
POLICY_FLAGS = ["--pii-masking", "on", "--pii-pattern", f"{pii.CUSTOM_NAME}={pii.CUSTOM_PATTERN}"]


@dataclass
class PiiRig:
    toolkit: str
    form: FormRig
    record_dir: Path
    audit_log: Path


@pytest.fixture(scope="package", params=PII_APPS)
def pii_rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PiiRig]:
    toolkit = str(request.param)
    tmp = tmp_path_factory.mktemp(f"pii-{toolkit}")
    record_dir, audit_log = tmp / "record", tmp / "audit.jsonl"
    flags = [
        *POLICY_FLAGS,
        "--tool-profile",
        "all",
        "--record",
        str(record_dir),
        "--audit-log",
        str(audit_log),
    ]
    env = {"PII_CANVAS_PNG": str(pii.draw_canvas(tmp / "canvas.png"))}
    form = start_form(tmp, f"{toolkit}_pii", f"PII {toolkit}", env=env, extra=flags)
    yield PiiRig(toolkit, form, record_dir, audit_log)
    form.rig.stop()
