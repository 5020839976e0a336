"""Viewer benchmark: ``deskrig view`` of a 1,000-turn recording (read every turn folder, diff
every pair of accessibility snapshots, write the report), against its target of 5 s.

The recording is made once, with the recorder's own turn writer: snapshots of 150 elements in
which one label changes and the focus moves per turn, every 10th turn failing.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from PIL import Image

from deskrig.bench.stats import Timing, cpu_s
from deskrig.model import Bounds, Point
from deskrig.recording.turns import Moment, TurnImage, TurnRecord, TurnTree, TurnVideo, captured, write_turn
from deskrig.viewer.load import idle_cpus, load_recording
from deskrig.viewer.report import write_report

TURNS = 1000
ELEMENTS = 150
TARGET_S = 5.0
#: The screenshots' size: the report only links them, so small ones keep the set-up short.
REGION = Bounds(x=0, y=0, width=48, height=64)


def _tree(turn: int) -> dict[str, Any]:
    elements = [
        {
            "index": i,
            "parent": None if i == 0 else (i - 1) // 4,
            "depth": 0 if i == 0 else 1 + (i - 1) // 40,
            "role": "label" if i % 3 else "push button",
            "name": f"clicked {turn}" if i == 7 else f"Element {i}",
            "states": ["enabled", "showing", "visible", *(["focused"] if i == turn % ELEMENTS else [])],
            "bounds": {"x": i, "y": i, "width": 80, "height": 20},
        }
        for i in range(ELEMENTS)
    ]
    elements[0]["role"] = "application"
    return {"snapshot_id": f"{turn:012x}", "pid": 4242, "app_name": "Form", "elements": elements}


def _moment(turn: int) -> Moment:
    image = Image.new("RGB", (REGION.width, REGION.height), (turn % 256, 120, 200))
    return Moment(
        TurnImage(image, captured(source="window", region=REGION)), TurnTree(_tree(turn), captured())
    )


def make_recording(root: Path, turns: int = TURNS) -> None:
    """``turns`` turn folders in ``root``, as the recorder writes them (clicks, every 10th failing)."""
    start = datetime.now(UTC)
    for number in range(1, turns + 1):
        failed = number % 10 == 0
        action = {
            "tool": "click",
            "arguments": {"x": 100 + number % 300, "y": 200},
            "result": None if failed else {"effect": "confirmed", "evidence": ["left button x1 delivered"]},
            "is_error": failed,
            "error": {"code": "ELEMENT_NOT_FOUND", "message": "gone"} if failed else None,
            "click_point": {"x": 100 + number % 300, "y": 200},
            "timestamp": (start + timedelta(seconds=number)).isoformat().replace("+00:00", "Z"),
            "duration_ms": 40.0,
        }
        record = TurnRecord("click", action, _moment(number - 1), _moment(number), Point(x=100, y=200))
        write_turn(root, number, record, TurnVideo(path="recording.mp4", offset_s=float(number)))


def run(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="deskrig-bench-viewer-") as temp:
        root = Path(temp)
        sys.stderr.write(f"writing a {TURNS}-turn recording ...\n")
        make_recording(root)
        samples, cpu, processes = [], [], set()
        for _ in range(max(1, min(runs, 5))):
            started, cpu_started = time.perf_counter(), cpu_s()
            workers = idle_cpus()  # as deskrig view decides
            processes.add(workers)
            write_report(load_recording(root, workers=workers), root, root / "report.html")
            samples.append((time.perf_counter() - started) * 1000)
            cpu.append((cpu_s() - cpu_started) * 1000)
        used = "/".join(str(n) for n in sorted(processes))
        timing = Timing(f"deskrig view, {TURNS} turns, {used} process(es)", samples, cpu)
        size = (root / "report.html").stat().st_size
    out = sys.stdout
    out.write("\n### Viewer: report generation\n\n")
    out.write(
        "| case | p50 s | p95 s | CPU p50 s | target | met | report size |\n|---|---:|---:|---:|---:|:-:|---:|\n"
    )
    out.write(
        f"| {timing.name} | {timing.p50 / 1000:.2f} | {timing.p95 / 1000:.2f} | {timing.cpu().p50 / 1000:.2f} "
        f"| ≤ {TARGET_S:g} s | {'yes' if timing.p50 / 1000 <= TARGET_S else 'NO'} | {size / 1e6:.1f} MB |\n"
    )
    out.write(
        f"\n(wall time on this machine, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
        "CPU: the program's own, its worker processes included)\n"
    )
    out.flush()
