"""deskrig's optional parts, each installed as an extra (``pip install 'deskrig[EXTRA]'``), and the
one way a missing one is reported.

A rig (its image, ``deskrig serve``, ``deskrig rig run``) needs none of them: the host's
orchestrator and its runtimes, the pytest plugin's rigs and the cluster client are what they
bring. A command that needs one and finds it missing says which extra installs it, as a
structured error, instead of an ImportError's traceback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal

from deskrig.errors import DeskrigError, ErrorCode

Extra = Literal["orchestrator", "kubernetes"]

#: The top-level modules each extra's own distributions install (``tests/test_packaging.py`` checks
#: them against pyproject.toml): an import of one of them fails only for want of that extra.
EXTRA_MODULES: dict[Extra, frozenset[str]] = {
    "orchestrator": frozenset({"docker", "requests", "rich"}),
    "kubernetes": frozenset({"kubernetes", "urllib3"}),
}


@contextlib.contextmanager
def needs_extra(extra: Extra, what: str) -> Iterator[None]:
    """Imports in the block of a module only ``extra`` installs fail with RUNTIME_UNAVAILABLE,
    naming ``what`` needed it and how to install it; any other import error passes unchanged."""
    try:
        yield
    except ModuleNotFoundError as exc:
        module = (exc.name or "").partition(".")[0]
        if module not in EXTRA_MODULES[extra]:
            raise
        raise DeskrigError(
            ErrorCode.RUNTIME_UNAVAILABLE,
            f"{what} needs the {module!r} package, which deskrig's {extra!r} extra installs",
            remediation=f"pip install 'deskrig[{extra}]'",
            details={"extra": extra, "module": module},
        ) from exc
