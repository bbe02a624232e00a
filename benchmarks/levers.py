"""Measure one compile/runtime lever at a time on a benchmark net, through aotexec.

    python benchmarks/levers.py lenet infer --variant base --variant im2col=--iree-global-opt-use-im2col-for-convs
    python benchmarks/levers.py mlp train --variant base --variant notiling=-data-tiling --rounds 3

A variant is NAME=SPEC where SPEC is a ';'-separated list of extra iree-compile flags,
``-data-tiling`` (turn aotexec's default ``--iree-opt-data-tiling`` off), ``sync``
(AOTEXEC_CPU_DRIVER=local-sync) or ``fused`` (train via ``forward_backward()``);
``base`` is aotexec as shipped.  Each variant runs in its own process (the flags are
applied by wrapping ``aotexec.build.options_for`` there: a benchmark-side experiment,
aotexec itself is unchanged), variants alternate over ``--rounds`` rounds, and the
median / p10 / p90 of all iterations is printed per variant.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def child(net: str, mode: str, spec: str, iters: int, warmup: int) -> dict:
    import nets
    import aotexec as ax
    from aotexec import build
    parts = [p for p in spec.split(";") if p and p != "base"]
    flags = tuple(p for p in parts if p.startswith("--"))
    tiling = "-data-tiling" not in parts
    orig = build.options_for
    build.options_for = lambda ctx, **kw: dataclasses.replace(orig(ctx, **kw), data_tiling=tiling,
                                                              extra_flags=orig(ctx, **kw).extra_flags + flags)
    s = nets.symbol(ax.sym, net)
    args, aux = nets.shapes_of(s, net)
    data, label, params, auxv = nets.inputs_and_params(net, args, aux)
    req = "null" if mode == "infer" else {n: ("null" if n in ("data", "softmax_label") else "write") for n in args}
    ex = s.simple_bind(ax.cpu(), grad_req=req, data=data.shape, softmax_label=label.shape)
    for n, v in {**params, "data": data, "softmax_label": label}.items():
        ex.arg_dict[n][:] = v
    for n, v in auxv.items():
        ex.aux_dict[n][:] = v
    if mode == "infer":
        def step():
            ex.forward(is_train=False)
    elif "fused" in parts:
        def step():
            ex.forward_backward()
    else:
        def step():
            ex.forward(is_train=True)
            ex.backward()
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    for _ in range(warmup):
        step()
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t)
    out = ex.outputs[0].asnumpy()
    return {"times": ts, "first_s": first, "out_sum": float(abs(out).sum())}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("net")
    p.add_argument("mode", choices=("infer", "train"))
    p.add_argument("--variant", action="append", default=[], help="NAME=SPEC (see the module doc)")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child is not None:
        print(json.dumps(child(a.net, a.mode, a.child, a.iters, a.warmup)))
        return 0
    variants = [v.split("=", 1) if "=" in v else (v, v) for v in (a.variant or ["base"])]
    samples: dict[str, list[float]] = {}
    info: dict[str, dict] = {}
    for r in range(a.rounds):
        for name, spec in variants:
            env = dict(os.environ)
            if "sync" in spec.split(";"):
                env["AOTEXEC_CPU_DRIVER"] = "local-sync"
            t0 = os.getloadavg()[0]
            res = subprocess.run([sys.executable, __file__, a.net, a.mode, "--child", spec, "--iters", str(a.iters),
                                  "--warmup", str(a.warmup)], capture_output=True, text=True, env=env)
            if res.returncode:
                err = [ln for ln in res.stderr.splitlines() if "error" in ln.lower()][:1] or res.stderr.splitlines()[-1:]
                print(f"{name}: FAILED: {err[0][:300] if err else '?'}", flush=True)
                info[name] = {"failed": True}
                continue
            d = json.loads(res.stdout.strip().splitlines()[-1])
            samples.setdefault(name, []).extend(d["times"])
            info[name] = {"first_s": d["first_s"], "out_sum": d["out_sum"], "load": t0}
    for name, _ in variants:
        ts = sorted(samples.get(name, []))
        if not ts:
            continue
        q = lambda f: ts[int(f * (len(ts) - 1))] * 1e3  # noqa: E731
        print(f"{a.net} {a.mode} {name:24s} median {statistics.median(ts) * 1e3:8.3f} ms  p10 {q(0.1):8.3f}  "
              f"p90 {q(0.9):8.3f}  n={len(ts)}  first call {info[name]['first_s']:.2f} s  "
              f"|out| {info[name]['out_sum']:.4f}  load {info[name]['load']:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
