"""Cheaper imports for a process whose start-up is its imports: ``deskrig rig run`` and
``deskrig serve`` (over stdio, whose client waits for ``initialize`` and its first answers).

A rig's cold start waits for its server's imports (the MCP SDK, FastAPI, the tools: some 0.8 s of
CPU, one thread at a time under the GIL), and most of that CPU builds pydantic models at class
creation, many of which the rig never uses (the MCP types of the protocol versions no client
speaks, FastAPI's OpenAPI models with the docs off, the SDK's client). :func:`begin`, called before
the first of those imports, switches these until :func:`end`:

- **No garbage collection.** The start-up makes objects that live as long as the process and
  hardly any garbage, and the collector's passes over them were a tenth of the imports' time.
  :func:`end` freezes what was made out of every later pass and turns collection back on.
- **Pydantic models built on first use** (``defer_build``, as if every model of those imports had
  set it). A model is built, once, the first time it validates, serializes or gives its schema;
  classes created after :func:`end` are built at once again, as usual. A module's own top-level
  ``Model.model_rebuild()``, which would build one at once all the same (FastAPI's OpenAPI
  ``Schema``, ``Operation`` and ``Encoding``; four of the MCP types' request parameters: some
  30 ms), leaves it to its first use too, where it is built with the same module namespace
  (:func:`_rebuild_on_first_use`).
- **The MCP SDK's package fronts loaded on first use.** Importing ``mcp.server.lowlevel`` runs
  ``mcp/__init__.py`` and ``mcp/server/__init__.py``, which import the SDK's client and its
  high-level server (with httpx, cryptography and their models) for their re-exports alone. They
  are put in place without running their code; the first name asked of one that is not one of its
  submodules (``from mcp import Client``) runs it then (:class:`LazyPackageFront`).
- **Shared libraries looked up in one listing** (Linux). ``ctypes.util.find_library`` runs
  ``ldconfig -p`` (a process) for every name, and opening an X11 desktop looks up eight (mss:
  Xlib's and xcb's): 90-130 ms of the server's build at load 4-8. :class:`OneListingFinder`
  reads one listing for them all, the way CPython reads each; a name not in it is looked up as
  ever.

Each switch that the installed library does not offer is skipped; nothing else changes.
"""

from __future__ import annotations

import ctypes.util
import gc
import importlib.util
import os
import re
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

#: The packages whose ``__init__`` :func:`begin` defers: their code imports far more than the
#: submodules a rig's server uses.
DEFERRED_PACKAGES = ("mcp", "mcp.server")
#: Held while a deferred package front runs its code (re-entered by the imports that code makes).
_FRONT_LOCK = threading.RLock()


class LazyPackageFront(ModuleType):
    """A package whose ``__init__`` has not run: its submodules import as usual, and the first
    other name asked of it runs the ``__init__`` (in this same module object) and is then looked
    up as usual."""

    _front_loaded = False

    def __getattr__(self, name: str) -> Any:
        with _FRONT_LOCK:  # another thread asking meanwhile waits for the names to be there
            if not self._front_loaded:
                # Set first: the code run below imports its own submodules (`from . import
                # types`), which asks this module for names it must not find before they exist.
                self._front_loaded = True
                spec = self.__spec__
                assert spec is not None and spec.loader is not None
                spec.loader.exec_module(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None


def _defer_package_front(name: str) -> None:
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = importlib.util.module_from_spec(spec)
    module.__class__ = LazyPackageFront
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


def _pydantic_defaults() -> dict[str, Any] | None:
    """pydantic's defaults for a model's configuration (internal: None if this pydantic has none)."""
    try:
        from pydantic._internal import _config
    except ImportError:
        return None
    defaults = getattr(_config, "config_defaults", None)
    return defaults if isinstance(defaults, dict) and "defer_build" in defaults else None


def _rebuild_on_first_use(rebuild: Any) -> classmethod[Any, ..., Any]:
    """``BaseModel.model_rebuild`` that leaves an unbuilt model as it is when a module's top level
    calls it without arguments: with ``defer_build`` on, such a call would build the model at
    once; its first use builds it, from the module's namespace, as that call would have. Every
    other call (with arguments, from a function, on a built model) rebuilds as ever."""

    def model_rebuild(cls: type[Any], *args: Any, **kwargs: Any) -> bool | None:
        at_module_top = sys._getframe(1).f_code.co_name == "<module>"
        if at_module_top and not args and not kwargs and not cls.__pydantic_complete__:
            return None
        result: bool | None = rebuild.__func__(cls, *args, **kwargs)
        return result

    return classmethod(model_rebuild)


#: The ABI tag ``ldconfig -p`` lists a library of this interpreter's machine and word size under
#: (CPython's table in Lib/ctypes/util.py; anything else is plain ``libc6``).
LDCONFIG_ABI = {
    "x86_64-64": "libc6,x86-64",
    "ppc64-64": "libc6,64bit",
    "sparc64-64": "libc6,64bit",
    "s390x-64": "libc6,64bit",
    "ia64-64": "libc6,IA-64",
}


class OneListingFinder:
    """``ctypes.util.find_library`` answered from one ``ldconfig -p`` listing, read on the first
    call: the name's first entry of this machine's ABI, as CPython's own lookup finds it in its
    own run of ``ldconfig -p``; a name not listed is left to ``fallback`` (CPython's lookup)."""

    def __init__(self, fallback: Callable[[str], str | None], machine: str) -> None:
        """``machine``: ``os.uname().machine`` (Linux only, like ``ldconfig``)."""
        self.fallback = fallback
        self._listing: bytes | None = None
        self._lock = threading.Lock()
        abi = LDCONFIG_ABI.get(f"{machine}-{struct.calcsize('l') * 8}", "libc6")
        self._abi = re.escape(abi).encode()

    def _read_listing(self) -> bytes:
        with self._lock:
            if self._listing is None:
                try:
                    done = subprocess.run(
                        ["/sbin/ldconfig", "-p"],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                        env={"LC_ALL": "C", "LANG": "C"},
                        check=False,
                    )
                    self._listing = done.stdout
                except OSError:  # no ldconfig: every name goes to the fallback
                    self._listing = b""
            return self._listing

    def __call__(self, name: str) -> str | None:
        pattern = rb"\s+(lib%s\.[^\s]+)\s+\(%s" % (re.escape(os.fsencode(name)), self._abi)
        found = re.search(pattern, self._read_listing())
        return os.fsdecode(found.group(1)) if found is not None else self.fallback(name)


#: ``BaseModel.model_rebuild`` as pydantic defines it, while :func:`begin` has replaced it.
_rebuild: list[Any] = []


def begin() -> None:
    """Switch the cheaper imports on; before the imports they are for."""
    gc.disable()
    defaults = _pydantic_defaults()
    if defaults is not None:
        defaults["defer_build"] = True
        from pydantic import BaseModel

        if not _rebuild:
            _rebuild.append(BaseModel.__dict__["model_rebuild"])
            BaseModel.model_rebuild = _rebuild_on_first_use(_rebuild[0])  # type: ignore[method-assign,assignment]
    for name in DEFERRED_PACKAGES:
        _defer_package_front(name)
    if sys.platform.startswith("linux") and not isinstance(ctypes.util.find_library, OneListingFinder):
        ctypes.util.find_library = OneListingFinder(ctypes.util.find_library, os.uname().machine)


def end() -> None:
    """Back to the usual from here on (models built at class creation, collection on), with what
    the start-up made frozen out of the collector's passes. Deferred package fronts stay deferred
    until a name of theirs is asked for."""
    defaults = _pydantic_defaults()
    if defaults is not None:
        defaults["defer_build"] = False
    if _rebuild:
        from pydantic import BaseModel

        BaseModel.model_rebuild = _rebuild.pop()  # type: ignore[method-assign]
    if isinstance(ctypes.util.find_library, OneListingFinder):
        ctypes.util.find_library = ctypes.util.find_library.fallback  # type: ignore[assignment]
    gc.freeze()
    gc.enable()
