"""The security policy, enforced: output paths, capture rate, blocked windows, audit log.

Settings come from :class:`deskrig.config.SecurityPolicy`; :meth:`SecurityContext.from_policy`
builds the enforcers once and the tool layer consults them on every call.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from deskrig.config import SecurityPolicy
from deskrig.errors import ConfigError, DeskrigError, ErrorCode, file_system_error
from deskrig.identity import ClientRef
from deskrig.model import WindowInfo

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60


def _utc_iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")


class PathGuard:
    """Resolves client-given output paths and keeps them inside the allowed directories.

    A path must be absolute or ``~``-rooted. It is expanded and passed through ``realpath``
    (symlinks in existing components resolved, ``..`` collapsed), then must lie inside the
    realpath of an allowed directory. Containment is checked on path components, so
    ``/home/a/deskrig-evil`` is not inside ``/home/a/deskrig``.

    The allowed directory holding an accepted path is created if missing (the default,
    ``~/deskrig``, usually does not exist yet); nothing outside the allowed directories is ever
    created. The check is done at call time; a component swapped for a symlink between the check
    and the write is not defended against (whoever can do that already has a shell on the rig).
    """

    def __init__(self, allowed_directories: Iterable[str]) -> None:
        self.allowed_directories = list(allowed_directories)

    def _reject(self, path: str, reason: str) -> DeskrigError:
        return DeskrigError(
            ErrorCode.INVALID_PATH,
            f"path {path!r} is not allowed: {reason}",
            details={"path": path, "allowed_directories": self.allowed_directories, "reason": reason},
        )

    def resolve(self, path: str) -> Path:
        """The real absolute path for ``path``, or DeskrigError(INVALID_PATH)."""
        if not isinstance(path, str) or not path:
            raise self._reject(str(path), "the path is empty")
        if "\0" in path:
            raise self._reject(path, "the path contains a NUL byte")
        expanded = os.path.expanduser(path)
        if not os.path.isabs(expanded):
            raise self._reject(path, "the path must be absolute or start with ~")
        real = Path(os.path.realpath(expanded))
        for allowed in self.allowed_directories:
            root = Path(os.path.realpath(os.path.expanduser(allowed)))
            if real.is_relative_to(root):
                try:
                    root.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise file_system_error("create allowed directory", root, exc) from exc
                return real
        if not self.allowed_directories:
            raise self._reject(path, "no output directories are allowed by the rig's policy")
        raise self._reject(path, f"it resolves to {real}, outside every allowed directory")


class RateLimiter:
    """At most ``max_per_minute`` calls per client identity in any sliding 60-second window.

    Refused calls do not count, so a client that keeps retrying is let in as soon as its oldest
    call leaves the window. ``clock`` returns Unix time in seconds (injectable for tests).
    """

    def __init__(self, max_per_minute: int, clock: Callable[[], float] = time.time) -> None:
        self.limit = max_per_minute
        self._clock = clock
        self._calls: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._next_sweep = 0.0

    def check(self, client_id: str) -> None:
        """Count one call by ``client_id``, or raise RATE_LIMIT_EXCEEDED without counting it."""
        with self._lock:
            now = self._clock()
            self._sweep(now)
            calls = self._calls.setdefault(client_id, deque())
            while calls and calls[0] <= now - WINDOW_SECONDS:
                calls.popleft()
            current = len(calls)
            if current < self.limit:
                calls.append(now)
                return
            reset = calls[0] + WINDOW_SECONDS
        raise DeskrigError(
            ErrorCode.RATE_LIMIT_EXCEEDED,
            f"more than {self.limit} captures per minute; next one allowed at {_utc_iso(reset)}",
            details={
                "limit": self.limit,
                "current": current,
                "window_seconds": WINDOW_SECONDS,
                "reset_at": _utc_iso(reset),
                "retry_after_seconds": max(1, math.ceil(reset - now)),
            },
        )

    def _sweep(self, now: float) -> None:
        """Forget clients idle for a whole window, at most once a window (caller holds the lock)."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + WINDOW_SECONDS
        cutoff = now - WINDOW_SECONDS
        idle = [client for client, calls in self._calls.items() if not calls or calls[-1] <= cutoff]
        for client in idle:
            del self._calls[client]


class WindowBlocklist:
    """Windows whose title matches any pattern (case-insensitive ``re.search``) are off limits."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = list(patterns)
        try:
            self._compiled = [re.compile(pattern, re.IGNORECASE) for pattern in self.patterns]
        except re.error as exc:
            raise ConfigError(f"blocked window pattern is not a valid regex: {exc}") from exc

    @property
    def active(self) -> bool:
        """False when nothing is blocked, so callers can skip listing windows."""
        return bool(self._compiled)

    def is_blocked(self, title: str) -> bool:
        return any(pattern.search(title) for pattern in self._compiled)

    def filter(self, windows: Iterable[WindowInfo]) -> list[WindowInfo]:
        """The windows a client may see."""
        return [window for window in windows if not self.is_blocked(window.title)]

    def blocked(self, windows: Iterable[WindowInfo]) -> list[WindowInfo]:
        """The windows to hide and black out."""
        return [window for window in windows if self.is_blocked(window.title)]


#: Argument names (lower case, without ``_``/``-``) whose string or bytes values are image data.
IMAGE_ARGUMENT_KEYS = frozenset(
    {"data", "image", "imagedata", "png", "jpeg", "jpg", "webp", "bmp", "base64", "b64", "bytes", "blob"}
)
#: Longer strings are left out of the audit log whatever their name.
MAX_AUDITED_STRING = 2048


def _omitted(size: int) -> str:
    return f"<omitted {size} bytes>"


def _is_image_key(key: str) -> bool:
    name = key.lower().replace("_", "").replace("-", "")
    return name in IMAGE_ARGUMENT_KEYS or name.endswith("base64")


def sanitize_arguments(value: Any, key: str = "") -> Any:
    """A JSON-ready copy of ``value`` with image data and very long strings replaced by a note."""
    if isinstance(value, bytes | bytearray | memoryview):
        return _omitted(len(value) if not isinstance(value, memoryview) else value.nbytes)
    if isinstance(value, str):
        size = len(value.encode("utf-8", "surrogatepass"))
        too_long = len(value) > MAX_AUDITED_STRING or value.startswith("data:image/")
        return _omitted(size) if too_long or _is_image_key(key) else value
    if isinstance(value, Mapping):
        return {str(k): sanitize_arguments(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [sanitize_arguments(item, key) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return sanitize_arguments(str(value), key)


class AuditLog:
    """One JSON line per tool call, to a file (appended) or stderr; ``None`` turns it off.

    Never writes to stdout (the MCP stdio transport): '-' and 'stderr' mean stderr, and a file
    that is the process's stdout is refused. A failed write is logged and does not fail the call.
    """

    def __init__(self, target: str | None) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        if target is None or target in ("-", "stderr"):
            return
        path = Path(target).expanduser()
        try:
            self._file = path.open("a", encoding="utf-8", buffering=1)
        except OSError as exc:
            raise file_system_error("open audit log", path, exc) from exc
        if _is_stdout(self._file):
            self._file.close()
            raise ConfigError(f"audit log {target!r} is the process's stdout; use '-' for stderr")

    @property
    def enabled(self) -> bool:
        return self.target is not None

    def record(
        self,
        client: ClientRef,
        tool: str,
        arguments: Mapping[str, Any],
        outcome: str,
        error_code: str | None = None,
        duration_ms: float | None = None,
        facts: Mapping[str, Any] | None = None,
    ) -> None:
        """``facts``: more fields for the line, from the tool (e.g. its ``pii_masking`` counts)."""
        if self.target is None:
            return
        entry = {
            "time": _utc_iso(time.time()),
            "client": client.key,
            "identity": client.identity,
            "session": client.session,
            "tool": tool,
            "arguments": sanitize_arguments(arguments),
            "outcome": outcome,
            "error_code": error_code,
            "duration_ms": None if duration_ms is None else round(duration_ms, 3),
            **(facts or {}),
        }
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._lock:
            stream = self._file if self._file is not None else sys.stderr
            try:
                stream.write(line)
                stream.flush()
            except (OSError, ValueError) as exc:
                log.warning("audit log write to %s failed: %s", self.target, exc)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
                self.target = None


def _is_stdout(stream: IO[str]) -> bool:
    try:
        return os.path.sameopenfile(stream.fileno(), 1)
    except OSError:  # fd 1 closed
        return False


@dataclass(frozen=True)
class SecurityContext:
    """The enforcers for one server, built once from the policy."""

    paths: PathGuard
    rate_limiter: RateLimiter
    blocklist: WindowBlocklist
    audit: AuditLog

    @classmethod
    def from_policy(cls, policy: SecurityPolicy, clock: Callable[[], float] = time.time) -> SecurityContext:
        return cls(
            paths=PathGuard(policy.allowed_directories),
            rate_limiter=RateLimiter(policy.max_captures_per_minute, clock=clock),
            blocklist=WindowBlocklist(policy.blocked_window_patterns),
            audit=AuditLog(policy.audit_log),
        )

    def close(self) -> None:
        self.audit.close()
