"""Is it the layout?  One convolution as hand-written StableHLO, NCHW vs NHWC, on IREE.

    python benchmarks/conv_layout.py [--flag EXTRA_IREE_FLAG]...

For the convolutions that dominate LeNet and ResNet-8 (see profile_ops.py), compiles
a module with the NCHW ABI aotexec uses, in three forms:
  nchw        stablehlo.convolution [b, f, 0, 1]x[o, i, 0, 1] (what aotexec emits today)
  nhwc        transpose input to NHWC and filter to HWIO, convolve [b, 0, 1, f]x[0, 1, i, o],
              transpose back: same ABI, a layout IREE's CPU backend handles better
  nhwc-barrier  the same with stablehlo.optimization_barrier around the convolution, so IREE
              cannot fold the transposes back into it
  nhwc-only   the NHWC convolution alone (inputs already NHWC: the cost without transposes)
with aotexec's flags (llvm-cpu, host, O2, data tiling), and times each on local-sync with
iree.runtime directly (no aotexec in the loop).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

CASES = [  # label, N, C, H, W, O, K, stride, pad
    ("lenet conv1 5x5 1->20", 64, 1, 28, 28, 20, 5, 1, 0),
    ("lenet conv2 5x5 20->50", 64, 20, 12, 12, 50, 5, 1, 0),
    ("resnet 3x3 16->16 @32", 16, 16, 32, 32, 16, 3, 1, 1),
    ("resnet 3x3 32->32 @16", 16, 32, 16, 16, 32, 3, 1, 1),
    ("resnet 3x3 64->64 @8", 16, 64, 8, 8, 64, 3, 1, 1),
]
FLAGS = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
         "--iree-llvmcpu-target-cpu=host", "--iree-opt-level=O2", "--iree-opt-data-tiling"]


def t(*dims):
    return "tensor<" + "x".join(map(str, dims)) + "xf32>"


def module(form, n, c, h, w, o, k, s, p):
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    win = (f"window_strides = array<i64: {s}, {s}>, padding = dense<[[{p}, {p}], [{p}, {p}]]> : tensor<2x2xi64>, "
           "lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, feature_group_count = 1 : i64, "
           "batch_group_count = 1 : i64")
    if form == "nchw":
        return f"""func.func @main(%x: {t(n, c, h, w)}, %w: {t(o, c, k, k)}) -> {t(n, o, oh, ow)} {{
  %y = "stablehlo.convolution"(%x, %w) {{dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>, {win}}} : ({t(n, c, h, w)}, {t(o, c, k, k)}) -> {t(n, o, oh, ow)}
  return %y : {t(n, o, oh, ow)}
}}"""
    if form == "nhwc":
        return f"""func.func @main(%x: {t(n, c, h, w)}, %w: {t(o, c, k, k)}) -> {t(n, o, oh, ow)} {{
  %xt = stablehlo.transpose %x, dims = [0, 2, 3, 1] : ({t(n, c, h, w)}) -> {t(n, h, w, c)}
  %wt = stablehlo.transpose %w, dims = [2, 3, 1, 0] : ({t(o, c, k, k)}) -> {t(k, k, c, o)}
  %y = "stablehlo.convolution"(%xt, %wt) {{dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, {win}}} : ({t(n, h, w, c)}, {t(k, k, c, o)}) -> {t(n, oh, ow, o)}
  %yt = stablehlo.transpose %y, dims = [0, 3, 1, 2] : ({t(n, oh, ow, o)}) -> {t(n, o, oh, ow)}
  return %yt : {t(n, o, oh, ow)}
}}"""
    if form == "nhwc-barrier":
        return f"""func.func @main(%x: {t(n, c, h, w)}, %w: {t(o, c, k, k)}) -> {t(n, o, oh, ow)} {{
  %xt0 = stablehlo.transpose %x, dims = [0, 2, 3, 1] : ({t(n, c, h, w)}) -> {t(n, h, w, c)}
  %wt0 = stablehlo.transpose %w, dims = [2, 3, 1, 0] : ({t(o, c, k, k)}) -> {t(k, k, c, o)}
  %xt, %wt = stablehlo.optimization_barrier %xt0, %wt0 : {t(n, h, w, c)}, {t(k, k, c, o)}
  %y0 = "stablehlo.convolution"(%xt, %wt) {{dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, {win}}} : ({t(n, h, w, c)}, {t(k, k, c, o)}) -> {t(n, oh, ow, o)}
  %y = stablehlo.optimization_barrier %y0 : {t(n, oh, ow, o)}
  %yt = stablehlo.transpose %y, dims = [0, 3, 1, 2] : ({t(n, oh, ow, o)}) -> {t(n, o, oh, ow)}
  return %yt : {t(n, o, oh, ow)}
}}"""
    return f"""func.func @main(%x: {t(n, h, w, c)}, %w: {t(k, k, c, o)}) -> {t(n, oh, ow, o)} {{
  %y = "stablehlo.convolution"(%x, %w) {{dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, {win}}} : ({t(n, h, w, c)}, {t(k, k, c, o)}) -> {t(n, oh, ow, o)}
  return %y : {t(n, oh, ow, o)}
}}"""


def run(vmfb, shapes, iters):
    import iree.runtime as rt
    cfg = rt.Config("local-sync")
    ctx = rt.SystemContext(config=cfg)
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
    f = ctx.modules.module["main"]
    rng = np.random.RandomState(0)
    args = [rt.asdevicearray(cfg.device, rng.uniform(-1, 1, s).astype(np.float32)) for s in shapes]
    f(*args)
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        f(*args)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3, np.asarray(f(*args))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flag", action="append", default=[])
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    import iree.compiler as ic
    for label, n, c, h, w, o, k, s, p in CASES:
        oh = (h + 2 * p - k) // s + 1
        gflop = 2 * n * o * oh * oh * c * k * k / 1e9
        line, ref = [], None
        for form in ("nchw", "nhwc", "nhwc-barrier", "nhwc-only"):
            vmfb = ic.compile_str(module(form, n, c, h, w, o, k, s, p), input_type="stablehlo",
                                  extra_args=FLAGS + a.flag)
            shapes = [(n, c, h, w), (o, c, k, k)] if form != "nhwc-only" else [(n, h, w, c), (k, k, c, o)]
            ms, out = run(vmfb, shapes, a.iters)
            if form == "nchw":
                ref = out
            elif form in ("nhwc", "nhwc-barrier"):
                assert np.allclose(out, ref, atol=1e-3), "layouts disagree"
            line.append(f"{form} {ms:8.3f} ms ({gflop / ms * 1e3:6.1f} GFLOP/s)")
        print(f"{label:24s} " + "  ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
