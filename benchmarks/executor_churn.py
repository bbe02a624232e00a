"""Executors of one structure at random shapes, as MXNet-style code creates them (#21):
bind + forward (+ backward) for each, cold compile cache included.

    python benchmarks/executor_churn.py [--count 1000] [--static-count 20] [--cases mlp,convnet_train]

Each (case, shape policy) runs in a fresh process with an empty AOTEXEC_CACHE_DIR, so the
total includes every compile.  ``static`` (one module per shape, the behaviour before
shape-generic programs) runs ``--static-count`` executors and is extrapolated to ``--count``.
Prints a markdown table (docs/PERFORMANCE.md keeps the measured ones).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cases():
    import aotexec as ax
    S = ax.sym

    def mlp():
        h = S.Activation(S.FullyConnected(S.Variable("data"), num_hidden=64, name="fc1"), act_type="relu")
        return S.SoftmaxOutput(S.FullyConnected(h, num_hidden=10, name="fc2"), name="sm")

    def convnet():
        c = S.Convolution(S.Variable("data"), num_filter=8, kernel=(3, 3), pad=(1, 1), name="c1")
        c = S.Activation(S.BatchNorm(c, name="bn1"), act_type="relu")
        p = S.Pooling(c, kernel=(2, 2), stride=(2, 2), pool_type="max")
        return S.SoftmaxOutput(S.FullyConnected(S.Flatten(p), num_hidden=10, name="fc"), name="sm")

    def elemwise():
        a, b, c = S.Variable("a"), S.Variable("b"), S.Variable("c")
        return S.broadcast_mul(a + b, S.sin(c))

    return {
        # name: (symbol, shapes(rng) -> kwargs, training)
        "elemwise": (elemwise, lambda r: (lambda s: dict(a=s, b=s, c=s))(tuple(int(v) for v in r.integers(1, 65, 2))),
                     False),
        "mlp": (mlp, lambda r: dict(data=(int(r.integers(1, 65)), int(r.integers(1, 129)))), False),
        "mlp_train": (mlp, lambda r: dict(data=(int(r.integers(1, 65)), int(r.integers(1, 129)))), True),
        "convnet_train_batch": (convnet, lambda r: dict(data=(int(r.integers(1, 33)), 3, 16, 16)), True),
        "convnet_train": (convnet, lambda r: dict(data=(int(r.integers(1, 17)), 3) + (int(r.choice([8, 12, 16])),) * 2),
                          True),
    }


def run_one(case: str, count: int, seed: int) -> dict:
    """In this (fresh) process: ``count`` executors of ``case``."""
    import numpy as np
    import aotexec as ax
    from aotexec.pipeline import generic, program
    build, shapes, train = _cases()[case]
    sym = build()
    rng = np.random.default_rng(seed)
    times = []
    t0 = time.perf_counter()
    for _ in range(count):
        t = time.perf_counter()
        ex = sym.simple_bind(ax.cpu(), grad_req="write" if train else "null", **shapes(rng))
        for name, arr in ex.arg_dict.items():
            arr[:] = rng.standard_normal(arr.shape).astype("f4") if not name.endswith("label") else \
                rng.integers(0, 10, arr.shape).astype("f4")
        out = ex.forward(is_train=train)
        if train:
            ex.backward()
        out[0].asnumpy()
        times.append(time.perf_counter() - t)
    total = time.perf_counter() - t0
    times.sort()
    return {"case": case, "count": count, "total_s": total, "p50_ms": 1e3 * times[len(times) // 2],
            "p90_ms": 1e3 * times[int(len(times) * 0.9)], "static_compiles": program.stats["misses"],
            "generic_compiles": generic.stats["compiles"], "generic_hits": generic.stats["hits"]}


def fresh(case: str, policy: str, count: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, AOTEXEC_CACHE_DIR=cache, AOTEXEC_SHAPES=policy,
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out = subprocess.run([sys.executable, __file__, "--one", case, "--count", str(count), "--seed", str(seed)],
                             env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1]) | {"policy": policy}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--static-count", type=int, default=20)
    ap.add_argument("--cases", default="elemwise,mlp,mlp_train,convnet_train_batch,convnet_train")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.count, args.seed)))
        return
    rows = []
    print("| case | policy | executors | total s (cold cache) | per 1,000 s | p50 ms | p90 ms | compiles (static + generic) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for case in args.cases.split(","):
        for policy, count in (("auto", args.count), ("static", args.static_count)):
            r = fresh(case, policy, count, args.seed)
            rows.append(r)
            print(f"| {case} | {policy} | {count} | {r['total_s']:.1f} | {r['total_s'] * 1000 / count:.0f} | "
                  f"{r['p50_ms']:.1f} | {r['p90_ms']:.1f} | {r['static_compiles']} + {r['generic_compiles']} |",
                  flush=True)
    (ROOT / "benchmarks" / "results").mkdir(exist_ok=True)
    (ROOT / "benchmarks" / "results" / "executor_churn.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
