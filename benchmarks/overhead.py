"""Per-call overhead of aotexec's Executor against a raw iree.runtime invoke.

    python benchmarks/overhead.py [--iters N]

For a one-node graph (relu on 64x10) and for the benchmark MLP (inference), times:
  executor   ex.forward(is_train=False)
  raw        vm_context.invoke(fn, args, results) with the exact argument list the
             executor passed (captured once), i.e. IREE's own cost per call
  feed       ex.arg_dict['data'][:] = x (host -> device copy of the input)
  fetch      ex.outputs[0].asnumpy() (device -> host copy of the output)
and prints a cProfile of the executor path (where the Python time goes).
Run with AOTEXEC_CPU_DRIVER=local-sync and without to compare the drivers.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nets  # noqa: E402


def med(fn, iters):
    fn()
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def measure(label, ex, iters, profile=False):
    import iree.runtime as rt
    from aotexec.runtime import device as dev_mod
    captured = {}
    orig = dev_mod.LoadedModule.invoke

    def spy(self, name, args):
        captured.setdefault("call", (self, name, list(args)))
        return orig(self, name, args)
    dev_mod.LoadedModule.invoke = spy
    try:
        ex.forward(is_train=False)
    finally:
        dev_mod.LoadedModule.invoke = orig
    mod, name, args = captured["call"]
    fn = mod.function(name)
    arg_list = rt.VmVariantList(len(args))
    for a in args:
        arg_list.push_ref(a)

    def raw():
        results = rt.VmVariantList(4)
        mod.vm_context.invoke(fn, arg_list, results)

    x = np.random.RandomState(0).uniform(-1, 1, ex.arg_dict["data"].shape).astype(np.float32)

    def feed():
        ex.arg_dict["data"][:] = x

    r = {"executor": med(lambda: ex.forward(is_train=False), iters), "raw": med(raw, iters),
         "feed": med(feed, iters), "fetch": med(lambda: ex.outputs[0].asnumpy(), iters)}
    print(f"{label:34s} executor {r['executor']:8.1f} us   raw invoke {r['raw']:8.1f} us   "
          f"overhead {r['executor'] - r['raw']:7.1f} us   feed {r['feed']:6.1f} us   fetch {r['fetch']:6.1f} us",
          flush=True)
    if profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(2000):
            ex.forward(is_train=False)
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
        print("\n".join(s.getvalue().splitlines()[:30]))
    return r


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--profile", action="store_true")
    a = p.parse_args()
    import aotexec as ax
    from aotexec.runtime.device import default_driver
    print(f"driver {default_driver(ax.cpu())}")
    x = ax.sym.Variable("data")
    one = ax.sym.Activation(x, act_type="relu", name="relu")
    ex = one.simple_bind(ax.cpu(), grad_req="null", data=(64, 10))
    measure("one-node graph (relu 64x10)", ex, a.iters, a.profile)
    s = nets.symbol(ax.sym, "mlp")
    ex = s.simple_bind(ax.cpu(), grad_req="null", data=(64, 784), softmax_label=(64,))
    args, aux = nets.shapes_of(s, "mlp")
    _, _, params, _ = nets.inputs_and_params("mlp", args, aux)
    for n, v in params.items():
        ex.arg_dict[n][:] = v
    measure("benchmark MLP b64, inference", ex, max(200, a.iters // 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
