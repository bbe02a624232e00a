"""Realistic convolution layers alone: compile time, training time and module size per form.

    python benchmarks/conv_scaling.py CASE [--head pool|sum] [--wgrad FORM] [--fwd|--dwfwd|--grpfwd FORM]
    python benchmarks/conv_scaling.py --list
    python benchmarks/conv_scaling.py conv:K,S,P,C,F,G,HW,N    (any one convolution)

Each case is one layer (or a MobileNetV2 block), squared and globally pooled (so its head
gradient is computed in the graph, channels-last where the layer's output is, as inside a
net), bound with ``simple_bind`` on ``ax.cpu()`` with every gradient wanted (the data's too, except for a net's first layer); prints one
JSON line: the stablehlo ops of the training module, compile seconds (forward_train +
backward + train_step in one module, the compile cache off), and median (and min) ms of
``forward(is_train=True)`` and ``backward()``.  On a shared machine the minimum is the
steadier number; AOTEXEC_CPU_DRIVER=local-sync runs on one thread.  ``--wgrad`` forces a weight gradient form
(``conv_forms.weight_grad_form``), ``--fwd`` / ``--dwfwd`` / ``--grpfwd`` the forward form of
few-channel, depthwise and grouped convolutions, to compare them; run it on an older tree with
PYTHONPATH to get that tree's numbers (the flags need this one's).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time

import numpy as np

os.environ.setdefault("AOTEXEC_CACHE", "0")


def cases(S):
    x = S.Variable("x")

    def conv(k, s, p, nf, g=1, name="c"):
        return S.Convolution(x, kernel=(k, k), stride=(s, s), pad=(p, p), num_filter=nf, num_group=g,
                             no_bias=True, name=name)

    def mbv2(c, t, hw, s):
        e = c * t
        y = S.Convolution(x, kernel=(1, 1), num_filter=e, no_bias=True, name="expand")
        y = S.Activation(S.BatchNorm(y, fix_gamma=False, name="bn1"), act_type="relu")
        y = S.Convolution(y, kernel=(3, 3), stride=(s, s), pad=(1, 1), num_filter=e, num_group=e, no_bias=True,
                          name="dw")
        y = S.Activation(S.BatchNorm(y, fix_gamma=False, name="bn2"), act_type="relu")
        y = S.Convolution(y, kernel=(1, 1), num_filter=c, no_bias=True, name="project")
        return S.BatchNorm(y, fix_gamma=False, name="bn3")

    out = {}
    for n in (1, 2, 16):
        out[f"stem7x7_b{n}"] = (conv(7, 2, 3, 64), (n, 3, 224, 224), False)
    for n in (2, 16):
        out[f"r3x3_56x64_b{n}"] = (conv(3, 1, 1, 64), (n, 64, 56, 56), True)
        out[f"dw3x3_112x32_b{n}"] = (conv(3, 1, 1, 32, 32), (n, 32, 112, 112), True)
        out[f"dw3x3_14x512_b{n}"] = (conv(3, 1, 1, 512, 512), (n, 512, 14, 14), True)
        out[f"dw3x3s2_112x64_b{n}"] = (conv(3, 2, 1, 64, 64), (n, 64, 112, 112), True)
        out[f"grp3x3_28x128g32_b{n}"] = (conv(3, 1, 1, 128, 32), (n, 128, 28, 28), True)   # ResNeXt-like
        out[f"mbv2_56x24t6_b{n}"] = (mbv2(24, 6, 56, 1), (n, 24, 56, 56), True)
        out[f"mbv2_14x96t6_b{n}"] = (mbv2(96, 6, 14, 1), (n, 96, 14, 14), True)
    for n in (2, 16):
        out[f"maxpool3x3s2_112x64_b{n}"] = (S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max"),
                                            (n, 64, 112, 112), True)
    out["lenet_conv1_b64"] = (S.Convolution(x, kernel=(5, 5), num_filter=20, name="c"), (64, 1, 28, 28), False)
    out["lenet_conv2_b64"] = (S.Convolution(x, kernel=(5, 5), num_filter=50, name="c"), (64, 20, 12, 12), True)
    out["lenet_conv1_b2"] = (S.Convolution(x, kernel=(5, 5), num_filter=20, name="c"), (2, 1, 28, 28), False)
    out["lenet_conv2_b2"] = (S.Convolution(x, kernel=(5, 5), num_filter=50, name="c"), (2, 20, 12, 12), True)
    return out


def force_forms(wgrad: str | None, fwd: str | None, dwfwd: str | None, grpfwd: str | None) -> None:
    """Force forms this tree would not pick, to compare them (the alternatives measured)."""
    if not (wgrad or fwd or dwfwd or grpfwd):
        return
    from aotexec.ops import conv_forms
    if grpfwd:
        orig_gconv = conv_forms.convolution

        def grp_conv(b, x, w, out, stride, pad, lhs_dilation, rhs_dilation, groups=1):
            cg, og = x.shape[1] // groups, out[1] // groups
            if groups == 1 or cg == 1 or x.ndim != 4:
                return orig_gconv(b, x, w, out, stride, pad, lhs_dilation, rhs_dilation, groups)
            if grpfwd == "nchw_conv":
                return b.convolution(x, w, out, conv_forms.conv_spec(2), stride, pad, lhs_dilation, rhs_dilation,
                                     groups)
            if grpfwd == "im2col_g":    # patches group-major: (G, N*OH*OW, cg*K) x (G, og, cg*K)
                n, f, oh, ow = out
                kh, kw = w.shape[2:]
                wins = conv_forms.windows(b, conv_forms.pad_spatial(b, x, pad), (kh, kw), stride, rhs_dilation,
                                          (oh, ow), (2, 3))
                cols = [b.reshape(sl, (n, groups, cg, 1, oh, ow)) for sl in wins]
                pt = b.concatenate(cols, 3)                                        # (N, G, cg, K, OH, OW)
                pt = b.reshape(b.transpose(pt, (1, 0, 4, 5, 2, 3)), (groups, n * oh * ow, cg * kh * kw))
                wg = b.reshape(w, (groups, og, cg * kh * kw))
                y = b.dot_general(pt, wg, contract=([2], [2]), batch=([0], [0]))         # (G, NOO, og)
                y = b.transpose(b.reshape(y, (groups, n, oh, ow, og)), (1, 0, 4, 2, 3))
                return b.reshape(y, (n, f, oh, ow))
            if grpfwd == "im2col":    # one patch matrix, a batched matmul over the groups
                n, f, oh, ow = out
                kh, kw = w.shape[2:]
                xd = b.pad(x, 0.0, [0, 0, 0, 0], [0, 0, 0, 0], [0, 0] + [d - 1 for d in lhs_dilation])
                pt = conv_forms.im2col(b, xd, (kh, kw), stride, pad, rhs_dilation, (oh, ow))   # (NOO, C*K) c-major
                pt = b.reshape(pt, (n * oh * ow, groups, cg * kh * kw))
                wg = b.reshape(w, (groups, og, cg * kh * kw))
                y = b.dot_general(pt, wg, contract=([2], [2]), batch=([1], [0]))           # (G, NOO, og)
                y = b.reshape(y, (groups, n, oh, ow, og))
                return b.reshape(b.transpose(y, (1, 0, 4, 2, 3)), (n, f, oh, ow))
            # per kernel offset: a contraction over the group's channels, the group a batch dimension
            xd = b.pad(x, 0.0, [0, 0, 0, 0], [0, 0, 0, 0], [0, 0] + [d - 1 for d in lhs_dilation])
            xl = b.fenced_transpose(xd, (0, 2, 3, 1))
            xp = b.pad(xl, 0.0, (0, pad[0][0], pad[1][0], 0), (0, pad[0][1], pad[1][1], 0))
            n, f, oh, ow = out
            kh, kw = w.shape[2:]
            wins = conv_forms.windows(b, xp, (kh, kw), stride, rhs_dilation, (oh, ow), (1, 2))
            wk = b.reshape(b.transpose(w, (2, 3, 0, 1)), (kh * kw, groups, og, cg))
            acc = None
            for k, s in enumerate(wins):
                wkk = b.reshape(b.slice(wk, (k, 0, 0, 0), (k + 1, groups, og, cg)), (groups, og, cg))
                t = b.dot_general(b.reshape(s, (n, oh, ow, groups, cg)), wkk, contract=([4], [2]), batch=([3], [0]))
                acc = t if acc is None else b.add(acc, t)                 # (G, N, OH, OW, og)
            y = b.transpose(b.barrier(acc), (1, 0, 4, 2, 3))
            return b.reshape(y, (n, f, oh, ow))
        conv_forms.convolution = grp_conv
        from aotexec.ops import conv as conv_mod
        conv_mod.convolution = grp_conv
    if dwfwd:
        orig_conv = conv_forms.convolution

        def dw_conv(b, x, w, out, stride, pad, lhs_dilation, rhs_dilation, groups=1):
            depthwise = groups > 1 and x.shape[1] == groups and out[1] == groups and x.ndim == 4
            if not depthwise:
                return orig_conv(b, x, w, out, stride, pad, lhs_dilation, rhs_dilation, groups)
            if dwfwd == "nchw_conv":
                return b.convolution(x, w, out, conv_spec(2), stride, pad, lhs_dilation, rhs_dilation, groups)
            # a sum of shifted windows times per-channel weights (lhs dilation: interior padding,
            # which IREE 3.13 miscompiled at batch 2: time strided data gradients only)
            xd = b.pad(x, 0.0, [0, 0, 0, 0], [0, 0, 0, 0], [0, 0] + [d - 1 for d in lhs_dilation])
            if dwfwd == "sum_nchw":
                xp = conv_forms.pad_spatial(b, xd, pad)
                wins = conv_forms.windows(b, xp, w.shape[2:], stride, rhs_dilation, out[2:], (2, 3))
                wc = b.reshape(w, (groups, -1 if False else w.shape[2] * w.shape[3]))
                acc = None
                for k, win in enumerate(wins):
                    col = b.broadcast_in_dim(b.reshape(b.slice(wc, (0, k), (groups, k + 1)), (groups,)), out, (1,))
                    t = b.mul(win, col)
                    acc = t if acc is None else b.add(acc, t)
                return acc
            xl = b.fenced_transpose(xd, (0, 2, 3, 1))
            xp = b.pad(xl, 0.0, (0, pad[0][0], pad[1][0], 0), (0, pad[0][1], pad[1][1], 0))
            n, c, oh, ow = out
            wins = conv_forms.windows(b, xp, w.shape[2:], stride, rhs_dilation, out[2:], (1, 2))
            wc = b.reshape(w, (groups, w.shape[2] * w.shape[3]))
            acc = None
            for k, win in enumerate(wins):
                col = b.broadcast_in_dim(b.reshape(b.slice(wc, (0, k), (groups, k + 1)), (groups,)), (n, oh, ow, c), (3,))
                t = b.mul(win, col)
                acc = t if acc is None else b.add(acc, t)
            return b.transpose(b.barrier(acc), (0, 3, 1, 2))
        conv_forms.convolution = dw_conv
        from aotexec.ops import conv as conv_mod
        conv_mod.convolution = dw_conv
        conv_spec = conv_forms.conv_spec
    if fwd == "direct":     # few-channel 2-D convolutions as fenced NHWC ones, not im2col / shifted sums
        conv_forms.SHIFTED_SUM_MAX = 0
        conv_forms.im2col_matmul = lambda b, x, w, out, stride, pad, dil: conv_forms.fenced_nhwc(
            b, x, w, out, stride, pad, (1, 1), dil)
    if wgrad:
        conv_forms.weight_grad_form = lambda *a, **k: wgrad


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("case", nargs="?")
    p.add_argument("--list", action="store_true")
    p.add_argument("--wgrad", choices=["direct", "offsets", "depthwise"])
    p.add_argument("--fwd", choices=["direct"])
    p.add_argument("--dwfwd", choices=["nchw_conv", "sum_nchw", "sum_nhwc"])
    p.add_argument("--grpfwd", choices=["nchw_conv", "offsets", "im2col", "im2col_g"])
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--head", choices=["pool", "sum"], default="pool")
    p.add_argument("--ops-only", action="store_true", help="print the training module's op count, compile nothing")
    a = p.parse_args()
    import aotexec as ax
    import aotexec.compiler as compiler
    table = cases(ax.sym)
    if a.case and a.case.startswith("conv:"):     # conv:K,S,P,C,F,G,HW,N (ad hoc)
        k, st, pd, c, f, g, hw, n = map(int, a.case[5:].split(","))
        table[a.case] = (ax.sym.Convolution(ax.sym.Variable("x"), kernel=(k, k), stride=(st, st), pad=(pd, pd),
                                            num_filter=f, num_group=g, no_bias=True, name="c"), (n, c, hw, hw), True)
    if a.list or not a.case:
        print("\n".join(table))
        return 0
    force_forms(a.wgrad, a.fwd, a.dwfwd, a.grpfwd)
    ops = {}
    orig = compiler.compile_mlir

    class Counted(Exception):
        pass

    def counting(text, *args, **kw):
        ops["n"] = len(re.findall(r'= "stablehlo\.', text))
        if a.ops_only:
            raise Counted()
        return orig(text, *args, **kw)
    for mod in list(sys.modules.values()):
        if getattr(mod, "compile_mlir", None) is orig:
            mod.compile_mlir = counting
    s, shape, data_grad = table[a.case]
    # squared and pooled: the layer's head gradient is computed in the graph (channels-last
    # where the layer's output is), as inside a net; --head sum for layers with NCHW outputs
    # on trees whose NCHW global pooling gradient was a window sum (quadratic in the image)
    sq = ax.sym.elemwise_mul(s, s)
    s = ax.sym.sum(sq) if a.head == "sum" else ax.sym.Pooling(sq, global_pool=True, pool_type="avg", kernel=(1, 1))
    req = {n: "write" if (n != "x" or data_grad) else "null" for n in s.list_arguments()}
    ex = s.simple_bind(ax.cpu(), grad_req=req, x=shape)
    rng = np.random.RandomState(0)
    for n, arr in ex.arg_dict.items():
        arr[:] = rng.uniform(-1, 1, arr.shape).astype(np.float32)
    for n, arr in ex.aux_dict.items():
        arr[:] = rng.uniform(0.5, 1.5, arr.shape).astype(np.float32)
    head = [ax.nd.array(rng.uniform(-1, 1, o.shape).astype(np.float32)) for o in ex.outputs]
    t0 = time.perf_counter()
    try:
        ex.forward(is_train=True)
    except Counted:
        print(json.dumps({"case": a.case, "ops": ops["n"]}))
        return 0
    ex.backward(head)
    compile_s = time.perf_counter() - t0
    fwd, bwd = [], []
    for _ in range(a.iters):
        t = time.perf_counter()
        ex.forward(is_train=True)
        t1 = time.perf_counter()
        ex.backward(head)
        bwd.append(time.perf_counter() - t1)
        fwd.append(t1 - t)
    import resource
    print(json.dumps({"case": a.case, "head": a.head, "wgrad": a.wgrad, "fwd": a.fwd, "dwfwd": a.dwfwd, "grpfwd": a.grpfwd, "ops": ops.get("n"),
                      "compile_s": round(compile_s, 1), "fwd_ms": round(statistics.median(fwd) * 1e3, 2),
                      "bwd_ms": round(statistics.median(bwd) * 1e3, 2),
                      "min_ms": [round(min(fwd) * 1e3, 2), round(min(bwd) * 1e3, 2)],
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
