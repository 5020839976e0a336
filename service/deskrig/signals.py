"""Taking SIGINT/SIGTERM for a clean shutdown, in one place for every entry point."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator, Sequence

#: The signals that ask a deskrig process to shut down cleanly.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def handling_signals(handler: Callable[[int], None], signals: Sequence[int] = STOP_SIGNALS) -> Iterator[None]:
    """Call ``handler(signum)`` on each of ``signals`` instead of their default action, and put the
    previous handlers back on exit. Main thread only (Python's rule for ``signal.signal``)."""
    previous = {sig: signal.signal(sig, lambda signum, frame: handler(signum)) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
