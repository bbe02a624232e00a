"""Pooling (MXNet 1.9.1 src/operator/nn/pooling.cc): parameters, shape rule, lowering and
gradient, and the channels-last form of tiled, overlapping and global 2-D pooling and their
gradients (``passes.layout``)."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from ..emitter import Emitter, Value
from ..kernels import pool as kernel_pool
from .conv_forms import windows
from ..symbolic import any_dynamic
from .nhwc import NHWC_SPATIAL, TO_NCHW, TO_NHWC, ChannelsLast, LayoutQuery, first_nhwc, nchw_to_nhwc_materialized
from .params import Shape
from .registry import define, differentiable, lays_out, lowers
from .rules import prod, same_dtype


# channels-last 2-D max pooling gradients through the kernel where modules use kernels
KERNEL_MAX_POOL_GRAD = True


# --- Pooling (src/operator/nn/pooling.cc, PoolingShape) ---
@dataclass(frozen=True)
class PoolingParam:
    kernel: Shape = ()
    pool_type: Literal["max", "avg", "sum", "lp"] = "max"
    global_pool: bool = False
    cudnn_off: bool = False
    pooling_convention: Literal["valid", "full", "same"] = "valid"
    stride: Shape = ()
    pad: Shape = ()
    p_value: Optional[int] = None
    count_include_pad: Optional[bool] = None
    layout: Optional[str] = None

    def window(self, data_shape: tuple[int, ...]):
        """(kernel, stride, pad) for the spatial dims of ``data_shape``."""
        nd = len(data_shape) - 2
        if self.global_pool:
            return tuple(data_shape[2:]), (1,) * nd, (0,) * nd
        kernel = tuple(self.kernel)
        # MXNet takes pad=(0, 0, 0) for 1-D 'same' pooling; only the leading entries apply
        stride = tuple(self.stride)[:nd] if self.stride else (1,) * nd
        pad = tuple(self.pad)[:nd] if self.pad else (0,) * nd
        return kernel, stride, pad


def _pool_shape(p: PoolingParam, ins, outs):
    """MXNet's PoolingShape (pooling.cc): from the data's (partial) shape; 'same' is 1-D only
    (ceil(x / stride) windows, clipped at the end) and takes no padding."""
    data = ins[0]
    if data is None:
        return ins, outs
    if not 3 <= len(data) <= 5:
        raise ValueError(f"Pooling: Input data should be  3D in (batch, channel, x) Or 4D in (batch, channel, y, x) "
                         f" Or 5D in (batch, channel, d, y, x), got {list(data)}")
    if p.pooling_convention == "same":
        if len(data) != 3:
            raise ValueError("Pooling: Input data should be 3D in (batch, channel, x). Currently 'same' supports "
                             "Max Pooling 1-D")
        if any(p.pad):
            raise ValueError("Same pooling convention disables the use of pad parameter.")
    if p.global_pool:
        return ins, [(data[0], data[1]) + (1,) * (len(data) - 2)]
    if not p.kernel:
        return ins, outs
    if len(p.kernel) != len(data) - 2:
        raise ValueError(f"Pooling: kernel {p.kernel} does not match a {len(data)}-D input")
    kernel, stride, pad = p.window(data)
    return ins, [(data[0], data[1]) + tuple(
        _pool_out(p.pooling_convention, x, k, s, q) for x, k, s, q in zip(data[2:], kernel, stride, pad))]


def _pool_out(convention: str, x: int, k: int, s: int, q: int) -> int:
    if x < 0:
        return -1
    if k > x + 2 * q:
        raise ValueError(f"kernel size ({k}) exceeds input ({x} padded to {x + 2 * q})")
    if convention == "valid":
        return 1 + (x + 2 * q - k) // s
    if convention == "full":
        return 1 + int(math.ceil((x + 2 * q - k) / s))
    return int(math.ceil((x + 2 * q) / s))


def _pool_outputs(p: PoolingParam) -> list[str]:
    # MXNet 1.9.1 builds (oneDNN) give max pooling a hidden workspace output (GetNumOutputs)
    return ["output", "workspace"] if p.pool_type == "max" else ["output"]


def _pool_shape_all(p, ins, outs):
    ins, res = _pool_shape(p, ins, outs[:1])
    return ins, list(res) + [res[0]] * (len(outs) - 1) if res[0] is not None else outs


Pooling = define("Pooling", params=PoolingParam, outputs=_pool_outputs, num_visible=lambda p: 1,
                 infer_shape=_pool_shape_all, infer_type=same_dtype,
                 downsamples=lambda p: p.global_pool or any(s > 1 for s in p.stride))


def _pool_counts(x: int, out: int, k: int, s: int, q: int, include_pad: bool):
    """Divisor of avg pooling per output position along one axis, as MXNet's pool.h: the window
    clipped to [-pad, x+pad) (or to [0, x) without count_include_pad)."""
    counts = []
    for o in range(out):
        start = o * s - q
        end = min(start + k, x + q)
        counts.append(end - start if include_pad else min(end, x) - max(start, 0))
    return counts


def _overlapping(kernel, stride, out_sp) -> bool:
    """Windows that overlap along some axis with more than one window (ResNet's 3x3/2 max pool)."""
    return any(k > s and o > 1 for k, s, o in zip(kernel, stride, out_sp))


def _at(ndim: int, axes, values, fill=0) -> list:
    """A per-axis list: ``values`` on ``axes``, ``fill`` elsewhere."""
    out = [fill] * ndim
    for a, v in zip(axes, values):
        out[a] = v
    return out


# on: one axis at a time (k_h + k_w terms, a pass per axis); off: every offset at once, one pass
# (SqueezeNet b1 / b16 inference 0.90 / 0.98, Inception-v3 b1 0.98, ResNet-18 training 0.99)
SEPARABLE = False


def _window_pool(b: Emitter, x: Value, kind: str, kernel, stride, pads, out_sp, spatial) -> Value:
    """Max (``kind`` "max") or sum ("add") pooling of ``x`` (already cropped to the used extent;
    spatial axes ``spatial``): the kernel offsets' strided slices of the padded input combined
    in one pass (``SEPARABLE``: one axis at a time). Not a reduce_window: ResNet-18's
    recomputed (mirrored) reduce_windows shared their -inf init in one dispatch that IREE 3.13's
    llvm-cpu codegen rejected (stack allocation limit), and Inception-v3's 3x3/1 average pools
    ran NCHW with layout transposes around them."""
    combine = b.max if kind == "max" else b.add
    y = b.pad(x, -math.inf if kind == "max" else 0.0,
              _at(x.ndim, spatial, [lo for lo, _ in pads]), _at(x.ndim, spatial, [hi for _, hi in pads]))
    passes = ([((k,), (st,), (o,), (axis,)) for axis, k, st, o in zip(spatial, kernel, stride, out_sp)]
              if SEPARABLE else [(kernel, stride, out_sp, spatial)])
    for k, st, o, axes in passes:
        wins = windows(b, y, k, st, (1,) * len(k), o, axes)
        y = wins[0]
        for w in wins[1:]:
            y = combine(y, w)
    return y


def _avg_divisor(b: Emitter, y: Value, per_axis, spatial) -> Value:
    """``y`` (window sums) divided by each output position's window count (``_pool_counts`` per
    spatial axis): one scalar where the counts are constant."""
    if all(c == cs[0] for cs in per_axis for c in cs):
        return b.div(y, float(prod(cs[0] for cs in per_axis)))
    div = None
    for axis, cs in zip(spatial, per_axis):
        c = b.broadcast_in_dim(b.constant(np.asarray(cs, dtype=y.dtype), (len(cs),), y.dtype), y.shape, [axis])
        div = c if div is None else b.mul(div, c)
    return b.div(y, div)


@lowers(Pooling)
def _pool_lower(ctx, p: PoolingParam, x):
    b = ctx.b
    if any_dynamic(x.shape) and _tiled_pool(p, x.shape):
        # a shape-generic module (symbolic): IREE 3.13 compiles reduce_window with static shapes only
        y = b.transpose(tiled_pool(b, p, b.transpose(x, TO_NHWC)), TO_NCHW)
        return [y] + [None] * (len(ctx.out_shapes) - 1)
    out, in_sp = ctx.out_shapes[0], x.shape[2:]
    kernel, stride, pad = p.window(x.shape)
    window, strides = (1, 1) + tuple(kernel), (1, 1) + tuple(stride)
    # high padding: `pad`, plus what the full convention's last window overhangs
    pads = [(0, 0), (0, 0)] + [(q, max((o - 1) * s + k - xi - q, 0))
                               for xi, o, k, s, q in zip(in_sp, out[2:], kernel, stride, pad)]
    # crop the tail no window reads: IREE 3.13 miscompiles e.g. a 2x2/2 window over 3x3 -> 1x1
    used = [min(xi, (o - 1) * s + k - q) for xi, o, k, s, q in zip(in_sp, out[2:], kernel, stride, pad)]
    if tuple(used) != in_sp:
        x = b.slice(x, [0] * x.ndim, x.shape[:2] + tuple(used))
    if p.pool_type == "max" and _overlapping(kernel, stride, out[2:]):
        return [_window_pool(b, x, "max", kernel, stride, pads[2:], out[2:], tuple(range(2, x.ndim))), None]
    if p.pool_type == "max":
        return [b.reduce_window(x, "max", window, strides, pads, out), None]
    if p.pool_type == "lp":
        # pool_utils.h: x^p summed, then the p-th root; p = 1, 2, 3 exact (no abs, as MXNet)
        pv = p.p_value
        powers = {1: lambda v: v, 2: lambda v: b.mul(v, v), 3: lambda v: b.mul(b.mul(v, v), v)}
        roots = {1: lambda v: v, 2: b.sqrt, 3: lambda v: b.unary("cbrt", v)}
        y = b.reduce_window(powers.get(pv, lambda v: b.pow(v, float(pv)))(x), "add", window, strides, pads, out)
        return roots.get(pv, lambda v: b.pow(v, 1.0 / pv))(y)
    y = b.reduce_window(x, "add", window, strides, pads, out)
    if p.pool_type == "sum":
        return y
    return _avg_divisor(b, y, _avg_counts(p, in_sp, out[2:]), tuple(range(2, x.ndim)))


def _avg_counts(p: PoolingParam, in_sp, out_sp) -> list[list[int]]:
    """Average pooling's window counts per output position, per spatial axis."""
    kernel, stride, pad = p.window((0, 0) + tuple(in_sp))
    include_pad = p.count_include_pad is None or p.count_include_pad
    return [_pool_counts(xi, o, k, s, q, include_pad) for xi, o, k, s, q in zip(in_sp, out_sp, kernel, stride, pad)]


# --- Pooling gradient ---
def _pool_geometry(p: PoolingParam, xshape, out):
    """Forward's (kernel, stride, pad, used input extent, high pad) per spatial axis."""
    kernel, stride, pad = p.window(xshape)
    in_sp = xshape[2:]
    used = [min(xi, (o - 1) * s + k - q) for xi, o, k, s, q in zip(in_sp, out[2:], kernel, stride, pad)]
    hi = [max((o - 1) * s + k - xi - q, 0) for xi, o, k, s, q in zip(in_sp, out[2:], kernel, stride, pad)]
    return kernel, stride, pad, used, hi


def _tiles_exactly(kernel, stride, out_sp, padded_sp) -> bool:
    """Whether the windows tile the (padded) input: one window per kernel-sized block (global
    pooling: one window)."""
    return all(L == o * k and (o == 1 or k == s) for k, s, o, L in zip(kernel, stride, out_sp, padded_sp))


def _spread_windows(b, t, kernel, stride, padded_sp):
    """sum over the windows covering each (padded) input position of t (shape out):
    t dilated by the stride, then a unit-stride window sum; a broadcast where the windows
    tile the input (the window sum would cost a window's size per position)."""
    nd = len(kernel)
    if _tiles_exactly(kernel, stride, t.shape[2:], padded_sp):
        split = tuple(t.shape[:2]) + tuple(d for o, k in zip(t.shape[2:], kernel) for d in (o, k))
        spread = b.broadcast_in_dim(t, split, [0, 1] + [2 + 2 * i for i in range(nd)])
        return b.reshape(spread, tuple(t.shape[:2]) + tuple(padded_sp))
    dil = [(o - 1) * s + 1 for o, s in zip(t.shape[2:], stride)]
    tp = b.pad(t, 0.0, [0, 0] + [k - 1 for k in kernel], [0, 0] + [L - D for L, D in zip(padded_sp, dil)],
               [0, 0] + [s - 1 for s in stride])
    return b.reduce_window(tp, "add", (1, 1) + tuple(kernel), (1,) * (nd + 2), [(0, 0)] * (nd + 2),
                           tuple(t.shape[:2]) + tuple(padded_sp))


def _max_pool_scatter_tiled(b, xp, g, kernel):
    """Non-overlapping windows tiling xp: split each spatial axis into (out, kernel), mark the
    first maximum of each window (smallest row-major offset), and route g there."""
    nd = len(kernel)
    out = g.shape
    split = tuple(out[:2]) + tuple(d for o, k in zip(out[2:], kernel) for d in (o, k))
    inner = [3 + 2 * i for i in range(nd)]
    outer = [0, 1] + [2 + 2 * i for i in range(nd)]
    xs = b.reshape(xp, split)
    y = b.reduce(xs, inner, "max")
    eq = b.compare(xs, b.broadcast_in_dim(y, split, outer), "EQ")
    pos = None     # row-major offset inside the window
    for i, k in enumerate(kernel):
        term = b.iota(split, inner[i], "int32")
        stride_i = int(np.prod(kernel[i + 1:])) if i + 1 < nd else 1
        term = b.mul(term, stride_i) if stride_i != 1 else term
        pos = term if pos is None else b.add(pos, term)
    big = b.full_like(pos, int(np.prod(kernel)))
    first = b.reduce(b.select(eq, pos, big), inner, "min")
    hit = b.compare(pos, b.broadcast_in_dim(first, split, outer), "EQ")
    gs = b.broadcast_in_dim(g, split, outer)
    return b.reshape(b.select(hit, gs, b.full_like(gs, 0.0)), xp.shape)


def _scatter_axis(b, parts, axis: int, stride: int, length: int):
    """sum over offsets f of ``parts[f]`` (O long on ``axis``) placed at o*stride + f, as a
    tensor ``length`` long on ``axis``: per phase r = y mod stride, a sum of unit shifts of the
    parts with f = r + stride*t (shifted by t), then the phases interleaved."""
    o = parts[0].shape[axis]
    q = -(-length // stride)                    # positions per phase
    zeros, phases = [0] * parts[0].ndim, []
    for r in range(stride):
        acc = None
        for t, f in enumerate(range(r, len(parts), stride)):
            low, high = list(zeros), list(zeros)
            low[axis], high[axis] = t, max(q - o - t, 0)
            v = b.pad(parts[f], 0.0, low, high)
            if v.shape[axis] > q:
                v = b.slice(v, zeros, v.shape[:axis] + (q,) + v.shape[axis + 1:])
            acc = v if acc is None else b.add(acc, v)
        shape = parts[0].shape[:axis] + (q,) + parts[0].shape[axis + 1:]
        phases.append(b.full_like(parts[0], 0.0, shape) if acc is None else acc)
    if stride == 1:
        y = phases[0]
    else:
        y = b.concatenate([b.reshape(v, v.shape[:axis + 1] + (1,) + v.shape[axis + 1:]) for v in phases], axis + 1)
        y = b.reshape(y, y.shape[:axis] + (q * stride,) + y.shape[axis + 2:])
    if y.shape[axis] != length:
        y = b.slice(y, zeros, y.shape[:axis] + (length,) + y.shape[axis + 1:])
    return y


def _max_pool_scatter(b, xp, g, kernel, stride, spatial):
    """Each window's g goes to the first maximum of the (-inf padded) input xp, as MXNet's
    pool.h: per kernel offset, a strided slice compared with the window max picks where g goes,
    and the picks go back to input positions one axis at a time (``_scatter_axis``).
    (IREE 3.13 does not compile select_and_scatter with overlapping windows, nor a sum of
    interior-padded slices; a transposed convolution with a one-hot kernel, the form before,
    took 1.4 s for ResNet-18's 3x3/2 pool at batch 16.)"""
    nd = len(kernel)
    out = g.shape
    out_sp = [out[a] for a in spatial]
    if _tiles_exactly(kernel, stride, out_sp, [xp.shape[a] for a in spatial]):
        assert tuple(spatial) == tuple(range(2, xp.ndim)), "channels-last tiled pools have their own rule"
        return _max_pool_scatter_tiled(b, xp, g, kernel)
    zero = b.full_like(g, 0.0)
    offsets = list(itertools.product(*[range(k) for k in kernel]))
    wins = windows(b, xp, kernel, stride, (1,) * nd, out_sp, spatial)     # row-major, as ``offsets``
    # the window max as the maximum of the offsets' slices (not a reduce_window: _window_pool)
    y = wins[0]
    for w in wins[1:]:
        y = b.max(y, w)
    taken, picks = None, {}
    for off, win in zip(offsets, wins):
        eq = b.compare(win, y, "EQ")
        if taken is None:
            taken = eq
        else:
            eq = b.op("stablehlo.and", [eq, b.op("stablehlo.not", [taken], taken.shape)], eq.shape)
            taken = b.op("stablehlo.or", [taken, eq], eq.shape)
        picks[off] = b.select(eq, g, zero)
    for i in reversed(range(nd)):               # the last axis first: offsets grouped by their prefix
        grouped: dict = {}
        for off, v in picks.items():
            grouped.setdefault(off[:i], []).append(v)
        picks = {pre: _scatter_axis(b, vs, spatial[i], stride[i], xp.shape[spatial[i]])
                 for pre, vs in grouped.items()}
    return picks[()]


def _max_pool_grad(b: Emitter, g: Value, x: Value, kernel, stride, pad, used, hi, spatial) -> Value:
    """d input of max pooling (``_pool_geometry``'s ``used`` / ``hi``), spatial axes ``spatial``."""
    # IREE 3.13 on Vulkan miscompiles this rule fused with a producing convolution (LeNet's conv
    # data gradient arrives shifted by a row): keep g a materialized tensor
    g = b.op("stablehlo.optimization_barrier", [g], g.shape)
    in_sp = [x.shape[a] for a in spatial]
    if list(used) != in_sp:
        x = b.slice(x, [0] * x.ndim, [u if a in spatial else d for a, d, u in
                                      zip(range(x.ndim), x.shape, _at(x.ndim, spatial, used))])
    xp = b.pad(x, -math.inf, _at(x.ndim, spatial, pad), _at(x.ndim, spatial, hi))
    dxp = _max_pool_scatter(b, xp, g, kernel, stride, spatial)
    start = _at(x.ndim, spatial, pad)
    dx = b.slice(dxp, start, [s + d for s, d in zip(start, x.shape)])
    if list(used) != in_sp:
        dx = b.pad(dx, 0.0, [0] * x.ndim, _at(x.ndim, spatial, [i - u for i, u in zip(in_sp, used)]))
    return dx


@differentiable(Pooling, lambda p: ["ograd0", "in0", "out0"] if p.pool_type == "lp"
                else (["ograd0", "in0"] if p.pool_type == "max" else ["ograd0"]))
def _pool_grad(ctx, p: PoolingParam, g, x=None, y=None):
    b = ctx.b
    xshape, out = tuple(ctx.fwd_in_shapes[0]), tuple(ctx.fwd_out_shapes[0])
    if any_dynamic(g.shape) and _tiled_pool(p, xshape):      # as _pool_lower
        xn = b.transpose(x, TO_NHWC) if p.pool_type == "max" else None
        return [b.transpose(tiled_pool_grad(b, p, g, False, xn, xshape), TO_NCHW)]
    kernel, stride, pad, used, hi = _pool_geometry(p, xshape, out)
    nd = len(kernel)
    padded = [q + u + h for q, u, h in zip(pad, used, hi)]
    crop = lambda v: b.slice(v, [0] * v.ndim, tuple(v.shape[:2]) + tuple(used)) \
        if tuple(v.shape[2:]) != tuple(used) else v  # noqa: E731
    if p.pool_type == "max":
        return [_max_pool_grad(b, g, x, kernel, stride, pad, used, hi, tuple(range(2, x.ndim)))]
    elif p.pool_type == "lp":
        pv = p.p_value
        t = g if pv == 1 else b.div(g, y if pv == 2 else b.pow(y, float(pv - 1)))
        dxp = _spread_windows(b, t, kernel, stride, padded)
    else:
        t = g
        if p.pool_type == "avg":
            t = _avg_divisor(b, t, _avg_counts(p, xshape[2:], out[2:]), tuple(range(2, 2 + nd)))
        dxp = _spread_windows(b, t, kernel, stride, padded)
    dx = b.slice(dxp, [0, 0] + list(pad), tuple(out[:2]) + tuple(q + u for q, u in zip(pad, used)))
    if p.pool_type == "lp" and p.p_value != 1:
        xc = crop(x)
        dx = b.mul(dx, xc if p.p_value == 2 else b.pow(xc, float(p.p_value - 1)))
    if tuple(used) != tuple(xshape[2:]):
        dx = b.pad(dx, 0.0, [0] * (nd + 2), [0, 0] + [xi - u for xi, u in zip(xshape[2:], used)])
    return [dx]


# --- Pooling channels-last (passes.layout): tiled, overlapping-max and global 2-D pooling of NHWC values
def _tiled_pool(p, shape) -> bool:
    """2-D max/avg/sum pooling whose windows tile the input (kernel == stride, no padding):
    LeNet's 2x2/2 pools."""
    if p.global_pool or len(p.kernel) != 2 or p.pool_type not in ("max", "avg", "sum") or shape is None \
            or p.layout not in (None, "NCHW"):
        return False
    stride = tuple(p.stride) if p.stride else (1, 1)
    pad = tuple(p.pad) if p.pad else (0, 0)
    fits = p.pooling_convention == "valid" or all(d % k == 0 for d, k in zip(shape[2:], p.kernel))
    return tuple(p.kernel) == stride and pad == (0, 0) and fits and p.pooling_convention != "same"


def _global_pool(p) -> bool:
    return p.global_pool and len(p.kernel or (0, 0)) in (0, 2) and p.pool_type in ("avg", "sum") \
        and p.layout in (None, "NCHW")


def _tiles(b: Emitter, x: Value, kernel) -> tuple[Value, tuple[int, ...]]:
    """NHWC ``x`` cropped to whole windows and split (N, OH, KH, OW, KW, C)."""
    n, h, w, c = x.shape
    oh, ow = h // kernel[0], w // kernel[1]
    if (oh * kernel[0], ow * kernel[1]) != (h, w):
        x = b.slice(x, (0, 0, 0, 0), (n, oh * kernel[0], ow * kernel[1], c))
    split = (n, oh, kernel[0], ow, kernel[1], c)
    return b.reshape(x, split), split


def tiled_pool(b: Emitter, p, x: Value) -> Value:
    xs, _ = _tiles(b, x, p.kernel)
    if p.pool_type == "max":
        return b.reduce(xs, [2, 4], "max")
    y = b.reduce(xs, [2, 4], "add")
    return b.div(y, float(p.kernel[0] * p.kernel[1])) if p.pool_type == "avg" else y


def tiled_pool_grad(b: Emitter, p, g: Value, g_nhwc: bool, x: Value | None, x_logical) -> Value:
    """d input (NHWC): each window's g to its first maximum (MXNet's pool.h), or spread evenly.
    An NCHW ``g`` is materialized before its transpose: IREE 3.13 fuses the transpose into the
    matmul producing g (LeNet's fc1 data gradient through Flatten), a strided form 20x slower."""
    g = g if g_nhwc else nchw_to_nhwc_materialized(b, g)
    n, c, h, w = x_logical
    kh, kw = p.kernel
    oh, ow = h // kh, w // kw
    split = (n, oh, kh, ow, kw, c)
    outer = [0, 1, 3, 5]
    gs = b.broadcast_in_dim(g, split, outer)
    if p.pool_type == "max":
        xs, _ = _tiles(b, x, p.kernel)
        eq = b.compare(xs, b.broadcast_in_dim(b.reduce(xs, [2, 4], "max"), split, outer), "EQ")
        pos = b.add(b.mul(b.iota(split, 2, "int32"), kw), b.iota(split, 4, "int32"))   # row-major in the window
        first = b.reduce(b.select(eq, pos, b.full_like(pos, kh * kw)), [2, 4], "min")
        hit = b.compare(pos, b.broadcast_in_dim(first, split, outer), "EQ")
        dx = b.select(hit, gs, b.full_like(gs, 0.0))
    else:
        dx = b.div(gs, float(kh * kw)) if p.pool_type == "avg" else gs
    dx = b.reshape(dx, (n, oh * kh, ow * kw, c))
    if (oh * kh, ow * kw) != (h, w):
        dx = b.pad(dx, 0.0, (0, 0, 0, 0), (0, h - oh * kh, w - ow * kw, 0))
    return dx


def global_pool(b: Emitter, p, x: Value) -> Value:
    """Global avg/sum pooling of NHWC ``x``: (N, C, 1, 1) is NHWC and NCHW at once."""
    n, h, w, c = x.shape
    y = b.reduce(x, [1, 2], "add")
    if p.pool_type == "avg":
        y = b.div(y, float(h * w))
    return b.reshape(y, (n, c, 1, 1))


def global_pool_grad(b: Emitter, p, g: Value, x_logical) -> Value:
    n, c, h, w = x_logical
    dx = b.broadcast_in_dim(b.reshape(g, (n, c)), (n, h, w, c), [0, 3])
    return b.div(dx, float(h * w)) if p.pool_type == "avg" else dx


def _overlapping_pool(p, shape) -> bool:
    """2-D max, average or sum pooling whose windows overlap (ResNet's, SqueezeNet's,
    Inception's 3x3/2 max pools, Inception's 3x3/1 average pools)."""
    if p.global_pool or len(p.kernel) != 2 or p.pool_type not in ("max", "avg", "sum") or shape is None \
            or len(shape) != 4 \
            or p.layout not in (None, "NCHW") or p.pooling_convention == "same":
        return False
    kernel, stride, pad = p.window(shape)
    return _overlapping(kernel, stride, [_pool_out(p.pooling_convention, x, k, s, q)
                                         for x, k, s, q in zip(shape[2:], kernel, stride, pad)])


@lays_out(Pooling)
def _pool_layout(q: LayoutQuery) -> ChannelsLast | None:
    p = q.params
    if _tiled_pool(p, q.shapes[0]) and q.nhwc[0]:
        return ChannelsLast("tiled_pool", first_nhwc(q.num_outputs), lower=_tiled_pool_lower)
    if _overlapping_pool(p, q.shapes[0]) and q.nhwc[0]:
        return ChannelsLast("overlapping_pool", first_nhwc(q.num_outputs), lower=_overlapping_lower)
    if _global_pool(p) and q.nhwc[0]:
        return ChannelsLast("global_pool", first_nhwc(q.num_outputs, False), lower=_global_pool_lower)
    return None


def _logical(shape) -> tuple:
    return tuple(shape[i] for i in TO_NCHW)


def _overlapping_lower(ctx, p: PoolingParam, x):
    b = ctx.b
    in_sp, out_sp = x.shape[1:3], ctx.out_shapes[0][1:3]
    kernel, stride, pad, used, hi = _pool_geometry(p, _logical(x.shape), _logical(ctx.out_shapes[0]))
    if list(used) != list(in_sp):
        x = b.slice(x, (0, 0, 0, 0), (x.shape[0], used[0], used[1], x.shape[3]))
    kind = "max" if p.pool_type == "max" else "add"
    y = _window_pool(b, x, kind, kernel, stride, list(zip(pad, hi)), out_sp, NHWC_SPATIAL)
    if p.pool_type == "avg":
        y = _avg_divisor(b, y, _avg_counts(p, in_sp, out_sp), NHWC_SPATIAL)
    return [y] + [None] * (len(ctx.out_shapes) - 1)


def _tiled_pool_lower(ctx, p: PoolingParam, x):
    return [tiled_pool(ctx.b, p, x)] + [None] * (len(ctx.out_shapes) - 1)


def _global_pool_lower(ctx, p: PoolingParam, x):
    return [global_pool(ctx.b, p, x)] + [None] * (len(ctx.out_shapes) - 1)


@lays_out(Pooling.backward)
def _pool_grad_layout(q: LayoutQuery) -> ChannelsLast | None:
    """NHWC where forward's input was; the forward input's shape decides tiling."""
    p = q.params
    fwd_shape = q.fwd_in_shapes[0] if q.fwd_in_shapes else None
    if _tiled_pool(p, fwd_shape) and q.fwd_in_nhwc[0] and (p.pool_type != "max" or q.nhwc[1]):
        # an NCHW g is transposed (small, unfenced)
        return ChannelsLast("tiled_pool_grad", first_nhwc(q.num_outputs), lower=_tiled_pool_grad_lower)
    if _global_pool(p) and q.fwd_in_nhwc[0]:
        return ChannelsLast("global_pool_grad", first_nhwc(q.num_outputs), lower=_global_pool_grad_lower)
    if _overlapping_pool(p, fwd_shape) and q.fwd_in_nhwc[0] and (p.pool_type != "max" or q.nhwc[1]):
        return ChannelsLast("overlapping_pool_grad", first_nhwc(q.num_outputs), lower=_overlapping_grad_lower)
    return None


def _tiled_pool_grad_lower(ctx, p: PoolingParam, g, x=None):
    x = x if p.pool_type == "max" else None
    return [tiled_pool_grad(ctx.b, p, g, ctx.in_nhwc[0], x, ctx.fwd_in_shapes[0])]


def _overlapping_grad_lower(ctx, p: PoolingParam, g, x=None):
    b = ctx.b
    g = g if ctx.in_nhwc[0] else nchw_to_nhwc_materialized(b, g)       # see tiled_pool_grad
    xshape, out = tuple(ctx.fwd_in_shapes[0]), tuple(ctx.fwd_out_shapes[0])
    kernel, stride, pad, used, hi = _pool_geometry(p, xshape, out)
    if p.pool_type == "max":
        dx = kernel_pool.max_pool_grad(b, x, g, kernel, stride, pad) if KERNEL_MAX_POOL_GRAD else None
        return [dx if dx is not None else _max_pool_grad(b, g, x, kernel, stride, pad, used, hi, NHWC_SPATIAL)]
    if p.pool_type == "avg":
        g = _avg_divisor(b, g, _avg_counts(p, xshape[2:], out[2:]), NHWC_SPATIAL)
    # every window position gets its window's g: spread one axis at a time (separable)
    for axis, k, s, q, u, h in zip(NHWC_SPATIAL, kernel, stride, pad, used, hi):
        g = _scatter_axis(b, [g] * k, axis, s, q + u + h)
    n, c = xshape[:2]
    dx = b.slice(g, (0, pad[0], pad[1], 0), (n, pad[0] + used[0], pad[1] + used[1], c))
    if list(used) != list(xshape[2:]):
        dx = b.pad(dx, 0.0, (0, 0, 0, 0), (0, xshape[2] - used[0], xshape[3] - used[1], 0))
    return [dx]


def _global_pool_grad_lower(ctx, p: PoolingParam, g):
    return [global_pool_grad(ctx.b, p, g, ctx.fwd_in_shapes[0])]
