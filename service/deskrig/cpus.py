"""The CPUs this process may run on."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs the scheduler lets this process use (its affinity mask, which a container's
    cpuset narrows), or all of the machine's where the platform has no affinity mask."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
