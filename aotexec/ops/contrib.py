"""``_contrib_`` ops that common exports need: _contrib_BilinearResize2D and
_contrib_AdaptiveAvgPooling2D (GluonCV segmentation heads: FCN, PSPNet, DeepLab),
_contrib_div_sqrt_dim (GluonNLP's attention; _contrib_arange_like is in ops/init.py) (MXNet 1.9.1 src/operator/contrib/
bilinear_resize.cc, adaptive_avg_pooling.cc, transformer.cc).

Both resamplings are separable linear maps, y = Mh x Mw^T over the spatial axes, with the
(out, in) matrices built from iotas (no constants the size of the image), so each lowers to
two contractions and its gradient to the transposed two.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

from .params import Shape
from .registry import define, differentiable, lowers
from .rules import dtype_of_first, known, same_dtype, same_shape


def _resample(b, x, mh, mw):
    """(N, C, H, W) -> (N, C, Ho, Wo) with mh (Ho, H), mw (Wo, W)."""
    t = b.dot_general(x, mw, contract=([3], [1]))                          # (N, C, H, Wo)
    return b.transpose(b.dot_general(t, mh, contract=([2], [1])), [0, 1, 3, 2])


def _resample_grad(b, g, mh, mw):
    t = b.transpose(b.dot_general(g, mh, contract=([2], [0])), [0, 1, 3, 2])   # (N, C, H, Wo)
    return b.dot_general(t, mw, contract=([3], [0]))


def _grid(b, n_out: int, n_in: int):
    """int32 (n_out, n_in) row and column indices."""
    return b.iota((n_out, n_in), 0, "int32"), b.iota((n_out, n_in), 1, "int32")


def _where(b, pred, v, dtype):
    return b.select(pred, v, b.broadcast_in_dim(b.constant(0.0, (), dtype), pred.shape, []))


# --- _contrib_BilinearResize2D (bilinear_resize-inl.h)
@dataclass(frozen=True)
class BilinearResizeParam:
    height: int = 1
    width: int = 1
    scale_height: Optional[float] = None
    scale_width: Optional[float] = None
    mode: Literal["size", "odd_scale", "like", "to_even_down", "to_even_up", "to_odd_down", "to_odd_up"] = "size"
    align_corners: bool = True


def _resized(p: BilinearResizeParam, d, like) -> tuple[int, int]:
    """BilinearSampleOpInferShape, including that mode 'size' reads scale_width whenever
    scale_height is given."""
    h, w = d[2], d[3]
    if p.mode == "size":
        return (int(p.scale_height * h), int(p.scale_width * w)) if p.scale_height is not None else (p.height, p.width)
    if p.mode == "odd_scale":
        odd = lambda n, s: int(n * s) if n % 2 == 0 else int((n - 1) * s) + 1  # noqa: E731
        return odd(h, p.scale_height), odd(w, p.scale_width)
    if p.mode == "like":
        return like[2], like[3]
    step = {"to_even_down": (0, -1), "to_even_up": (0, 1), "to_odd_down": (1, -1), "to_odd_up": (1, 1)}[p.mode]
    return tuple(n if n % 2 == step[0] else n + step[1] for n in (h, w))


def _resize_shape(p: BilinearResizeParam, ins, outs):
    data, like = ins[0], (ins[1] if len(ins) > 1 else None)
    if not known(data) or (p.mode == "like" and not known(like)):
        return ins, outs
    if len(data) != 4:
        raise ValueError(f"BilinearResize2D needs a 4-D input (batch, channel, height, width), got {data}")
    return ins, [tuple(data[:2]) + _resized(p, data, like)]


# hints as MXNet's mx.sym.contrib functions name nodes (bilinearresize2d0)
BilinearResize2D = define("_contrib_BilinearResize2D", params=BilinearResizeParam, hint="bilinearresize2d",
                          inputs=lambda p: ["data", "like"] if p.mode == "like" else ["data"],
                          shape_only_inputs=(1,), infer_shape=_resize_shape, infer_type=dtype_of_first)


def _bilinear_matrix(b, n_out: int, n_in: int, align: bool, dtype):
    """Row o holds the weights of output o's two source positions (area_pixel_compute_*):
    src = o * (in-1)/(out-1) (align_corners) or max((o + 0.5) in/out - 0.5, 0), as an exact
    fraction of integers (a float32 product fused into the floor's subtraction gave outputs on
    input grid points a weight of ~2e-7 on their neighbour)."""
    itype = "int32" if 2 * n_out * n_in < 2 ** 31 else "int64"
    row, col = b.iota((n_out, n_in), 0, itype), b.iota((n_out, n_in), 1, itype)
    if align:
        num, den = b.mul(row, n_in - 1 if n_out > 1 else 0), max(n_out - 1, 1)
    else:
        num, den = b.max(b.add(b.mul(row, 2 * n_in), n_in - n_out), 0), 2 * n_out
    lo = b.div(num, den)                               # num >= 0: truncation is floor
    lam = b.div(b.convert(b.sub(num, b.mul(lo, den)), dtype), float(den))
    hi = b.min(b.add(lo, 1), n_in - 1)
    return b.add(_where(b, b.compare(col, lo, "EQ"), b.sub(1.0, lam), dtype),
                 _where(b, b.compare(col, hi, "EQ"), lam, dtype))


def _resize_matrices(b, p: BilinearResizeParam, in_shape, out_shape, dtype):
    return (_bilinear_matrix(b, out_shape[2], in_shape[2], p.align_corners, dtype),
            _bilinear_matrix(b, out_shape[3], in_shape[3], p.align_corners, dtype))


@lowers(BilinearResize2D)
def _resize_lower(ctx, p: BilinearResizeParam, x, like=None):
    return _resample(ctx.b, x, *_resize_matrices(ctx.b, p, x.shape, ctx.out_shapes[0], x.dtype))


@differentiable(BilinearResize2D, ("ograd0",))
def _resize_grad(ctx, p: BilinearResizeParam, g):
    """like (mode 'like') gets a zero gradient, as MXNet's."""
    mh, mw = _resize_matrices(ctx.b, p, ctx.fwd_in_shapes[0], g.shape, g.dtype)
    return [_resample_grad(ctx.b, g, mh, mw)] + [None] * (p.mode == "like")


# --- _contrib_AdaptiveAvgPooling2D (adaptive_avg_pooling.cc): bin o averages the inputs from
# floor(o in / out) to ceil((o + 1) in / out)
@dataclass(frozen=True)
class AdaptiveAvgPoolParam:
    output_size: Shape = ()


def _adaptive_shape(p: AdaptiveAvgPoolParam, ins, outs):
    data = ins[0]
    if not known(data):
        return ins, outs
    if len(data) != 4:
        raise ValueError(f"AdaptiveAvgPooling2D needs a 4-D input, got {data}")
    size = {0: (1, 1), 1: tuple(p.output_size) * 2, 2: tuple(p.output_size)}.get(len(p.output_size), (1, 1))
    return ins, [tuple(data[:2]) + size]


AdaptiveAvgPooling2D = define("_contrib_AdaptiveAvgPooling2D", params=AdaptiveAvgPoolParam,
                              hint="adaptiveavgpooling2d", infer_shape=_adaptive_shape, infer_type=same_dtype)


def _pool_matrix(b, n_out: int, n_in: int, dtype):
    row, col = _grid(b, n_out, n_in)
    start = b.div(b.mul(row, n_in), n_out)                                # integer floor
    end = b.div(b.add(b.mul(b.add(row, 1), n_in), n_out - 1), n_out)     # integer ceil
    inside = b.op("stablehlo.and", [b.compare(col, start, "GE"), b.compare(col, end, "LT")], col.shape, "bool")
    return _where(b, inside, b.div(1.0, b.convert(b.sub(end, start), dtype)), dtype)


def _pool_matrices(b, in_shape, out_shape, dtype):
    return _pool_matrix(b, out_shape[2], in_shape[2], dtype), _pool_matrix(b, out_shape[3], in_shape[3], dtype)


@lowers(AdaptiveAvgPooling2D)
def _adaptive_lower(ctx, p, x):
    return _resample(ctx.b, x, *_pool_matrices(ctx.b, x.shape, ctx.out_shapes[0], x.dtype))


@differentiable(AdaptiveAvgPooling2D, ("ograd0",))
def _adaptive_grad(ctx, p, g):
    return [_resample_grad(ctx.b, g, *_pool_matrices(ctx.b, ctx.fwd_in_shapes[0], g.shape, g.dtype))]


# --- _contrib_div_sqrt_dim (transformer.cc): data / sqrt(data.shape[-1])
div_sqrt_dim = define("_contrib_div_sqrt_dim", hint="div_sqrt_dim", infer_shape=same_shape, infer_type=same_dtype,
                      inplace=True)
lowers(div_sqrt_dim)(lambda ctx, p, x: ctx.b.div(x, math.sqrt(x.shape[-1])))
differentiable(div_sqrt_dim, ("ograd0",))(lambda ctx, p, g: [ctx.b.div(g, math.sqrt(g.shape[-1]))])
