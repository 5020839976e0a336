"""Ending what goes unused: :class:`IdleExpiry` calls back for each key (a client) that made no
call for a while, from one thread that sleeps until the next key could expire. Held input and
session recordings each end this way; a thread that looked every second woke an idle rig for as
long as it ran once anyone had held a key or recorded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class IdleExpiry:
    """When each key was last used, and a thread (started with the first key) that forgets each
    key unused for :attr:`timeout` seconds and then calls ``expire(key)``, once.

    The thread sleeps until the least recently used key would expire, or until a key is added to
    an empty table: a later use of a key only moves its expiry later, which is looked at then.
    A :attr:`timeout` of 0 or less expires nothing (and :meth:`used` starts no thread); setting
    it wakes the thread, which then goes by the new one.
    Thread-safe; ``expire`` runs on the thread, without the table's lock."""

    def __init__(self, timeout: float, expire: Callable[[str], None], name: str) -> None:
        self._timeout = timeout
        self._expire = expire
        self._name = name
        self._lock = threading.Lock()
        self._last_used: dict[str, float] = {}
        #: Set when the table gains a key, or on close: the thread looks again.
        self._changed = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None

    @property
    def timeout(self) -> float:
        """Seconds a key may go unused before it expires; 0 or less: never."""
        return self._timeout

    @timeout.setter
    def timeout(self, seconds: float) -> None:
        with self._lock:
            self._timeout = seconds
        self._changed.set()  # the thread may be sleeping until a time the old timeout gave

    def used(self, key: str) -> None:
        """``key`` was used now: it expires :attr:`timeout` seconds from now unless used again."""
        with self._lock:
            if self._closing or self._timeout <= 0:
                return
            added = key not in self._last_used
            self._last_used[key] = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._expire_unused, name=self._name, daemon=True)
                self._thread.start()
        if added:
            self._changed.set()

    def touch(self, key: str) -> None:
        """A use of ``key`` if it is in the table; nothing otherwise."""
        with self._lock:
            if key in self._last_used:
                self._last_used[key] = time.monotonic()

    def forget(self, key: str | None = None) -> None:
        """Take ``key`` (None: every key) out of the table: it no longer expires."""
        with self._lock:
            if key is None:
                self._last_used.clear()
            else:
                self._last_used.pop(key, None)

    def close(self) -> None:
        """Forget every key and end the thread; nothing expires from now on."""
        with self._lock:
            self._closing = True
            self._last_used.clear()
        self._changed.set()

    def _expire_unused(self) -> None:
        while True:
            with self._lock:
                if self._closing:
                    return
                timeout, now = self._timeout, time.monotonic()
                # With no timeout, keys stay in the table for when one is set again.
                expired = (
                    []
                    if timeout <= 0
                    else [k for k, used in self._last_used.items() if used + timeout <= now]
                )
                for key in expired:
                    del self._last_used[key]
                oldest = None if timeout <= 0 else min(self._last_used.values(), default=None)
            for key in expired:
                try:
                    self._expire(key)
                except Exception:  # one key's failure must not end the expiry of the others
                    log.exception("%s: ending %s failed", self._name, key)
            due = None if oldest is None else max(0.0, oldest + timeout - time.monotonic())
            # A key added after the table was read sets the event: the wait returns at once.
            self._changed.wait(due)
            self._changed.clear()
