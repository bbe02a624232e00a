"""The caller's scheduling policy while it waits for IREE's task workers (aotexec/runtime/waiting.py)."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import aotexec as ax
from aotexec.runtime import waiting

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policies only")


def test_the_caller_waits_in_batch_policy_and_gets_its_own_back():
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    with waiting.no_wakeup_preemption():
        assert os.sched_getscheduler(0) == os.SCHED_BATCH
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    with pytest.raises(ZeroDivisionError), waiting.no_wakeup_preemption():
        1 / 0
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_a_thread_with_another_policy_keeps_it():
    seen = []

    def run():
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        with waiting.no_wakeup_preemption():
            seen.append(os.sched_getscheduler(0))
        seen.append(os.sched_getscheduler(0))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert seen == [os.SCHED_IDLE, os.SCHED_IDLE]


def test_a_forward_on_the_cpu_leaves_the_policy_as_it_was():
    # the executor's call goes through the context manager (local-task): policy restored, result right
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ex = (ax.sym.Variable("data") * 2).simple_bind(ax.cpu(), grad_req="null", data=x.shape)
    ex.arg_dict["data"][:] = x
    calls = []
    original = waiting.no_wakeup_preemption

    def counting():
        calls.append(1)
        return original()

    waiting_fn = "aotexec.runtime.device.no_wakeup_preemption"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(waiting_fn, counting)
        out = ex.forward()[0].asnumpy()
    np.testing.assert_array_equal(out, x * 2)
    assert calls and os.sched_getscheduler(0) == os.SCHED_OTHER
