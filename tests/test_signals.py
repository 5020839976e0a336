"""deskrig.signals: a signal that any thread takes wakes the event loop a server runs in, and every
event loop the package runs (outside its benches) is run so."""

from __future__ import annotations

import ast
import signal
import threading
import time
from pathlib import Path

import anyio

import deskrig
from deskrig.signals import handling_signals, run_woken_by_signals

PACKAGE = Path(deskrig.__file__).parent


def _signal_from_another_thread(sig: int, after: float) -> threading.Thread:
    """A thread that sends ``sig`` to itself alone after ``after`` seconds: the kernel's choice of
    a thread other than the main one to take a process's signal."""

    def send() -> None:
        time.sleep(after)
        signal.pthread_kill(threading.get_ident(), sig)

    thread = threading.Thread(target=send, name="signal-taker")
    thread.start()
    return thread


def test_a_signal_another_thread_takes_runs_its_handler_while_the_loop_sleeps() -> None:
    """The loop has nothing to do but a 10 s timeout: without the wake, the handler would run only
    when that timer woke the main thread."""
    handled: list[float] = []

    async def main() -> float:
        woken = anyio.Event()

        def on_signal(signum: int) -> None:
            handled.append(time.monotonic())
            woken.set()

        with handling_signals(on_signal, [signal.SIGUSR1]):
            sent = time.monotonic()
            thread = _signal_from_another_thread(signal.SIGUSR1, 0.2)
            with anyio.move_on_after(10):
                await woken.wait()
            thread.join()
        return sent

    sent = run_woken_by_signals(main)
    assert handled, "the handler did not run while the loop slept"
    assert handled[0] - sent < 5, f"the handler ran {handled[0] - sent:.1f} s after the signal was sent"


def test_every_event_loop_the_package_runs_is_woken_by_signals() -> None:
    """``anyio.run`` or ``asyncio.run`` called directly would leave a server's loop asleep through
    a signal another thread takes (deskrig.signals.handling_signals); the benches are clients."""
    direct: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "bench" or relative == Path("signals.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "run"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("anyio", "asyncio")
            ):
                direct.append(f"{relative}:{node.lineno}")
    assert direct == [], f"event loops run without deskrig.signals.run_woken_by_signals: {direct}"
