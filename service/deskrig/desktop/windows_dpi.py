"""DPI awareness and scale on Windows: which awareness the process got, and pixel arithmetic.

A per-monitor DPI aware process (``PER_MONITOR_AWARE_V2``, Windows 10 1703+) sees every monitor,
window and pointer position in physical pixels, so captures, window bounds and clicks agree with
each other on every monitor whatever its scale. The backend asks for that first, then for the
older per-monitor awareness (8.1), then for system awareness (Vista); an unaware process would be
handed coordinates scaled by Windows, a different scale on each monitor. Which one it got, and why,
is a diagnostic (``deskrig doctor``).

``scale`` is the monitor's effective DPI over 96 (125 % is 1.25), as ``DisplayInfo.scale``:
device pixels per logical pixel. The backend works in physical pixels throughout; a display's
logical size (what the user's settings call its resolution) is shown beside it in the diagnostics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from deskrig.model import Bounds

#: Windows' reference DPI: a scale of 100 %.
BASE_DPI = 96

#: The ``DPI_AWARENESS_CONTEXT`` pseudo-handle (windef.h) deskrig asks for.
DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2 = -4
#: ``PROCESS_DPI_AWARENESS`` for shcore's SetProcessDpiAwareness (Windows 8.1).
PROCESS_PER_MONITOR_DPI_AWARE = 2
Awareness = Literal["per-monitor-v2", "per-monitor", "system", "unaware"]
#: ``DPI_AWARENESS`` as GetAwarenessFromDpiAwarenessContext reports it (V2 is told apart by
#: comparing contexts).
DPI_AWARENESS: dict[int, Awareness] = {0: "unaware", 1: "system", 2: "per-monitor"}
#: The ways to become DPI aware, best first: the API, and the awareness it gives.
AWARENESS_STEPS: tuple[tuple[str, Awareness], ...] = (
    ("SetProcessDpiAwarenessContext(PER_MONITOR_AWARE_V2)", "per-monitor-v2"),
    ("SetProcessDpiAwareness(PROCESS_PER_MONITOR_DPI_AWARE)", "per-monitor"),
    ("SetProcessDPIAware()", "system"),
)


@dataclass(frozen=True)
class AwarenessOutcome:
    """What becoming DPI aware came to: the awareness in force, and each step's failure."""

    awareness: Awareness
    #: Each step tried before the one that worked (or all of them), with why it failed.
    failures: tuple[tuple[str, str], ...] = ()
    #: True when the awareness was already set (by the app's manifest or an earlier call).
    preset: bool = False

    @property
    def physical(self) -> bool:
        """Whether coordinates are physical pixels on every monitor."""
        return self.awareness in ("per-monitor-v2", "per-monitor")

    def describe(self) -> str:
        text = f"DPI awareness: {self.awareness}"
        if self.preset:
            text += " (already set for the process, e.g. by its manifest)"
        if self.failures:
            text += "; " + "; ".join(f"{api} failed: {why}" for api, why in self.failures)
        if not self.physical:
            text += "; coordinates on monitors scaled differently from the primary are scaled by Windows"
        return text


def scale_for_dpi(dpi: int) -> float:
    """A monitor's scale from its effective DPI (0 or less, as an unknown DPI: 1.0)."""
    return dpi / BASE_DPI if dpi > 0 else 1.0


def to_logical(bounds: Bounds, scale: float) -> Bounds:
    """Physical pixels -> logical pixels at ``scale``, about the desktop's origin: the smallest
    logical rectangle covering them."""
    left, top = math.floor(bounds.x / scale), math.floor(bounds.y / scale)
    right = math.ceil((bounds.x + bounds.width) / scale)
    bottom = math.ceil((bounds.y + bounds.height) / scale)
    return Bounds(x=left, y=top, width=right - left, height=bottom - top)
