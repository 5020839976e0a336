"""A rig per PII fixture app (tests/apps/gtk_pii.py, tk_pii.py) and desktop backend, with the
masking policy on.

Each rig records every action from boot (its turn folders are what the recorder tests read) and
writes an audit log. The apps show pii_content.SECRETS in labels, entries and a canvas. On sway the
GTK app is a native Wayland client, whose accessibility bounds are relative to its window (the
masker places them through the desktop's a11y_origins), and every tile is moved off the screen's
origin, where window-relative boxes taken for screen ones would go unnoticed; Tk runs on Xwayland.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.privacy.reading import pii
from tests.rigprocs import open_dir
from tests.server.rigproc import FormRig, move_sway_tiles_off_the_origin, start_form

#: The fixture apps: GTK (accessibility tree + an image of text) and Tk (no AT-SPI: OCR only).
PII_APPS = ["gtk", "tk"]
POLICY_FLAGS = ["--pii-masking", "on", "--pii-pattern", f"{pii.CUSTOM_NAME}={pii.CUSTOM_PATTERN}"]


@dataclass
class PiiRig:
    backend: str
    toolkit: str
    form: FormRig
    record_dir: Path
    audit_log: Path


@pytest.fixture(scope="module", params=PII_APPS)
def pii_rig(request: pytest.FixtureRequest, backend: str) -> Iterator[PiiRig]:
    toolkit = str(request.param)
    with open_dir(f"deskrig-{backend}-pii-{toolkit}-") as tmp:
        record_dir, audit_log = tmp / "record", tmp / "audit.jsonl"
        flags = [
            *POLICY_FLAGS,
            "--backend",
            backend,
            "--tool-profile",
            "all",
            "--record",
            str(record_dir),
            "--audit-log",
            str(audit_log),
        ]
        env = {"PII_CANVAS_PNG": str(pii.draw_canvas(tmp / "canvas.png"))}
        form = start_form(
            tmp,
            f"{toolkit}_pii",
            f"PII {toolkit}",
            env=env,
            extra=flags,
            window_relative=backend == "sway" and toolkit == "gtk",
        )
        if backend == "sway":
            move_sway_tiles_off_the_origin(form.rig, form.log, "layout")
        yield PiiRig(backend, toolkit, form, record_dir, audit_log)
        form.rig.stop()
