"""PII masking benchmark: a masked full-screen capture of the PII fixture (tests/apps/gtk_pii.py) at
1280x800, against the same capture unmasked, measured side by side (:func:`measure_interleaved`).

Cases: the tree detector alone (the policy's OCR off) on a changed screen, with the elements known
(the tree detector's per-element boxes kept: most of a changed screen is elements that did not
change) and with none known (every element searched, every entry's extents asked); the tree
detector and OCR on a changed screen (everything not explained by the tree read again); an
unchanged screen (the masker reuses its boxes on the damage serial's word); and the capture
pipeline's damage cache (nothing grabbed, masked or encoded again). Targets are milliseconds added
to the unmasked capture's p50.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from deskrig.bench.capture import screenshot_call
from deskrig.bench.stats import Timing, measure_interleaved
from deskrig.config import load_settings
from deskrig.desktop import Desktop, open_desktop
from deskrig.privacy import PiiMasker
from deskrig.rig import Rig, RigOptions
from deskrig.server import DeskrigServer
from deskrig.serving import build_server

APPS = Path(__file__).resolve().parents[3] / "tests" / "apps"
SYSTEM_PYTHON = "/usr/bin/python3"
#: ms added to the unmasked capture's p50, by case.
TARGETS_MS = {
    "tree": 30.0,
    "tree_cold": 30.0,
    "ocr_changed": 500.0,
    "ocr_unchanged": 5.0,
    "damage_cache": 5.0,
}
LABELS = {
    "unmasked": "unmasked capture (baseline)",
    "tree": "masked: tree detector alone, changed screen (elements known)",
    "tree_cold": "masked: tree detector alone, changed screen (no element known)",
    "ocr_changed": "masked: tree + OCR, changed screen",
    "ocr_unchanged": "masked: tree + OCR, unchanged screen (masker's damage-serial reuse)",
    "damage_cache": "masked: unchanged screen (capture damage cache)",
}


def _server(desktop: Desktop, session_bus: str, *, ocr: bool, reuse: bool) -> DeskrigServer:
    overrides: dict[str, Any] = {
        "reuse_unchanged_captures": reuse,
        "security": {"pii_masking": {"custom_patterns": {"ticket": r"ORD-\d{6}"}, "ocr": ocr}},
    }
    return build_server(desktop, load_settings(env={}, overrides=overrides), session_bus=session_bus)


def _changed(
    masker: PiiMasker | None, call: Callable[[], Awaitable[None]], *, elements: bool = False
) -> Callable[[], Awaitable[None]]:
    """``call`` after the masker forgets the screens it searched and what OCR read (and with
    ``elements``, the tree detector's elements): to it, every capture shows a changed screen."""
    assert masker is not None

    async def changed() -> None:
        masker.forget()
        if elements and masker.tree is not None:
            masker.tree.forget()
        await call()

    return changed


def _cases(desktop: Desktop, session_bus: str, runs: int) -> list[Timing]:
    plain = _server(desktop, session_bus, ocr=True, reuse=False)
    tree = _server(desktop, session_bus, ocr=False, reuse=False)
    cached = _server(desktop, session_bus, ocr=True, reuse=True)
    masked = {"mask_pii": True}
    cases = [
        ("unmasked", screenshot_call(plain, {})),
        ("tree", _changed(tree.services.masker, screenshot_call(tree, masked))),
        ("tree_cold", _changed(tree.services.masker, screenshot_call(tree, masked), elements=True)),
        ("ocr_changed", _changed(plain.services.masker, screenshot_call(plain, masked))),
        ("ocr_unchanged", screenshot_call(plain, masked)),
        ("damage_cache", screenshot_call(cached, masked)),
    ]
    try:
        return anyio.run(measure_interleaved, cases, runs)
    finally:
        for server in (plain, tree, cached):
            if server.services.masker is not None:
                server.services.masker.close()


def run(runs: int) -> None:
    sys.path.insert(0, str(APPS))
    import pii_content  # the fixture's own module (tests/apps): its canvas and its strings

    with tempfile.TemporaryDirectory(prefix="deskrig-bench-privacy-") as tmp:
        canvas = pii_content.draw_canvas(Path(tmp) / "canvas.png")
        app = [SYSTEM_PYTHON, str(APPS / "gtk_pii.py"), "--title", "PII", "--log", str(Path(tmp) / "log")]
        options = RigOptions(size="1280x800", app=app, app_env={"PII_CANVAS_PNG": str(canvas)})
        with Rig(options) as rig, open_desktop("x11", rig.display) as desktop:
            timings = _cases(desktop, rig.env["DBUS_SESSION_BUS_ADDRESS"], runs)
    _print(timings)


def _print(timings: list[Timing]) -> None:
    """Wall time and CPU time (this process's): on a shared machine the CPU column holds when the
    wall column does not (a capture waits on the app, which waits for a core)."""
    base, base_cpu = timings[0], timings[0].cpu().p50
    out = sys.stdout
    out.write("\n### PII masking: full screen 1280x800 PNG, PII fixture (GTK)\n\n")
    out.write(
        "| case | p50 ms | p95 ms | CPU p50 ms | added p50 ms | added CPU ms | target added ms | met |\n"
    )
    out.write("|---|---:|---:|---:|---:|---:|---:|:-:|\n")
    out.write(f"| {LABELS[base.name]} | {base.p50:.2f} | {base.p95:.2f} | {base_cpu:.2f} | | | | |\n")
    for timing in timings[1:]:
        added, cpu = timing.p50 - base.p50, timing.cpu().p50
        target = TARGETS_MS[timing.name]
        out.write(
            f"| {LABELS[timing.name]} | {timing.p50:.2f} | {timing.p95:.2f} | {cpu:.2f} | {added:.2f} | "
            f"{cpu - base_cpu:.2f} | {target:g} | {'yes' if added <= target else 'NO'} |\n"
        )
    out.flush()
