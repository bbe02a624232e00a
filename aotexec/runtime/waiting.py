"""The calling thread's scheduling while it waits for IREE's task workers (local-task, Linux).

At the end of a call a worker wakes the waiting caller (a futex) and still touches the caller's
wait record; the caller then spins until the worker is done with it. Linux places the woken
caller on the waker's CPU and lets it preempt the waker, and IREE pins each worker to its CPU,
so that worker cannot finish until the caller's time slice ends: with two CPUs about a third of
small calls (MobileNet v2 at batch 1: 2.6 ms) took 2-3x as long. ``SCHED_BATCH`` (a normal
policy, same nice level) does not preempt on wake-up; the caller holds it only for the call.
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

_BATCH = getattr(os, "SCHED_BATCH", None)
_OTHER = getattr(os, "SCHED_OTHER", None)
ENABLED = _BATCH is not None        # off: the caller keeps its policy (measurements)


@contextlib.contextmanager
def no_wakeup_preemption() -> Iterator[None]:
    """The calling thread in ``SCHED_BATCH`` for the block, back to ``SCHED_OTHER`` after; a
    thread with any other policy (real-time, idle, batch already) is left as it is."""
    try:
        switched = ENABLED and os.sched_getscheduler(0) == _OTHER
        if switched:
            os.sched_setscheduler(0, _BATCH, os.sched_param(0))
    except OSError:             # a sandbox without the syscalls
        switched = False
    try:
        yield
    finally:
        if switched:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, _OTHER, os.sched_param(0))
