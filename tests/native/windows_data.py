"""Loading the recorded Win32 and UIA structures under tests/native/data/windows_*.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deskrig.desktop.windows_records import MonitorRecord, Rect, WindowRecord

DATA = Path(__file__).parent / "data"


def load(name: str) -> Any:
    return json.loads((DATA / f"windows_{name}.json").read_text(encoding="utf-8"))


def _rect(corners: list[int] | None) -> Rect | None:
    return Rect(*corners) if corners is not None else None


def window_records() -> tuple[list[WindowRecord], int]:
    """The desktop's windows in z-order, and the foreground window."""
    data = load("enum_windows")
    records = [
        WindowRecord(
            **{k: v for k, v in w.items() if k not in ("client", "frame", "restored")},
            client=Rect(*w["client"]),
            frame=Rect(*w["frame"]),
            restored=_rect(w.get("restored")),
        )
        for w in data["windows"]
    ]
    return records, data["foreground"]


def monitor_records() -> list[MonitorRecord]:
    return [
        MonitorRecord(device=m["device"], monitor=Rect(*m["monitor"]), primary=m["primary"], dpi=m["dpi"])
        for m in load("enum_windows")["monitors"]
    ]
