"""Running an input call on the desktop's input device: in a worker thread, under the input lock,
reporting progress and stopping when the call is cancelled or its client goes away."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio

from deskrig.desktop.base import InputDevice, InputJob
from deskrig.services import CallInfo, Services

T = TypeVar("T")
U = TypeVar("U")
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
    return await _in_worker(services, call, lambda job: _with_device(services, fn, job), total, unit)


def _with_device(services: Services, fn: Callable[[InputDevice, InputJob], T], job: InputJob) -> T:
    """Blocking: ``fn`` with the input device, once no other call's input holds it."""
    timeout = services.settings.input_lock_timeout
    return services.desktop.with_input(lambda device: fn(device, job), job, timeout)


async def _in_worker(
    services: Services, call: CallInfo, work: Callable[[InputJob], T], total: int | None, unit: str
) -> T:
    """Run ``work`` in a worker thread as ``call``'s input job (see :func:`run_input`)."""
    job = InputJob(holder=call.client_id)
    done: list[T] = []
    failed: list[Exception] = []  # raised after the task group, which would wrap it in a group
    async with anyio.create_task_group() as followers:
        if call.progress is not None or call.disconnected is not None:
            followers.start_soon(_follow, call, job, total, unit)
        try:
            # Not shielded: a cancelled call returns at once and its job stops within a chunk.
            done.append(await anyio.to_thread.run_sync(work, job, abandon_on_cancel=True))
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


async def deliver_then(
    services: Services, call: CallInfo, then: Callable[[], U], fn: Callable[..., object], *args: object
) -> U:
    """:func:`deliver`, then ``then()`` (a blocking read of the desktop, such as where the pointer
    is now) in the same worker thread, once the input device is free again: one hop to a worker
    and back rather than two."""

    def work(job: InputJob) -> U:
        _with_device(services, lambda device, _job: fn(device, *args), job)
        return then()

    return await _in_worker(services, call, work, None, "steps")
