"""A rig per PII fixture app (tests/apps/gtk_pii.py, qt_pii.py, tk_pii.py) and desktop backend,
with the masking policy on.

Each rig records every action from boot (its turn folders are what the recorder tests read) and
writes an audit log. The apps show pii_content.SECRETS in labels, entries and a canvas. On sway the
GTK and Qt apps are native Wayland clients, whose accessibility bounds are relative to their window
(the masker places them through the desktop's a11y_origins), and every tile is moved off the
screen's origin, where window-relative boxes taken for screen ones would go unnoticed; Tk runs on
Xwayland.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.privacy.reading import pii
from tests.rigprocs import open_dir
from tests.server.rigproc import FormRig, move_sway_tiles_off_the_origin, start_form
from tests.toolkits import GTK, QT, TK, Capability, Toolkit

#: The fixture apps: GTK and Qt (accessibility tree + an image of text) and Tk (no AT-SPI: OCR only).
PII_APPS = [GTK, QT, TK]
POLICY_FLAGS = ["--pii-masking", "on", "--pii-pattern", f"{pii.CUSTOM_NAME}={pii.CUSTOM_PATTERN}"]


@dataclass
class PiiRig:
    backend: str
    toolkit: Toolkit
    form: FormRig
    record_dir: Path
    audit_log: Path

    @property
    def has_tree(self) -> bool:
        """Whether the app's toolkit has an accessibility tree (the masker's first engine)."""
        return self.toolkit.has(Capability.A11Y_TREE)

    @property
    def readable(self) -> list[str]:
        """The words beside the secrets that OCR must still read in a masked image (the tests'
        check that the masker covers no more than it must)."""
        if self.toolkit.loose_text_extents:
            # "today" is beside the phone number in its entry (Toolkit.loose_text_extents says why).
            return [word for word in pii.UNRELATED if word != "today"]
        return pii.UNRELATED


@pytest.fixture(scope="module", params=PII_APPS, ids=lambda toolkit: toolkit.name)
def pii_rig(request: pytest.FixtureRequest, backend: str) -> Iterator[PiiRig]:
    toolkit: Toolkit = request.param
    with open_dir(f"deskrig-{backend}-pii-{toolkit.name}-") as tmp:
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
            f"{toolkit.name}_pii",
            f"PII {toolkit.name}",
            python=toolkit.python,
            env=env,
            extra=flags,
            window_relative=backend == "sway" and toolkit.native_wayland,
        )
        if backend == "sway":
            move_sway_tiles_off_the_origin(form.rig, form.log, "layout")
        yield PiiRig(backend, toolkit, form, record_dir, audit_log)
        form.rig.stop()
