"""The StableHLO forms of a convolution and of its weight gradient, chosen by shape.

Generic helpers (values and shapes in, values out; no graph knowledge) shared by the
convolution-like ops (ops/conv.py, ops/pool.py). IREE 3.13 compiles the forms of one
convolution to code of very different speed (docs/PERFORMANCE.md). Every form emits a
number of ops bounded by the kernel's size: a weight gradient's "kernel" is an output
gradient image, so it never goes through the forms that emit ops per kernel position.
"""
from __future__ import annotations

import itertools
from typing import Sequence

from ..emitter import Emitter, Value
from ..kernels import conv as kernel_conv
from ..kernels import matmul as kernel_matmul
from ..symbolic import any_dynamic


def conv_spec(nd: int) -> str:
    sp = ", ".join(str(i) for i in range(nd))
    return f"[b, f, {sp}]x[o, i, {sp}]->[b, f, {sp}]"


def windows(b: Emitter, xp: Value, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
            out_sp: Sequence[int], spatial: Sequence[int]) -> list[Value]:
    """For each kernel offset, row-major: the strided slice of the padded input ``xp`` (spatial
    axes ``spatial``) that the offset's weights multiply."""
    out = []
    for off in itertools.product(*(range(k) for k in kernel)):
        start, limit, step = [0] * xp.ndim, list(xp.shape), [1] * xp.ndim
        for axis, k, o, s, d in zip(spatial, off, out_sp, stride, dilation):
            start[axis], limit[axis], step[axis] = k * d, k * d + (o - 1) * s + 1, s
        out.append(b.slice(xp, start, limit, step))
    return out


def pad_spatial(b: Emitter, x: Value, pad: Sequence[tuple[int, int]]) -> Value:
    """NC... ``x`` zero-padded by ``pad`` ((low, high) per spatial axis)."""
    return b.pad(x, 0.0, (0, 0) + tuple(lo for lo, _ in pad), (0, 0) + tuple(hi for _, hi in pad))


# --- forward convolutions (and data gradients: transposed convolutions) ---
def convolution(b: Emitter, x: Value, w: Value, out_shape, stride, pad, lhs_dilation, rhs_dilation,
                groups: int = 1) -> Value:
    """An NC... convolution of ``x`` with OI... ``w`` (``conv_spec``), ``groups`` its
    feature_group_count. 2-D ones: one input channel, or one per group (depthwise), a sum of
    shifted windows; else a fenced NHWC convolution (on Vulkan, two to four input channels
    through im2col + matmul, and groups other than depthwise one convolution each)."""
    nd = x.ndim - 2
    cg, og = x.shape[1] // groups, out_shape[1] // groups
    if groups > 1 and (cg > 1 or og > 1) and b.vulkan:
        # IREE 3.13's Vulkan path miscompiles feature_group_count > 1 unless depthwise (wrong
        # values, no error; one input channel and two outputs per group too, in 3-D): one
        # convolution per group instead
        parts = []
        for g in range(groups):
            xg = b.slice(x, [0, g * cg] + [0] * nd, (x.shape[0], (g + 1) * cg) + x.shape[2:])
            wg = b.slice(w, [g * og] + [0] * (w.ndim - 1), ((g + 1) * og,) + w.shape[1:])
            parts.append(convolution(b, xg, wg, (out_shape[0], og) + tuple(out_shape[2:]), stride, pad,
                                     lhs_dilation, rhs_dilation))
        return b.concatenate(parts, 1)
    if nd != 2:
        return b.convolution(x, w, out_shape, conv_spec(nd), stride, pad, lhs_dilation, rhs_dilation, groups)
    small = w.shape[2] * w.shape[3] <= SHIFTED_SUM_MAX
    unit = all(d == 1 for d in lhs_dilation)
    if groups > 1 and cg == 1 and og == 1 and small and unit and not b.vulkan:
        # depthwise (MobileNet's 3x3 at 112x112x32, batch 16): 57 -> 17 ms forward against
        # the fenced NHWC convolution (38 ms as an NCHW one). Not for a strided data gradient
        # (lhs dilation): IREE 3.13 miscompiled the interior-padded input's windows at batch 2
        return shifted_sum(b, x, w, out_shape, stride, pad, rhs_dilation, depthwise=True)
    if groups == 1 and unit:
        if x.shape[1] == 1 and small:
            return shifted_sum(b, x, w, out_shape, stride, pad, rhs_dilation)
        if x.shape[1] <= 4 and b.vulkan:
            # on llvm-cpu the fenced NHWC convolution measured 2-4x faster (ResNet-18's
            # 7x7/2 3->64 stem at 224x224: 270 -> 74 ms at batch 16; 3->16 3x3 at 32x32
            # batch 16: 0.7 -> 0.35 ms); on Vulkan im2col is what was tested
            return im2col_matmul(b, x, w, out_shape, stride, pad, rhs_dilation)
    return fenced_nhwc(b, x, w, out_shape, stride, pad, lhs_dilation, rhs_dilation, groups)


def fenced_nhwc(b: Emitter, x: Value, w: Value, out_shape, stride, pad, lhs_dilation, rhs_dilation,
                groups: int = 1, batch_groups: int = 1) -> Value:
    """A 2-D NCHW convolution computed channels-last (NHWC x HWIO).

    IREE 3.13's CPU codegen ran NCHW convolutions at 2-4 GFLOP/s and the same ones
    channels-last 13-70x faster (benchmarks/conv_layout.py), but only when the layout
    transposes are fenced with optimization barriers; unfenced, IREE folds them back."""
    xt = b.fenced_transpose(x, (0, 2, 3, 1))
    wt = b.fenced_transpose(w, (2, 3, 1, 0))
    n, c, h, wd = out_shape
    if (one_axis(wt.shape[:2]) and groups == batch_groups == 1 and all(d == 1 for d in lhs_dilation)
            and not b.vulkan and not any_dynamic(x.shape)):
        y = im2col_nhwc(b, xt, wt, (n, h, wd, c), stride, pad, rhs_dilation)
    elif batch_groups == 1:
        y = conv_nhwc_wide(b, xt, wt, (n, h, wd, c), stride, pad, lhs_dilation, rhs_dilation, groups)
    else:
        y = b.conv_nhwc(xt, wt, (n, h, wd, c), stride, pad, lhs_dilation, rhs_dilation, groups, batch_groups)
    return b.transpose(b.barrier(y), (0, 3, 1, 2))


# IREE 3.13's llvm-cpu convolutions run at very different speeds by output width: widths whose
# prime factors are all <= 7 ran fast (3x3 layers at batch 1: 64, 70, 72, 75, 80, 84, 147, 150,
# 160, 168 at 160-240 GFLOP/s), widths with a large prime factor slowly (13, 17, 65, 71, 73, 74,
# 77, 148, 149: 25-65; 152 = 8 x 19, 154, 156: ~100-160). docs/PERFORMANCE.md, "Output widths".
SMOOTH_PRIMES = (2, 3, 5, 7)
MAX_WIDTH_GROWTH = 0.10
# odd smooth widths from this one up go one wider when that is smooth too (at most 5% more
# work): SqueezeNet's 27-wide 3x3 expands ran 1.3-2x slower per FLOP than at 28 (b16 inference
# 83 -> 78 ms, training 3-6% faster; Inception-v3's 35 -> 36 neutral)
EVEN_FROM = 20


def _smooth(w: int) -> bool:
    for p in SMOOTH_PRIMES:
        while w % p == 0:
            w //= p
    return w == 1


def good_width(w: int) -> int:
    """The output width to compute a convolution of output width ``w`` at: ``w`` when its prime
    factors are all in ``SMOOTH_PRIMES``, else the next such width when that adds at most
    ``MAX_WIDTH_GROWTH`` of the work (Inception-v3's 149 -> 150, 73 -> 75, 71 -> 72, 17 -> 18;
    SqueezeNet's 13 -> 14, 111 -> 112), and an odd smooth width from ``EVEN_FROM`` up one
    wider when that is smooth (SqueezeNet's 27 -> 28)."""
    if _smooth(w):
        return w + 1 if w % 2 and w >= EVEN_FROM and _smooth(w + 1) else w
    wide = next(v for v in itertools.count(w) if _smooth(v))
    return wide if wide - w <= MAX_WIDTH_GROWTH * w else w


def conv_nhwc_wide(b: Emitter, x: Value, wt: Value, out_shape, stride, pads, lhs_dilation=(1, 1),
                   rhs_dilation=(1, 1), groups: int = 1) -> Value:
    """``b.conv_nhwc`` computed at ``good_width`` of its output width (the input zero-padded
    on the right by the extra columns' windows), the extra columns sliced off."""
    n, oh, ow, f = out_shape
    # a 1x1 kernel is a matmul to IREE, whatever the width
    wide = ow if any_dynamic(out_shape) or groups > 1 or tuple(wt.shape[:2]) == (1, 1) or kernel_conv.takes(
        b, x, wt.shape, out_shape, stride, lhs_dilation, rhs_dilation, groups) else good_width(ow)
    if wide == ow:
        return b.conv_nhwc(x, wt, tuple(out_shape), stride, pads, lhs_dilation, rhs_dilation, groups)
    y = kernel_conv.call(b, x, wt, tuple(out_shape), stride, pads, lhs_dilation, rhs_dilation, groups, 1, sliced=True)
    if y is not None:       # a shallow layer the kernel takes where IREE's form would slice
        return y
    pads = [tuple(pads[0]), (pads[1][0], pads[1][1] + (wide - ow) * stride[1])]
    y = b.conv_nhwc(x, wt, (n, oh, wide, f), stride, pads, lhs_dilation, rhs_dilation, groups)
    return b.slice(y, (0, 0, 0, 0), (n, oh, ow, f))


def im2col(b: Emitter, x: Value, kernel: Sequence[int], stride: Sequence[int], pad: Sequence[tuple[int, int]],
           dilation: Sequence[int], out_hw: Sequence[int]) -> Value:
    """Patches of a 2-D NCHW input as a (N*OH*OW, C*KH*KW) matrix, columns c-major
    (so ``w.reshape(O, C*KH*KW)`` lines up)."""
    n, c = x.shape[:2]
    oh, ow = out_hw
    wins = windows(b, pad_spatial(b, x, pad), kernel, stride, dilation, out_hw, (2, 3))
    cols = [b.reshape(sl, (n, c, 1, oh, ow)) for sl in wins]
    patches = b.concatenate(cols, 2)                                    # (N, C, K, OH, OW)
    return b.reshape(b.transpose(patches, (0, 3, 4, 1, 2)), (n * oh * ow, c * kernel[0] * kernel[1]))


# terms per fused partial sum (two operands each, input window and weight column; IREE
# fuses at most 32 operands into one elementwise op)
SHIFTED_SUM_GROUP = 9
SHIFTED_SUM_MAX = 49        # 7x7 kernels


def shifted_sum(b: Emitter, x: Value, w: Value, out_shape, stride, pad, dilation, depthwise: bool = False) -> Value:
    """A one-input-channel convolution (LeNet's conv1), or a depthwise one (``depthwise``: one
    input and output channel per group), as a sum of shifted windows of the input, each
    scaled by one weight per output channel: elementwise work that IREE fuses, with no patch
    matrix.

    LeNet's conv1 (5x5, 1->20, batch 64) on IREE 3.13: im2col + matmul 4.0 ms with a
    3.7 MB patch matrix and its copy in the transient arena; a convolution op 7.2 ms;
    this sum 1.7-2.4 ms.  Left alone, IREE splits a 25-term sum into independent partial
    sums, all alive at once (4 x 2.95 MB); a barrier after every ``SHIFTED_SUM_GROUP``
    terms makes each partial sum the next one's input instead (groups of 13: one 2.95 MB
    partial in the arena; groups of 9: IREE updates the partial sums in place, and
    LeNet's forward_train arena fell from 9.5 to 2.5 MB at the same speed)."""
    o, _, kh, kw = w.shape
    n, _, oh, ow = out_shape
    wc = b.reshape(w, (o, kh * kw))
    groups = -(-kh * kw // SHIFTED_SUM_GROUP)
    size = -(-kh * kw // groups)            # balanced: 25 terms -> 9 + 9 + 7
    acc = None
    for k, win in enumerate(windows(b, pad_spatial(b, x, pad), (kh, kw), stride, dilation, (oh, ow), (2, 3))):
        if not depthwise:
            win = b.broadcast_in_dim(b.reshape(win, (n, oh, ow)), out_shape, (0, 2, 3))
        col = b.broadcast_in_dim(b.reshape(b.slice(wc, (0, k), (o, k + 1)), (o,)), out_shape, (1,))
        term = b.mul(win, col)
        if acc is not None and k % size == 0:
            acc = b.barrier(acc)
        acc = term if acc is None else b.add(acc, term)
    return acc


def im2col_matmul(b: Emitter, x: Value, w: Value, out_shape, stride, pad, dilation) -> Value:
    """Two to four input channels: patches as one matmul (im2col).

    Few-channel convolutions ran at ~5 GFLOP/s as convolutions in IREE 3.13;
    as (N*OH*OW, C*K) x (C*K, O) it is a well-tiled matmul."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    _, _, oh, ow = out_shape
    patches = im2col(b, x, (kh, kw), stride, pad, dilation, (oh, ow))
    y = b.dot_general(patches, b.reshape(w, (o, c * kh * kw)), contract=([1], [1]))
    return b.transpose(b.reshape(y, (n, oh, ow, o)), (0, 3, 1, 2))


# --- weight gradients ---
# kernels up to this many offsets: weight gradients by one contraction per offset on
# llvm-cpu (channels-last, and in the fenced form); larger ones by the direct convolution
MAX_OFFSETS = 9


def weight_grad_form(c: int, f: int, kernel: Sequence[int], groups: int, vulkan: bool) -> str:
    """How ``weight_grad`` computes d weight, by shape (never the batch or the image size;
    llvm-cpu, one thread, layer forward + backward, docs/PERFORMANCE.md):

    - "depthwise" (one input and output channel per group): per kernel offset, the input
      window times g summed over space, then batch (MobileNet's 3x3 at 112x112x32, batch 16:
      the layer's backward 146 -> 40 ms with the data gradient's shifted sum, against one
      convolution per group; the channels-last contraction 147 ms, batch_group_count 272);
    - "offsets": per kernel offset, a contraction over (batch, output pixels) of the window
      with g, channels-last, groups a batch dimension: 2-D kernels up to ``MAX_OFFSETS`` on
      llvm-cpu (ResNet's 3x3 64->64 at 56x56, batch 16: 102 against 192 ms direct), grouped
      ones on Vulkan (no grouped convolution there);
    - "direct": one convolution of the input with g as its kernel, the batch as its input
      channels (``batch_group_count`` for groups): larger kernels (ResNet-18's 7x7/2 stem at
      224x224: batch 2 5.8 against 10.4 ms, batch 16 116 against 250; LeNet's 5x5 conv2 at
      batch 64: 10.6 against 14.9), every ungrouped one on Vulkan, grouped ones on llvm-cpu
      (ResNeXt-like 3x3 128->128 in 32 groups at 28x28, batch 16: 108 ms; one convolution per
      group ran 23 ms but took 2,259 ops and 12 s to compile, 52k ops at batch 2; the
      per-offset batched contraction 198 ms)."""
    cg, og = c // groups, f // groups
    if groups > 1 and cg == 1 and og == 1:
        return "depthwise"
    if groups > 1:
        return "offsets" if vulkan else "direct"
    if len(kernel) == 2 and not vulkan and kernel[0] * kernel[1] <= MAX_OFFSETS:
        return "offsets"
    return "direct"


def weight_grad(b: Emitter, x: Value, g: Value, kernel, stride, dilate, pad, groups: int) -> Value:
    """d weight (F, C/groups, k...) of a convolution of data x (N, C, ...) giving g (N, F, o...):
    dw[f, c, j] = sum_{n, o} g[n, f, o] * xpad[n, c, o*s + j*d], in the form
    ``weight_grad_form`` picks."""
    nd = len(kernel)
    sp = tuple(range(2, 2 + nd))
    need = [(k - 1) * d + (o - 1) * s + 1 for k, d, s, o in zip(kernel, dilate, stride, g.shape[2:])]
    high = [max(n - q - xi, 0) for n, q, xi in zip(need, pad, x.shape[2:])]
    n, c, f = x.shape[0], x.shape[1], g.shape[1]
    form = weight_grad_form(c, f, kernel, groups, b.vulkan)
    if form == "offsets":
        # padded channels-last, behind the layout fence as in ops.conv.conv_grad_nhwc (a pad
        # fused into x's producer failed IREE 3.13's codegen: a recomputed max pool of ResNet-18)
        cl = (0,) + sp + (1,)
        xl = b.pad(b.fence(b.transpose(x, cl)), 0.0, [0] + list(pad) + [0], [0] + high + [0])
        return weight_grad_offsets(b, xl, b.fenced_transpose(g, cl), kernel, stride, dilate, groups)
    xp = b.pad(x, 0.0, [0, 0] + list(pad), [0, 0] + high)
    if tuple(xp.shape[2:]) != tuple(need):
        xp = b.slice(xp, [0] * x.ndim, tuple(xp.shape[:2]) + tuple(need))
    if form == "depthwise":
        # space first (contiguous rows), then the batch
        parts = [b.reshape(b.reduce(b.reduce(b.mul(s, g), list(sp), "add"), [0], "add"), (c, 1))
                 for s in windows(b, xp, kernel, stride, dilate, g.shape[2:], sp)]
        return b.reshape(b.concatenate(parts, 1), (c, 1) + tuple(kernel))
    if n == 1 and nd == 2:
        # the batch is the convolution's input channels: a zero second one (IREE 3.13's
        # one-channel NHWC convolution is slow, see ops.conv.conv_nhwc): the stem at batch 1
        # 51 -> 7.0 ms
        xp = b.pad(xp, 0.0, [0] * xp.ndim, [1] + [0] * (xp.ndim - 1))
        g = b.pad(g, 0.0, [0] * g.ndim, [1] + [0] * (g.ndim - 1))
    # a convolution of x (batch and feature swapped) with g as kernel: window stride =
    # dilation, kernel dilation = stride; groups split the batch (batch_group_count)
    xt, gt = b.transpose(xp, (1, 0) + sp), b.transpose(g, (1, 0) + sp)
    out = (c // groups, f) + tuple(kernel)
    zero = [(0, 0)] * nd
    if nd == 2:
        y = fenced_nhwc(b, xt, gt, out, tuple(dilate), zero, (1,) * nd, tuple(stride), batch_groups=groups)
    else:
        y = b.convolution(xt, gt, out, conv_spec(nd), tuple(dilate), zero, (1,) * nd, tuple(stride),
                          batch_groups=groups)
    return b.transpose(y, (1, 0) + sp)


def weight_grad_offsets(b: Emitter, xl: Value, gl: Value, kernel, stride, dilate, groups: int = 1) -> Value:
    """d weight (F, C/groups, k...) from the channels-last padded input ``xl`` (N, sp..., C) and
    output gradient ``gl`` (N, o..., F): one (N*o...)-contraction per kernel offset, of ``gl``
    with the offset's input slice (groups as a batch dimension).

    Each offset's slice goes through ``Emitter.after`` (on g, which the contraction reads
    anyway): a bare slice became a copy that IREE copied again into the matmul's data-tiled
    layout, all offsets alive at once; an elementwise op on the slice fuses with that
    packing (ResNet-8 b16's backward arena 15.4 -> 7.9 MB, same speed). The input slice is
    the contraction's lhs and g its rhs ([N*OH*OW, O], already the matmul's K x N layout),
    giving dW^T per offset; with g as lhs IREE stored a transposed copy of it next to the
    NHWC one for every layer (ResNet-8 b16 training 37 -> 30.5 ms)."""
    nd = len(kernel)
    c, f = xl.shape[-1], gl.shape[-1]
    cg, og = c // groups, f // groups
    sp = list(range(1, 1 + nd))
    red = [0] + sp
    wins = windows(b, xl, kernel, stride, dilate, gl.shape[1:-1], sp)
    if groups == 1:
        parts = [b.reshape(b.dot_general(b.after(s, gl), gl, contract=(red, red)), (c, f, 1)) for s in wins]
        dw = b.reshape(b.concatenate(parts, 2), (c, f) + tuple(kernel))
        return b.transpose(dw, (1, 0) + tuple(range(2, 2 + nd)))
    split = lambda v, k: b.reshape(v, v.shape[:-1] + (groups, k))  # noqa: E731
    gs = split(gl, og)
    parts = [b.reshape(b.dot_general(split(b.after(s, gl), cg), gs, contract=(red, red), batch=([nd + 1], [nd + 1])),
                       (groups, cg, og, 1)) for s in wins]
    dw = b.reshape(b.concatenate(parts, 3), (groups, cg, og) + tuple(kernel))     # (G, C/G, F/G, k...)
    dw = b.transpose(dw, (0, 2, 1) + tuple(range(3, 3 + nd)))
    return b.reshape(dw, (f, cg) + tuple(kernel))


# --- one-axis kernels (1xk, kx1), channels-last ---
def one_axis(kernel: Sequence[int]) -> bool:
    """A 2-D kernel that spans one axis only (Inception's factorized 1x7 / 7x1, 1x3 / 3x1)."""
    return len(kernel) == 2 and min(kernel) == 1 and max(kernel) > 1


# stride-1 data gradients on maps up to this many pixels with at least this many channels
# (in and out) run as im2col + one matmul: with the weight a runtime value (training) IREE
# 3.13's direct convolution reached ~130 GFLOP/s at 14x14x256 and ~95 at 7x7x512 (batch 16),
# the joined windows and one matmul ~190-210; at 28x28x128 and 56x56x64 the direct form
# was 1.5-8x faster (docs/PERFORMANCE.md)
IM2COL_MAX_PIXELS = 196
IM2COL_MIN_CHANNELS = 256


def small_map_im2col(kernel: Sequence[int], g_shape, c: int) -> bool:
    """Whether a stride-1 NHWC data gradient of ``kernel`` from head gradient ``g_shape``
    (N, OH, OW, F) into ``c`` channels runs as im2col + one matmul (``im2col_nhwc``)."""
    return (len(kernel) == 2 and not any_dynamic(g_shape) and g_shape[1] * g_shape[2] <= IM2COL_MAX_PIXELS
            and min(c, g_shape[3]) >= IM2COL_MIN_CHANNELS)


def im2col_nhwc(b: Emitter, x: Value, wt: Value, out_shape, stride, pads, dilation) -> Value:
    """A convolution of NHWC ``x`` with an HWIO ``wt`` (KH, KW, C, F): the k windows of the
    padded input joined on the channel axis, then one matmul with the weight as a (k*C, F)
    matrix (k copies of the input: for one-axis kernels, small maps, strided small maps).

    IREE 3.13 compiled these kernels as convolutions to scalar code (Inception-v3's
    17x17x192 1x7 layers at ~2.4 GFLOP/s: 75% of its inference time); ``pads`` are
    (low, high) per spatial axis and may be negative (a data gradient's crop)."""
    kh, kw, c, f = wt.shape
    n, oh, ow, _ = out_shape
    low, high = [max(lo, 0) for lo, _ in pads], [max(hi, 0) for _, hi in pads]
    xp = b.pad(x, 0.0, (0, low[0], low[1], 0), (0, high[0], high[1], 0))
    crop = [max(-lo, 0) for lo, _ in pads]
    end = [d - max(-hi, 0) for d, (_, hi) in zip(xp.shape[1:3], pads)]
    if any(crop) or end != list(xp.shape[1:3]):
        xp = b.slice(xp, (0, crop[0], crop[1], 0), (n, end[0], end[1], c))
    cols = windows(b, xp, (kh, kw), stride, dilation, (oh, ow), (1, 2))
    patches = b.concatenate(cols, 3)                                          # (N, OH, OW, k*C)
    wmat = b.reshape(wt, (kh * kw * c, f))
    if b.kernels is not None and not any_dynamic(patches.shape):
        flat = kernel_matmul.call(b, b.reshape(patches, (n * oh * ow, kh * kw * c)), wmat, [1], [0], [], [])
        if flat is not None:
            return b.reshape(flat, (n, oh, ow, f))
    return b.dot_general(patches, wmat, contract=([3], [0]))


# --- data gradients onto few channels, through one product per tap ---
# strided layers' data gradients onto fewer channels than this (ResNet v2's 7x7/2 stem, behind
# the BatchNorm on its data): IREE 3.13 vectorizes its convolutions over the output channels,
# 3 here (the stem's four phase convolutions: 13% of ResNet-18 v2's b16 training step)
TAP_PRODUCTS_MAX_CHANNELS = 8


def tap_products(b: Emitter, g: Value, w: Value, lo: Sequence[int], hi: Sequence[int]) -> Value | None:
    """The NHWC head gradient ``g`` (N, OH, OW, F), zero-padded by ``lo`` / ``hi`` pixels, times
    every tap of the OIHW weight ``w`` (F, C, KH, KW): (N, OH + lo + hi, OW + lo + hi, KH KW C),
    tap (ky, kx)'s C channels from (ky KW + kx) C on. One product through the matmul kernel;
    None where the kernel does not take it (``tap_sum`` reads it)."""
    n, oh, ow, f = g.shape
    _, c, kh, kw = w.shape
    ph, pw = oh + lo[0] + hi[0], ow + lo[1] + hi[1]
    if any_dynamic(g.shape) or not kernel_matmul.takes(b, 1, n * ph * pw, kh * kw * c, f, alone=True):
        return None
    gp = b.pad(g, 0.0, (0, lo[0], lo[1], 0), (0, hi[0], hi[1], 0))
    wm = b.reshape(b.transpose(w, (0, 2, 3, 1)), (f, kh * kw * c))
    y = b.dot_general(b.reshape(gp, (n * ph * pw, f)), wm, contract=([1], [0]), alone=True)
    return b.reshape(y, (n, ph, pw, kh * kw * c))


def tap_sum(b: Emitter, y: Value, taps: Sequence[tuple[int, int, int]], out_hw: Sequence[int], c: int) -> Value:
    """The sum over ``taps`` (row shift, column shift, ky KW + kx) of windows of ``y``
    (``tap_products``): out[n, i, j] = sum y[n, i + row shift, j + column shift, the tap's C channels]."""
    n = y.shape[0]
    acc = None
    for dy, dx, tap in taps:
        t = b.slice(y, (0, dy, dx, tap * c), (n, dy + out_hw[0], dx + out_hw[1], tap * c + c))
        acc = t if acc is None else b.add(acc, t)
    return acc
