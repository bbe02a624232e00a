"""KVStore code written as MXNet's own dist_sync tests write it (``import ... as mx``), run by
tests/test_distributed.py under ``mpirun -np 2`` and as one process that plays both workers.

    python dist_worker.py kvstore OUT.npz [--simulate N]    # one process, 'local' kvstore, N devices
    mpirun -np N python dist_worker.py kvstore OUT.npz       # 'dist_sync', rank r writes OUT.r.npz
    mpirun -np 2 python dist_worker.py fail kill|stall|raise   # rank 1 fails at step 3
"""
from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

import aotexec as mx

SHAPE, BIG = (2, 3), (600, 700)     # BIG spans several 4 MB buckets when pushed with the others


def value(worker: int, step: int, shape=SHAPE) -> np.ndarray:
    return np.random.default_rng(100 * worker + step).normal(size=shape).astype(np.float32)


def kvstore(out: str, simulate: int = 0) -> None:
    kv = mx.kv.create("local" if simulate else "dist_sync")
    workers = simulate or kv.num_workers
    mine = range(workers) if simulate else [kv.rank]      # a simulated run pushes every worker's value

    def push_value(step: int, shape=SHAPE):
        vals = [mx.nd.array(value(w, step, shape)) for w in mine]
        return vals if simulate else vals[0]

    res = {}
    keys = ["3", "5", "7", "big"]
    kv.init(keys[:3], [mx.nd.ones(SHAPE)] * 3)
    kv.init("big", mx.nd.zeros(BIG))
    # no optimizer: the stored value becomes the sum of all workers' pushes
    kv.push("3", push_value(0))
    val = mx.nd.zeros(SHAPE)
    kv.pull("3", out=val)
    res["sum"] = val.asnumpy()
    # several keys in one push, pulled to several devices
    kv.push(keys, [push_value(1), push_value(2), push_value(3), push_value(4, BIG)])
    outs = [[mx.nd.zeros(SHAPE), mx.nd.zeros(SHAPE)] for _ in range(3)] + [mx.nd.zeros(BIG)]
    kv.pull(keys, out=outs)
    res.update({f"multi_{k}": (o[1] if isinstance(o, list) else o).asnumpy() for k, o in zip(keys, outs)})
    # an optimizer on the store: Module's update_on_kvstore loop
    for name, opt in (("sgd", mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01,
                                                  rescale_grad=1.0 / workers)),
                      ("adam", mx.optimizer.Adam(learning_rate=0.01, wd=0.001, rescale_grad=1.0 / workers))):
        kv.set_optimizer(opt)
        w = mx.nd.zeros(SHAPE)
        for step in range(4):
            kv.pushpull("5" if name == "sgd" else "7", push_value(10 + step), out=w)
        res[f"opt_{name}"] = w.asnumpy()
    # aotexec.distributed directly: an executor's gradients averaged in place (no kvstore)
    grads = {"a": [value(w, 20) for w in mine], "c": [value(w, 21, (5,)) for w in mine]}
    if simulate:
        res.update({f"grad_{n}": np.sum(v, axis=0, dtype=np.float32) / workers for n, v in grads.items()})
    else:
        class Executor:       # allreduce_grads reads only grad_dict
            grad_dict = {"a": mx.nd.array(grads["a"][0]), "b": None, "c": mx.nd.array(grads["c"][0])}
        seen: list[str] = []
        mx.distributed.allreduce_grads(Executor, average=True, on_ready=seen.extend)
        assert seen == ["c", "a"], seen       # backward's order: the last argument first
        res.update({f"grad_{n}": Executor.grad_dict[n].asnumpy() for n in grads})
    kv.barrier()
    res["rank"] = np.array(kv.rank)
    np.savez(out if simulate else out.replace(".npz", f".{kv.rank}.npz"), **res)


def fail(how: str) -> None:
    """Rank 1 dies (SIGKILL), stops (SIGSTOP) or raises at step 3; the others keep pushing."""
    kv = mx.kv.create("dist_sync")
    kv.init("w", mx.nd.zeros(SHAPE))
    g = mx.nd.ones(SHAPE)
    for step in range(50):
        if step == 3 and kv.rank == 1:
            print(f"rank 1 fails ({how}) at step 3", flush=True)
            if how == "raise":
                raise ValueError("rank 1 broke")
            os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        kv.push("w", g)
        time.sleep(0.01)
    print(f"rank {kv.rank} finished", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "kvstore":
        kvstore(sys.argv[2], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    else:
        fail(sys.argv[2])
