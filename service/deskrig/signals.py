"""Taking SIGINT/SIGTERM for a clean shutdown, in one place for every entry point."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TypeVar, TypeVarTuple, Unpack

import anyio

#: The signals that ask a deskrig process to shut down cleanly.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

T = TypeVar("T")
Args = TypeVarTuple("Args")


@contextlib.contextmanager
def handling_signals(handler: Callable[[int], None], signals: Sequence[int] = STOP_SIGNALS) -> Iterator[None]:
    """Call ``handler(signum)`` on each of ``signals`` instead of their default action, and put the
    previous handlers back on exit. Main thread only (Python's rule for ``signal.signal``).

    The handler runs when the main thread next runs Python: an event loop it serves in must be
    run with :func:`run_woken_by_signals`, or a signal that another thread takes waits for the
    loop's next wake."""
    previous = {sig: signal.signal(sig, lambda signum, frame: handler(signum)) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_woken_by_signals(main: Callable[[Unpack[Args]], Awaitable[T]], *args: *Args) -> T:
    """``anyio.run(main, *args)`` in an event loop that every signal wakes (:func:`signals_wake`),
    so that Python's handlers for it run at once: how every deskrig server runs its loop."""

    async def woken() -> T:
        with signals_wake(asyncio.get_running_loop()):
            return await main(*args)

    return anyio.run(woken)


@contextlib.contextmanager
def signals_wake(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Have every signal wake ``loop``, whichever thread the kernel hands it to.

    Python's handlers (``signal.signal``: deskrig's, uvicorn's) run in the main thread: the C
    handler only marks them pending, and they run when the main thread next runs Python. The kernel
    may hand a process's signal to any of its threads; handed to another than the main one, it
    left the main thread asleep in the selector of an idle loop, which nothing else woke: a rig in
    CI, and `deskrig serve --stdio`, did not stop on SIGTERM. Python writes each signal's number to
    the wakeup fd from the thread that takes it, and the loop reads it here. Main thread only (as
    ``signal.set_wakeup_fd``); left as it is where a wakeup fd is set already (asyncio sets one
    for ``add_signal_handler``, which wakes the loop itself; an outer ``signals_wake``), and on
    Windows, where Python takes signals in the main thread and the proactor loop has no
    ``add_reader``."""
    if sys.platform == "win32" or threading.current_thread() is not threading.main_thread():
        yield
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    if previous != -1:
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
        yield
        return
    loop.add_reader(reader.fileno(), _drained, reader)
    try:
        yield
    finally:
        signal.set_wakeup_fd(-1)
        loop.remove_reader(reader.fileno())
        reader.close()
        writer.close()


def _drained(reader: socket.socket) -> None:
    """Empty the wakeup socket: waking the loop was all it was for (the handlers run on the way)."""
    with contextlib.suppress(BlockingIOError):
        while reader.recv(4096):
            pass
