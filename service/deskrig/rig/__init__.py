"""The in-rig supervisor: a virtual display, a window manager, private buses and the app under test.

:meth:`Rig.start` runs the rig's stages in order (:mod:`deskrig.rig.stages`), each only once the
previous one is ready, polling its readiness probe with a deadline (``RigOptions.startup_timeout``
per stage), never sleeping a fixed time:

1. **the display** (Xvfb, :mod:`deskrig.rig.x11`; or a headless sway, :mod:`deskrig.rig.sway`,
   with ``RigOptions.backend="sway"``),
2. **the window manager** (openbox unless ``wm=None``; sway is its own), which starts up while
   the buses do (:attr:`Stage.overlaps_next <deskrig.rig.stages.Stage.overlaps_next>`),
3. **a private D-Bus session bus and the AT-SPI bus** on it (:mod:`deskrig.rig.a11y`); missing
   ones are not fatal,
4. **the app**, ready once one of its top-level windows is mapped.

Any failure tears down what was started and raises :class:`RigStartupError`. :meth:`Rig.stop`
ends everything in reverse order (see :mod:`deskrig.procs`). :func:`run_until_signal` runs a
rig until SIGINT/SIGTERM or until the app exits, serving it (the MCP server) meanwhile.
"""

from deskrig.rig.core import Rig
from deskrig.rig.options import RigOptions, RigStartupError, RigStatus, parse_size
from deskrig.rig.run import EXIT_DISPLAY_LOST, SERVE_STOP_GRACE, run_until_signal
from deskrig.rig.stages import RigStages, Stage

__all__ = [
    "EXIT_DISPLAY_LOST",
    "SERVE_STOP_GRACE",
    "Rig",
    "RigOptions",
    "RigStages",
    "RigStartupError",
    "RigStatus",
    "Stage",
    "parse_size",
    "run_until_signal",
]
