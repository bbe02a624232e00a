"""Data-parallel LeNet training over MPI, written as an MXNet Module-style loop on a
'dist_sync' kvstore: every rank binds the same graph (or artifact) on its shard of each global
batch, pushes its gradients (summed across ranks in buckets) and pulls the updated weights.

    mpirun -np 2 python examples/train_distributed.py --steps 20
    python examples/train_distributed.py --steps 20              # one rank: the full batch
    mpirun -np 2 python examples/train_distributed.py --artifact artifacts/lenet-train  # runtime only

With ``--artifact DIR`` the ranks load an artifact compiled with a training grad_req for the
shard's batch (``--compile`` writes one with variants for 1 and 2 ranks); no compiler is needed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aotexec as ax  # noqa: E402
from train import init_params, lenet, synthetic  # noqa: E402

SHAPE = (1, 28, 28)
TINY = dict(filters=(4, 8), hidden=32)    # the CI test's LeNet: the same layers, 1 % of the weights


def grad_req(sym: ax.sym.Symbol) -> dict[str, str]:
    return {n: ("null" if n in ("data", "softmax_label") else "write") for n in sym.list_arguments()}


def compile_artifact(out: str, batch: int, ranks: tuple[int, ...] = (1, 2), tiny: bool = False) -> ax.Artifact:
    """A LeNet training artifact with one shape variant per rank count (the shard's batch)."""
    sym = lenet(**TINY) if tiny else lenet()
    variants = [{"data": (batch // n,) + SHAPE, "softmax_label": (batch // n,)} for n in ranks]
    return ax.compile(sym, variants, grad_req=grad_req(sym), out=out)


def bind(artifact: str | None, shard: int, tiny: bool) -> ax.Executor:
    shapes = {"data": (shard,) + SHAPE, "softmax_label": (shard,)}
    if artifact:
        return ax.load(artifact).simple_bind(ax.cpu(), **shapes)
    sym = lenet(**TINY) if tiny else lenet()
    return sym.simple_bind(ax.cpu(), grad_req=grad_req(sym), **shapes)


def train(steps: int = 10, batch: int = 8, optimizer: str = "sgd", artifact: str | None = None,
          tiny: bool = False, log=print) -> tuple[dict[str, np.ndarray], float]:
    """Trains on this rank's shards; returns the weights and the seconds per step (after the first)."""
    kv = ax.kvstore.create("dist_sync")
    rank, size = kv.rank, kv.num_workers
    if batch % size:
        raise SystemExit(f"batch {batch} does not split over {size} ranks")
    shard = batch // size
    ex = bind(artifact, shard, tiny)
    init_params(ex)
    names = [n for n in ex.arg_dict if ex.grad_dict.get(n) is not None][::-1]   # backward's order
    kv.init(names, [ex.arg_dict[n] for n in names])     # rank 0's initial weights everywhere
    kv.pull(names, out=[ex.arg_dict[n] for n in names])
    # Module's convention: gradients are summed over the global batch, rescale_grad averages them
    params = dict(learning_rate=0.01, momentum=0.9, wd=1e-4) if optimizer == "sgd" else dict(learning_rate=1e-3)
    kv.set_optimizer(ax.optimizer.create(optimizer, rescale_grad=1.0 / batch,
                                         param_idx2name=dict(enumerate(names)), **params))
    x, y = synthetic(batch * steps, SHAPE)
    start = time.perf_counter()
    for step in range(steps):
        if step == 1:    # time from the second step: the first loads (or compiles) the training programs
            start = time.perf_counter()
        lo = step * batch + rank * shard
        xb, yb = x[lo:lo + shard], y[lo:lo + shard]
        probs = ex.forward(is_train=True, data=xb, softmax_label=yb)[0].asnumpy()
        ex.backward()
        kv.push(names, [ex.grad_dict[n] for n in names])
        kv.pull(names, out=[ex.arg_dict[n] for n in names])
        if rank == 0 and log:
            log(f"step {step}: rank 0 shard loss {-np.log(probs[np.arange(shard), yb.astype(int)] + 1e-12).mean():.4f}")
    per_step = (time.perf_counter() - start) / max(steps - 1, 1)
    return {n: ex.arg_dict[n].asnumpy() for n in names}, per_step


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8, help="global batch, split evenly over the ranks")
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--artifact", help="train from this artifact (runtime only) instead of compiling")
    ap.add_argument("--compile", metavar="DIR", help="write a training artifact for 1 and 2 ranks and exit")
    ap.add_argument("--tiny", action="store_true", help="a LeNet with 4 / 8 filters and 32 hidden units")
    ap.add_argument("--save", help="rank 0 writes the trained parameters to this .npz")
    a = ap.parse_args()
    if a.compile:
        print(compile_artifact(a.compile, a.batch, tiny=a.tiny))
        raise SystemExit(0)
    weights, seconds = train(a.steps, a.batch, a.optimizer, a.artifact, a.tiny)
    if ax.distributed.rank() == 0:
        print(f"{a.steps} steps of batch {a.batch} on {ax.distributed.num_workers()} rank(s): "
              f"{1000 * seconds:.1f} ms/step")
        if a.save:
            np.savez(a.save, **weights)
