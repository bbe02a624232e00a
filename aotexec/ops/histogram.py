"""_histogram (MXNet 1.9.1 src/operator/tensor/histogram.cc; ``ax.sym.histogram`` is MXNet's
Python wrapper): counts (int64) of the flattened data per bin, and the bin edges in the data's
dtype. ``bin_cnt`` equal bins over ``range`` (edges ``min + i (max - min) / bin_cnt`` in float64),
or the edges given as a second input. A value belongs to the last edge at or below it, the top
edge to the last bin; values outside the edges are not counted.

The counts compare every value with every edge (N x bins, one fused dispatch): the emitted ops
do not grow with either; no gradient."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .registry import define, differentiable, lowers
from .rules import known


@dataclass(frozen=True)
class HistogramParam:
    bin_cnt: int | None = None
    range: tuple[float, float] | None = None


def _inputs(p: HistogramParam) -> list[str]:
    return ["data"] if p.bin_cnt is not None else ["data", "bins"]


def _histogram_shape(p: HistogramParam, ins, outs):
    """MXNet's HistogramOpShape."""
    if (p.bin_cnt is None) != (p.range is None):
        raise ValueError("cnt and range should both or neither specified")
    if p.bin_cnt is not None:
        return ins, [(p.bin_cnt,), (p.bin_cnt + 1,)]
    bins = ins[1]
    if not known(bins):
        return ins, outs
    if len(bins) != 1:
        raise ValueError("bins argument should be an 1D vector")
    if bins[0] < 2:
        raise ValueError("number of bounds should be >= 2")
    return ins, [(bins[0] - 1,), tuple(bins)]


def _histogram_type(p: HistogramParam, ins, outs):
    t = ins[0] if ins[0] is not None else outs[1]
    return ([t] * len(ins), [np.dtype("int64"), t]) if t is not None else (ins, outs)


histogram = define("_histogram", params=HistogramParam, inputs=_inputs, outputs=["output0", "output1"],
                   infer_shape=_histogram_shape, infer_type=_histogram_type, zero_grad=True)


def _both(b, p, q):
    return b.op("stablehlo.and", [p, q], p.shape, "bool")


@lowers(histogram)
def _histogram_lower(ctx, p: HistogramParam, data, bins=None):
    b = ctx.b
    x = b.reshape(data, (int(np.prod(data.shape)),))
    if bins is None:
        lo, hi = p.range
        edges = b.constant(np.array([lo + i * (hi - lo) / p.bin_cnt for i in range(p.bin_cnt + 1)]),
                           (p.bin_cnt + 1,), data.dtype)
        inside = _both(b, b.compare(x, lo, "GE"), b.compare(x, hi, "LE"))
    else:
        edges = bins
        last = edges.shape[0] - 1
        first_edge = b.reshape(b.slice(edges, (0,), (1,)), ())
        last_edge = b.reshape(b.slice(edges, (last,), (last + 1,)), ())
        inside = _both(b, b.compare(x, b.broadcast_in_dim(first_edge, x.shape, ()), "GE"),
                       b.compare(x, b.broadcast_in_dim(last_edge, x.shape, ()), "LE"))
    n, k = x.shape[0], edges.shape[0] - 1
    grid = (n, k + 1)
    at_or_below = b.compare(b.broadcast_in_dim(x, grid, (0,)), b.broadcast_in_dim(edges, grid, (1,)), "GE")
    below = b.reduce(b.convert(at_or_below, "int32"), [1], "add")                     # edges <= x
    target = b.min(b.sub(below, 1), k - 1)
    target = b.select(inside, target, b.full_like(target, -1))
    cell = (n, k)
    hit = b.compare(b.broadcast_in_dim(target, cell, (0,)), b.iota(cell, 1, "int32"), "EQ")
    counts = b.reduce(b.convert(hit, "int64"), [0], "add")
    return [counts, edges]


differentiable(histogram, ())(lambda ctx, p: [None, None])
