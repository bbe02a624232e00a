"""ROIPooling (MXNet 1.9.1 src/operator/roi_pooling.cc): the max of each of pooled_size bins
of every region of interest, rois rows ``[batch_index, x1, y1, x2, y2]`` in input pixels times
``spatial_scale`` (rounded half away from zero); the hidden ``maxidx`` output is the flat
``h * W + w`` of each maximum (the first in row-major order), -1 for an empty bin, whose value
is 0. The gradient adds the head gradient at each maximum; rois get none.

The window of a bin depends on the rois' values, so the maximum is taken over masked rows:
first along the width for every (roi, channel, row, bin column), then along the height; the
emitted ops do not grow with the image, the rois or the pooled size."""
from __future__ import annotations

from dataclasses import dataclass

from ..emitter import scatter_add_rows
from .params import Shape
from .registry import define, differentiable, lowers
from .rules import known, same_dtype


@dataclass(frozen=True)
class ROIPoolingParam:
    pooled_size: Shape
    spatial_scale: float


def _roi_shape(p: ROIPoolingParam, ins, outs):
    """MXNet's ROIPoolingProp::InferShape checks."""
    data, rois = ins
    if not known(data) or not known(rois):
        return ins, outs
    if len(data) != 4:
        raise ValueError("data should be a 4D tensor")
    if len(rois) != 2 or rois[1] != 5:
        raise ValueError("bbox should be a 2D tensor of shape [batch, 5]")
    if len(p.pooled_size) != 2:
        raise ValueError(f"pooled_size must be (height, width), got {p.pooled_size}")
    out = (rois[0], data[1]) + tuple(p.pooled_size)
    return ins, [out, out]


ROIPooling = define("ROIPooling", stateful=True, params=ROIPoolingParam, inputs=["data", "rois"], outputs=["output", "maxidx"],
                    num_visible=lambda p: 1, infer_shape=_roi_shape, infer_type=same_dtype)


def _bins(b, start, size, pooled: int, limit: int):
    """[start, end) of each of ``pooled`` bins (R, pooled) over ``size`` pixels from ``start``
    (both (R,) int32), clipped to [0, limit]: floor / ceil of multiples of size / pooled."""
    r = start.shape[0]
    step = b.div(b.convert(size, "float32"), float(pooled))                       # (R,)
    k = b.convert(b.iota((r, pooled), 1, "int32"), "float32")
    at = lambda v: b.broadcast_in_dim(v, (r, pooled), (0,))                      # noqa: E731
    lo = b.convert(b.unary("floor", b.mul(k, at(step))), "int32")
    hi = b.convert(b.unary("ceil", b.mul(b.add(k, 1.0), at(step))), "int32")
    clip = lambda v: b.clamp(0, b.add(v, at(start)), limit)                      # noqa: E731
    return clip(lo), clip(hi)


def _inside(b, lo, hi, n: int):
    """(R, P, n) mask: lo[r, p] <= i < hi[r, p]."""
    shape = lo.shape + (n,)
    i = b.iota(shape, 2, "int32")
    lo, hi = (b.broadcast_in_dim(v, shape, (0, 1)) for v in (lo, hi))
    return b.op("stablehlo.and", [b.compare(i, lo, "GE"), b.compare(i, hi, "LT")], shape, "bool")


def _first_max(b, vals, mask, axis: int):
    """Max of ``vals`` over ``axis`` where ``mask`` holds (-inf elsewhere) and the first index
    reaching it (the axis size when the mask is empty)."""
    n = vals.shape[axis]
    low = b.full_like(vals, float("-inf"))
    vals = b.select(mask, vals, low)
    best = b.reduce(vals, [axis], "max")
    keep = [d for d in range(vals.ndim) if d != axis]
    hit = b.op("stablehlo.and", [mask, b.compare(vals, b.broadcast_in_dim(best, vals.shape, keep), "EQ")],
               vals.shape, "bool")
    idx = b.iota(vals.shape, axis, "int32")
    return best, b.reduce(b.select(hit, idx, b.full_like(idx, n)), [axis], "min")


def roi_max(b, p: ROIPoolingParam, x, rois):
    """[(R, C, PH, PW) maxima (0 in empty bins), their flat h * W + w (-1 when empty),
    int32 batch indices of the rois]."""
    n, c, h, w = x.shape
    r = rois.shape[0]
    ph, pw = p.pooled_size
    col = lambda j: b.reshape(b.slice(rois, (0, j), (r, j + 1)), (r,))           # noqa: E731
    scaled = lambda j: b.convert(b.unary("round_nearest_afz", b.mul(col(j), p.spatial_scale)), "int32")  # noqa: E731
    batch = b.clamp(0, b.convert(col(0), "int32"), n - 1)
    x1, y1, x2, y2 = (scaled(j) for j in (1, 2, 3, 4))
    one = lambda v: b.max(b.add(v, 1), 1)                                        # noqa: E731
    hs, he = _bins(b, y1, one(b.sub(y2, y1)), ph, h)
    ws, we = _bins(b, x1, one(b.sub(x2, x1)), pw, w)
    xr = b.reshape(b.gather_rows(b.reshape(x, (n, c * h * w)), batch, 0), (r, c, h, w))
    # along the width: (R, C, H, PW, W)
    s1 = (r, c, h, pw, w)
    v1 = b.broadcast_in_dim(xr, s1, (0, 1, 2, 4))
    m1 = b.broadcast_in_dim(_inside(b, ws, we, w), s1, (0, 3, 4))
    row_max, row_arg = _first_max(b, v1, m1, 4)                                   # (R, C, H, PW)
    # along the height: (R, C, PH, PW, H)
    s2 = (r, c, ph, pw, h)
    v2 = b.broadcast_in_dim(row_max, s2, (0, 1, 4, 3))
    m2 = b.broadcast_in_dim(_inside(b, hs, he, h), s2, (0, 2, 4))
    best, h_arg = _first_max(b, v2, m2, 4)                                        # (R, C, PH, PW)
    at_h = b.compare(b.iota(s2, 4, "int32"), b.broadcast_in_dim(h_arg, s2, (0, 1, 2, 3)), "EQ")
    rows = b.broadcast_in_dim(row_arg, s2, (0, 1, 4, 3))
    w_arg = b.reduce(b.select(at_h, rows, b.full_like(rows, 0)), [4], "add")
    out4 = (r, c, ph, pw)
    empty = b.op("stablehlo.or", [b.broadcast_in_dim(b.compare(he, hs, "LE"), out4, (0, 2)),
                                  b.broadcast_in_dim(b.compare(we, ws, "LE"), out4, (0, 3))], out4, "bool")
    value = b.select(empty, b.full_like(best, 0.0), best)
    flat = b.select(empty, b.full_like(h_arg, -1), b.add(b.mul(h_arg, w), w_arg))
    return value, flat, batch


@lowers(ROIPooling)
def _roi_lower(ctx, p: ROIPoolingParam, x, rois):
    value, flat, _ = roi_max(ctx.b, p, x, rois)
    return [value, ctx.b.convert(flat, x.dtype)]


@differentiable(ROIPooling, ("ograd0", "in0", "in1"))
def _roi_grad(ctx, p: ROIPoolingParam, g, x, rois):
    """The head gradient added at each bin's maximum (the maxima recomputed); rois: zeros."""
    b = ctx.b
    n, c, h, w = x.shape
    _, flat, batch = roi_max(b, p, x, rois)
    r = rois.shape[0]
    out4 = flat.shape
    chan = b.iota(out4, 1, "int32")
    ids = b.add(b.mul(b.add(b.mul(b.broadcast_in_dim(batch, out4, (0,)), c), chan), h * w), b.max(flat, 0))
    upd = b.select(b.compare(flat, 0, "GE"), g, b.full_like(g, 0.0))
    dx = scatter_add_rows(b, (n * c * h * w,), ids, upd, 0)
    return [b.reshape(dx, x.shape), b.full_like(rois, 0.0, (r, 5))]
