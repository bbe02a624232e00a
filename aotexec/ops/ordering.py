"""Sorting: topk, sort, argsort (MXNet 1.9.1 src/operator/tensor/ordering_op-inl.h):
parameters, shape and dtype rules, lowering and gradient per op.

Each is one ``stablehlo.sort`` of the values with their positions (stable: equal values keep
their order, where MXNet's std::sort leaves it unspecified), or, for a topk of fewer than the
whole axis off Vulkan, one ``chlo.top_k`` (``hlo.top_k``: stable the same way for values of up
to 32 bits).  Indices come out as floats by
default (``dtype``), as MXNet's.  The gradient of values flows back to the positions they came
from (a scatter); index and mask outputs have a zero gradient.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from . import hlo
from .registry import define, differentiable, lowers
from .rules import known, merge, norm_axis, prod

IndexDType = Literal["float16", "float32", "float64", "int32", "int64", "uint8"]


@dataclass(frozen=True)
class TopKParam:
    axis: Optional[int] = -1
    k: int = 1
    ret_typ: Literal["both", "indices", "mask", "value"] = "indices"
    is_ascend: bool = False
    dtype: IndexDType = "float32"


@dataclass(frozen=True)
class SortParam:
    axis: Optional[int] = -1
    is_ascend: bool = True


@dataclass(frozen=True)
class ArgSortParam:
    axis: Optional[int] = -1
    is_ascend: bool = True
    dtype: IndexDType = "float32"


def _as_topk(p) -> TopKParam:
    """sort and argsort are topk over the whole axis (MXNet's SortShape / ArgSortShape)."""
    if isinstance(p, TopKParam):
        return p
    return TopKParam(axis=p.axis, k=0, ret_typ="value" if isinstance(p, SortParam) else "indices",
                     is_ascend=p.is_ascend, dtype=getattr(p, "dtype", "float32"))


def _topk_k(p: TopKParam, data) -> int:
    n = prod(data) if p.axis is None else data[norm_axis(p.axis, len(data), "topk")]
    return n if p.k <= 0 else p.k


def _topk_shape(p, ins, outs):
    """ParseTopKParam: k along the axis (a flat (k,) without one); mask is shaped like data."""
    q = _as_topk(p)
    data = ins[0]
    if not known(data):
        return ins, outs
    k = _topk_k(q, data)
    if q.k > 0 and k > (prod(data) if q.axis is None else data[norm_axis(q.axis, len(data))]):
        raise ValueError(f"topk k={q.k} is larger than the {data} input's axis")
    if q.ret_typ == "mask":
        target = tuple(data)
    elif q.axis is None:
        target = (k,)
    else:
        target = tuple(k if i == norm_axis(q.axis, len(data)) else d for i, d in enumerate(data))
    return ins, [merge(o, target) for o in outs]


def _topk_type(p, ins, outs):
    """TopKType: values and masks take the data's dtype, indices ``dtype``; the hidden indices
    of ret_typ 'value' (and sort's) are int32."""
    q = _as_topk(p)
    data = ins[0] if ins[0] is not None else (outs[0] if q.ret_typ in ("value", "both", "mask") else None)
    first = np.dtype(q.dtype) if q.ret_typ == "indices" else data
    types = [first] + ([np.dtype(q.dtype if q.ret_typ == "both" else "int32")] if len(outs) > 1 else [])
    return [data], types


def _topk_outputs(p: TopKParam) -> list[str]:
    return ["output"] if p.ret_typ in ("indices", "mask") else ["output0", "output1"]


topk = define("topk", params=TopKParam, outputs=_topk_outputs, num_visible=lambda p: 2 if p.ret_typ == "both" else 1,
              infer_shape=_topk_shape, infer_type=_topk_type)
sort = define("sort", params=SortParam, outputs=["output0", "output1"], num_visible=lambda p: 1,
              infer_shape=_topk_shape, infer_type=_topk_type)
argsort = define("argsort", params=ArgSortParam, infer_shape=_topk_shape, infer_type=_topk_type, zero_grad=True)


def _sorted(b, q: TopKParam, x):
    """(values, int32 positions) of x sorted along the axis (x flattened when axis is None), the
    axis normalized, and the shape sorted."""
    if q.axis is None:
        x = b.reshape(x, (prod(x.shape),))
    axis = 0 if q.axis is None else norm_axis(q.axis, x.ndim)
    values, pos = hlo.sort(b, [x, b.iota(x.shape, axis, "int32")], axis, descending=not q.is_ascend)
    return values, pos, axis, x.shape


def _first_k(b, v, axis: int, k: int):
    limit = list(v.shape)
    limit[axis] = k
    return b.slice(v, [0] * v.ndim, limit)


@lowers(topk, sort, argsort)
def _topk_lower(ctx, p, x):
    b, q = ctx.b, _as_topk(p)
    k = _topk_k(q, x.shape)
    sorted_shape = (prod(x.shape),) if q.axis is None else x.shape
    axis = 0 if q.axis is None else norm_axis(q.axis, x.ndim)
    if k < sorted_shape[axis] and not b.vulkan:     # a partial sort: O(n k), not IREE's O(n^2) sort
        values, pos = hlo.top_k(b, b.reshape(x, sorted_shape), k, axis, largest=not q.is_ascend)
    else:
        values, pos, axis, sorted_shape = _sorted(b, q, x)
        values, pos = _first_k(b, values, axis, k), _first_k(b, pos, axis, k)
    if q.ret_typ == "mask":     # ones scattered to the top k's positions
        return b.reshape(hlo.scatter_along(b, sorted_shape, axis, pos, b.full_like(values, 1.0)), x.shape)
    if q.ret_typ == "indices":
        return b.convert(pos, ctx.out_dtypes[0])
    return [values, b.convert(pos, ctx.out_dtypes[1])]


def _topk_reads(p) -> list[str]:
    return ["ograd0", "out1"] if _as_topk(p).ret_typ in ("value", "both") else []


@differentiable(topk, _topk_reads)
def _topk_grad(ctx, p, g=None, pos=None):
    """_backward_topk: g added at the positions the values came from; zero for indices / mask."""
    if g is None:
        return [None]
    b, q = ctx.b, _as_topk(p)
    shape = tuple(ctx.fwd_in_shapes[0])
    flat = (prod(shape),) if q.axis is None else shape
    axis = 0 if q.axis is None else norm_axis(q.axis, len(shape))
    return [b.reshape(hlo.scatter_along(b, flat, axis, b.convert(pos, "int32"), g), shape)]


differentiable(sort, _topk_reads)(_topk_grad)
