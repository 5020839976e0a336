"""A :class:`~deskrig.a11y.source.NativeReader` over recorded trees, shipped with the interface.

Like the scripted desktop backend (:mod:`deskrig.desktop.scripted`): the tools, the recorder and
the PII tree detector run over a macOS (AX) or Windows (UIA) accessibility source on any OS, fed
with trees recorded from real apps (tests/native/data). Every operation is recorded in
:attr:`ScriptedReader.performed`; a value write shows in the tree afterwards, as it does in an app
that accepted it; ``failure`` makes every call fail as the platform would (a missing macOS
Accessibility permission, say).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from deskrig.a11y import macos_ax, windows_uia
from deskrig.a11y.source import NativeNode
from deskrig.errors import DeskrigError, ErrorCode

Tree = dict[str, Any]


class Performed(NamedTuple):
    pid: int
    address: list[int]
    operation: str
    value: str | float | None


def _ax_write(node: Tree, operation: str, value: str | float) -> None:
    node["value"] = value


def _uia_write(node: Tree, operation: str, value: str | float) -> None:
    if operation == "RangeValue":
        node["RangeValue"] = {**node.get("RangeValue", {}), "Value": value}
    else:
        node["Value"] = value


class _Platform(NamedTuple):
    """How a platform's recorded tree is searched by reference and shows a value written."""

    node_at: Callable[[Any, Sequence[int]], NativeNode | None]
    write: Callable[[Tree, str, str | float], None]


PLATFORMS: dict[str, _Platform] = {
    "ax": _Platform(macos_ax.node_at, _ax_write),
    "uia": _Platform(windows_uia.node_at, _uia_write),
}


class ScriptedReader:
    """Recorded application trees (by pid) of one platform (``"ax"`` or ``"uia"``)."""

    def __init__(
        self, prefix: str, trees: Mapping[int, NativeNode], failure: DeskrigError | None = None
    ) -> None:
        self._platform = PLATFORMS[prefix]
        self.trees: dict[int, Tree] = {pid: copy.deepcopy(dict(tree)) for pid, tree in trees.items()}
        self.failure = failure
        self.performed: list[Performed] = []
        self._lock = threading.Lock()  # the source's thread reads while a test edits

    @contextmanager
    def editing(self, pid: int) -> Iterator[Tree]:
        """The recorded tree of ``pid`` to change in place, as the app would change its UI."""
        with self._lock:
            yield self.trees[pid]

    def _app(self, pid: int) -> Tree:
        if self.failure is not None:
            raise self.failure
        tree = self.trees.get(pid)
        if tree is None:
            raise DeskrigError(
                ErrorCode.APP_NOT_RUNNING, f"no running process with pid {pid}", details={"pid": pid}
            )
        return tree

    def tree(self, pid: int) -> NativeNode:
        with self._lock:
            return copy.deepcopy(self._app(pid))

    def perform(
        self, pid: int, address: Sequence[int], operation: str, value: str | float | None = None
    ) -> None:
        with self._lock:
            self._perform(pid, address, operation, value)

    def _perform(self, pid: int, address: Sequence[int], operation: str, value: str | float | None) -> None:
        node = self._platform.node_at(self._app(pid), address)
        if node is None:
            raise DeskrigError(
                ErrorCode.ELEMENT_NOT_FOUND,
                "the element no longer exists",
                details={"address": list(address)},
            )
        self.performed.append(Performed(pid, list(address), operation, value))
        if value is not None:
            assert isinstance(node, dict)
            self._platform.write(node, operation, value)
