"""Cheaper imports for a process whose start-up is its imports: ``deskrig rig run``.

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

Each switch that the installed library does not offer is skipped; nothing else changes.
"""

from __future__ import annotations

import gc
import importlib.util
import sys
import threading
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
    gc.freeze()
    gc.enable()
