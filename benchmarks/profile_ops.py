"""Per-layer profile: each layer of a benchmark net as its own one-node aotexec graph.

    python benchmarks/profile_ops.py [lenet|resnet8|mlp] [--iters N] [--train]

Prints the median forward time of every layer alone (aotexec, ``forward(is_train=False)``;
with ``--train``, ``forward(is_train=True)`` and ``backward()`` separately),
so the layers that dominate a net's time are measured, not guessed.  The sum of the
layers is close to the whole net's time when per-call overhead is small.  Set
AOTEXEC_CPU_DRIVER=local-sync to drop thread-pool wake-ups from the picture.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np


def layers(sym, net):
    """(label, symbol over Variable 'x', input shape) for each op layer of ``net``."""
    x = sym.Variable("x")
    if net == "lenet":
        return [
            ("conv1 5x5 1->20", sym.Convolution(x, kernel=(5, 5), num_filter=20, name="c"), (64, 1, 28, 28)),
            ("tanh1", sym.Activation(x, act_type="tanh", name="a"), (64, 20, 24, 24)),
            ("pool1 max 2x2", sym.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2), name="p"), (64, 20, 24, 24)),
            ("conv2 5x5 20->50", sym.Convolution(x, kernel=(5, 5), num_filter=50, name="c"), (64, 20, 12, 12)),
            ("tanh2", sym.Activation(x, act_type="tanh", name="a"), (64, 50, 8, 8)),
            ("pool2 max 2x2", sym.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2), name="p"), (64, 50, 8, 8)),
            ("fc1 800->500", sym.FullyConnected(x, num_hidden=500, name="f"), (64, 800)),
            ("tanh3", sym.Activation(x, act_type="tanh", name="a"), (64, 500)),
            ("fc2 500->10", sym.FullyConnected(x, num_hidden=10, name="f"), (64, 500)),
        ]
    if net == "resnet8":
        out = []
        for cin, cout, hw, s in ((3, 16, 32, 1), (16, 16, 32, 1), (16, 32, 32, 2), (32, 32, 16, 1),
                                 (32, 64, 16, 2), (64, 64, 8, 1)):
            out.append((f"conv3x3 {cin}->{cout} s{s} @{hw}",
                        sym.Convolution(x, kernel=(3, 3), stride=(s, s), pad=(1, 1), num_filter=cout, no_bias=True,
                                        name="c"), (16, cin, hw, hw)))
        out.append(("batchnorm 16ch @32", sym.BatchNorm(x, fix_gamma=False, name="b"), (16, 16, 32, 32)))
        out.append(("relu 16ch @32", sym.Activation(x, act_type="relu", name="a"), (16, 16, 32, 32)))
        out.append(("global avg pool", sym.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1), name="p"),
                    (16, 64, 8, 8)))
        return out
    if net == "mlp":
        return [("fc1 784->512", sym.FullyConnected(x, num_hidden=512, name="f"), (64, 784)),
                ("relu", sym.Activation(x, act_type="relu", name="a"), (64, 512)),
                ("fc2 512->512", sym.FullyConnected(x, num_hidden=512, name="f"), (64, 512)),
                ("fc3 512->10", sym.FullyConnected(x, num_hidden=10, name="f"), (64, 512))]
    raise KeyError(net)


def time_aotexec(s, shape, iters, train: bool = False, data_grad: bool = True) -> tuple[float, float]:
    """Median ms of forward (inference) or, with ``train``, of forward(is_train=True) and of
    backward (parameter gradients, and the input's when ``data_grad``: every layer but the
    net's first)."""
    import aotexec as ax
    req = {n: "write" if train and (n != "x" or data_grad) else "null" for n in s.list_arguments()}
    ex = s.simple_bind(ax.cpu(), grad_req=req, x=shape)
    rng = np.random.RandomState(0)
    for n, a in ex.arg_dict.items():
        a[:] = rng.uniform(-1, 1, a.shape).astype(np.float32)
    for n, a in ex.aux_dict.items():
        a[:] = rng.uniform(0.5, 1.5, a.shape).astype(np.float32)
    head = [ax.nd.array(rng.uniform(-1, 1, o.shape).astype(np.float32)) for o in ex.outputs]
    fwd, bwd = [], []
    for i in range(iters + 1):
        t = time.perf_counter()
        ex.forward(is_train=train)
        t1 = time.perf_counter()
        if train:
            ex.backward(head)
        t2 = time.perf_counter()
        if i:       # the first call loads the module
            fwd.append(t1 - t)
            bwd.append(t2 - t1)
    return statistics.median(fwd) * 1e3, statistics.median(bwd) * 1e3


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("net", nargs="?", default="lenet")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--train", action="store_true", help="time forward(is_train=True) and backward() per layer")
    p.add_argument("--flag", action="append", default=[], help="extra iree-compile flag (a benchmark-side "
                   "experiment: wraps aotexec.pipeline.program.options_for in this process)")
    a = p.parse_args()
    import aotexec as ax
    if a.flag:
        import dataclasses
        from aotexec.pipeline import program as build
        orig = build.options_for
        build.options_for = lambda ctx, **kw: dataclasses.replace(
            orig(ctx, **kw), extra_flags=orig(ctx, **kw).extra_flags + tuple(a.flag))
    total = [0.0, 0.0]
    for k, (label, s, shape) in enumerate(layers(ax.sym, a.net)):
        fwd, bwd = time_aotexec(s, shape, a.iters, a.train, data_grad=k > 0)
        total = [total[0] + fwd, total[1] + bwd]
        print(f"{label:28s} in {str(shape):20s} {fwd:9.3f} ms" + (f"  backward {bwd:9.3f} ms" if a.train else ""),
              flush=True)
    print(f"{'sum':28s} {'':23s} {total[0]:9.3f} ms" + (f"  backward {total[1]:9.3f} ms" if a.train else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
