"""Running an input call on the desktop's input device: in a worker thread, under the input lock,
reporting progress and stopping when the call is cancelled or its client goes away."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio

from deskrig.desktop.base import InputDevice, InputJob
from deskrig.services import CallInfo, Services

T = TypeVar("T")
#: How often a long input call reports progress and checks that its client is still there.
FOLLOW_INTERVAL_S = 0.25


async def run_input(
    services: Services,
    call: CallInfo,
    fn: Callable[[InputDevice, InputJob], T],
    total: int | None = None,
    unit: str = "steps",
) -> T:
    """Run ``fn`` with the input device in a worker thread, as ``call``'s client.

    Waits at most ``input_lock_timeout`` for another call's input (then BUSY), stops typing
    within a chunk of keys when the call is cancelled or its client goes away, and reports how
    many of ``total`` ``unit`` are done when the client asked for progress.
    """
    job = InputJob(holder=call.client_id)
    timeout = services.settings.input_lock_timeout

    def work() -> T:
        return services.desktop.with_input(lambda device: fn(device, job), job, timeout)

    done: list[T] = []
    failed: list[Exception] = []  # raised after the task group, which would wrap it in a group
    async with anyio.create_task_group() as followers:
        if call.progress is not None or call.disconnected is not None:
            followers.start_soon(_follow, call, job, total, unit)
        try:
            # Not shielded: a cancelled call returns at once and its job stops within a chunk.
            done.append(await anyio.to_thread.run_sync(work, abandon_on_cancel=True))
        except anyio.get_cancelled_exc_class():
            job.stop.set()
            raise
        except Exception as exc:
            failed.append(exc)
        finally:
            followers.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return done[0]


async def _follow(call: CallInfo, job: InputJob, total: int | None, unit: str) -> None:
    """While ``job`` runs: report progress, and stop it when the client's request has gone."""
    reported = 0
    while True:
        await anyio.sleep(FOLLOW_INTERVAL_S)
        if call.disconnected is not None and await call.disconnected():
            job.stop.set()
            return
        if call.progress is not None and job.done != reported:
            reported = job.done
            message = f"{reported} of {total} {unit}" if total is not None else f"{reported} {unit}"
            await call.progress(float(reported), None if total is None else float(total), message)


async def deliver(services: Services, call: CallInfo, fn: Callable[..., object], *args: object) -> None:
    """Run one input call on the device in a worker thread (see :func:`run_input`)."""
    await run_input(services, call, lambda device, job: fn(device, *args))
