"""Measure one compile/runtime lever at a time on a benchmark net, through aotexec.

    python benchmarks/levers.py lenet infer --variant base --variant im2col=--iree-global-opt-use-im2col-for-convs
    python benchmarks/levers.py mlp train --variant base --variant notiling=-data-tiling --rounds 3

A variant is NAME=SPEC where SPEC is a ';'-separated list of extra iree-compile flags,
``-data-tiling`` (turn aotexec's default ``--iree-opt-data-tiling`` off), ``sync``
(AOTEXEC_CPU_DRIVER=local-sync), ``nhwc`` (convolutions emitted in NHWC, see
``nhwc_convolutions``), ``fused`` (train via ``forward_backward()``) or ``mirror:POLICY``
(bind with ``mirror=POLICY``, see ``aotexec.passes.mirror``), ``env:NAME=VALUE`` (an
environment variable for that variant's process);
``base`` is aotexec as shipped.  Each variant runs in its own process (the flags are
applied by wrapping ``aotexec.pipeline.program.options_for`` there: a benchmark-side experiment,
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


def nhwc_convolutions() -> None:
    """Experiment (this process only): emit every 2-D NCHW convolution as transpose -> NHWC/HWIO
    convolution -> transpose back, each transpose fenced by stablehlo.optimization_barrier so that
    IREE cannot fold the layout change back into an NCHW convolution (see conv_layout.py)."""
    from aotexec.emitter import Emitter
    orig = Emitter.convolution
    nchw = "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]"

    def barrier(b, v):
        return b.op("stablehlo.optimization_barrier", [v], v.shape, v.dtype)

    def conv(self, x, w, out_shape, stride, pad, lhs_dilation, rhs_dilation, groups=1, spec=None):
        if x.ndim != 4 or groups != 1 or (spec or nchw) != nchw:
            return orig(self, x, w, out_shape, stride, pad, lhs_dilation, rhs_dilation, groups, spec)
        xt = barrier(self, self.transpose(x, (0, 2, 3, 1)))
        wt = barrier(self, self.transpose(w, (2, 3, 1, 0)))
        n, o, oh, ow = out_shape
        y = orig(self, xt, wt, (n, oh, ow, o), stride, pad, lhs_dilation, rhs_dilation, groups,
                 "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]")
        return self.transpose(barrier(self, y), (0, 3, 1, 2))
    Emitter.convolution = conv


def child(net: str, mode: str, spec: str, iters: int, warmup: int) -> dict:
    import nets
    import aotexec as ax
    from aotexec.pipeline import program as build
    parts = [p for p in spec.split(";") if p and p != "base"]
    flags = tuple(p for p in parts if p.startswith("--"))
    tiling = "-data-tiling" not in parts
    orig = build.options_for
    build.options_for = lambda ctx, **kw: dataclasses.replace(orig(ctx, **kw), data_tiling=tiling,
                                                              extra_flags=orig(ctx, **kw).extra_flags + flags)
    if "nhwc" in parts:
        nhwc_convolutions()
    s = nets.symbol(ax.sym, net)
    args, aux = nets.shapes_of(s, net)
    data, label, params, auxv = nets.inputs_and_params(net, args, aux)
    req = "null" if mode == "infer" else {n: ("null" if n in ("data", "softmax_label") else "write") for n in args}
    mirror = next((p.split(":", 1)[1] for p in parts if p.startswith("mirror:")), None)
    ex = s.simple_bind(ax.cpu(), grad_req=req, data=data.shape, softmax_label=label.shape, mirror=mirror)
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
    import numpy as np
    check = float((out * np.arange(1, out.size + 1).reshape(out.shape)).sum())  # order-sensitive checksum
    if mode != "infer":
        g = next(v for k, v in sorted(ex.grad_dict.items()) if v is not None)
        check += float(np.abs(g.asnumpy()).sum())
    return {"times": ts, "first_s": first, "out_sum": check}


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
            env.update(p[4:].split("=", 1) for p in spec.split(";") if p.startswith("env:"))
            t0 = os.getloadavg()[0]
            res = subprocess.run([sys.executable, __file__, a.net, a.mode, f"--child={spec}", "--iters", str(a.iters),
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
              f"checksum {info[name]['out_sum']:.6g}  load {info[name]['load']:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
