"""IdleExpiry: each key unused for the timeout is forgotten and expired once; a use postpones it;
a forgotten key, or any key after close, never expires; and its thread sleeps until a key could
expire (it looked every second before, waking an idle rig)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from tests.polling import poll
from tests.wakeups import started_thread, thread_asleep, thread_wakeups, threads_called

from deskrig.idle import IdleExpiry

NAME = "test-idle-expiry"


class Expired:
    """The keys expired, in order, and when."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.at: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, key: str) -> None:
        with self.lock:
            self.keys.append(key)
            self.at.append(time.monotonic())


@pytest.fixture
def expired() -> Expired:
    return Expired()


@pytest.fixture
def expiry(expired: Expired) -> Iterator[IdleExpiry]:
    idle = IdleExpiry(0.3, expired, NAME)
    yield idle
    idle.close()


def test_a_key_unused_for_the_timeout_expires_once(expiry: IdleExpiry, expired: Expired) -> None:
    used_at = time.monotonic()
    expiry.used("alice")
    poll("alice expired", lambda: expired.keys)
    assert expired.at[0] - used_at >= 0.3
    time.sleep(0.5)  # no second expiry of a key forgotten as it expired
    assert expired.keys == ["alice"]
    expiry.touch("alice")  # forgotten: a touch does not bring it back
    expiry.used("alice")  # a use does
    poll("alice expired again", lambda: len(expired.keys) == 2)


def test_a_used_key_expires_only_after_its_last_use(expiry: IdleExpiry, expired: Expired) -> None:
    expiry.used("alice")
    expiry.used("bob")
    for _ in range(6):  # 0.6 s of uses, each within the timeout of the one before
        time.sleep(0.1)
        expiry.touch("alice")
    last_use = time.monotonic()
    poll("both expired", lambda: len(expired.keys) == 2)
    assert expired.keys == ["bob", "alice"]
    assert expired.at[1] - last_use >= 0.3 - 0.11


def test_forgotten_keys_and_a_closed_expiry_never_expire(expiry: IdleExpiry, expired: Expired) -> None:
    expiry.used("alice")
    expiry.used("bob")
    expiry.forget("alice")
    poll("bob expired", lambda: expired.keys)
    expiry.used("carol")
    expiry.close()
    expiry.used("dave")  # after close: not taken
    time.sleep(0.6)
    assert expired.keys == ["bob"]
    poll("the thread ended", lambda: all(t.name != NAME for t in threading.enumerate()))


def test_nothing_expires_without_a_timeout(expired: Expired) -> None:
    expiry = IdleExpiry(0.0, expired, NAME)
    expiry.used("alice")
    assert all(t.name != NAME for t in threading.enumerate()), "a thread for nothing to expire"


def test_one_key_failing_to_end_does_not_stop_the_others(expired: Expired) -> None:
    def expire(key: str) -> None:
        if key == "alice":
            raise RuntimeError("alice's recording is gone")
        expired(key)

    expiry = IdleExpiry(0.2, expire, NAME)
    try:
        expiry.used("alice")
        expiry.used("bob")
        poll("bob expired", lambda: expired.keys)
        expiry.used("carol")
        poll("carol expired", lambda: expired.keys == ["bob", "carol"])
    finally:
        expiry.close()


def test_the_thread_sleeps_until_a_key_could_expire(expired: Expired) -> None:
    expiry = IdleExpiry(30.0, expired, NAME)
    try:
        others = threads_called(NAME)
        expiry.used("alice")
        thread = started_thread(NAME, others)
        poll("the thread asleep", lambda: thread_asleep(thread))
        before = thread_wakeups(thread)
        time.sleep(2.5)
        assert thread_wakeups(thread) - before == 0, "woke while no key could expire"
        expiry.used("bob")  # added: the thread looks again, once
        poll("the thread asleep again", lambda: thread_asleep(thread) and thread_wakeups(thread) > before)
    finally:
        expiry.close()
    assert expired.keys == []


def test_a_changed_timeout_is_what_the_table_goes_by(expired: Expired) -> None:
    expiry = IdleExpiry(30.0, expired, NAME)
    try:
        expiry.used("alice")
        expiry.timeout = 0  # no timeout: nothing expires, however long unused
        time.sleep(0.4)
        assert expired.keys == []
        shortened_at = time.monotonic()
        expiry.timeout = 0.2  # the thread was asleep until 30 s after alice's use
        poll("alice expired", lambda: expired.keys, timeout=10)
        assert expired.keys == ["alice"] and expired.at[0] - shortened_at < 5
    finally:
        expiry.close()
