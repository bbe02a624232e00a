"""Arrays made from parameters or from another array's shape: _full, _arange,
_contrib_arange_like, shape_array, size_array (MXNet 1.9.1 src/operator/tensor/init_op.cc,
elemwise_unary_op_basic.cc).  None has a gradient; the ``*_like`` and ``*_array`` ops read
their input's shape only, so its value is never computed for them."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .params import Shape
from .registry import define, lowers
from .rules import fixed_dtype, known, norm_axis, same_dtype


@dataclass(frozen=True)
class FullParam:
    value: float
    shape: Shape = ()
    ctx: str = ""
    dtype: str = "float32"


full = define("_full", params=FullParam, inputs=[], infer_shape=lambda p, ins, outs: (ins, [tuple(p.shape)]),
              infer_type=fixed_dtype(lambda p: p.dtype), zero_grad=True)


@lowers(full)
def _full_lower(ctx, p: FullParam, *_):
    b, shape, dtype = ctx.b, ctx.out_shapes[0], ctx.out_dtypes[0]
    c = b.constant(p.value, (), dtype)
    return b.broadcast_in_dim(c, shape, ()) if shape else c


@dataclass(frozen=True)
class ArangeParam:
    start: float
    stop: Optional[float] = None
    step: float = 1.0
    repeat: int = 1
    infer_range: bool = False
    ctx: str = ""
    dtype: str = "float32"

    def bounds(self) -> tuple[float, float | None]:
        """(start, stop): one bound given is the stop, from 0 (RangeParamParser)."""
        if self.stop is None and not self.infer_range:
            return 0.0, self.start
        return self.start, self.stop

    def check(self) -> None:
        if self.step == 0:
            raise ValueError(f"Range does not support step=0, received {self.step}")
        if self.repeat <= 0:
            raise ValueError(f"Range only supports repeat > 0, received {self.repeat}")


def _arange_shape(p: ArangeParam, ins, outs):
    """ceil((stop - start) / step) * repeat values; with infer_range and no stop, the size comes
    from the output's consumers (as MXNet: unknown here)."""
    start, stop = p.bounds()
    if stop is None:
        return ins, outs
    if (p.step > 0 and not start < stop) or (p.step < 0 and not start > stop):
        raise ValueError(f"Invalid range (start, stop, step) = ({start},{stop},{p.step})")
    return ins, [(int(math.ceil((stop - start) / p.step)) * p.repeat,)]


arange = define("_arange", params=ArangeParam, inputs=[], infer_shape=_arange_shape,
                infer_type=fixed_dtype(lambda p: p.dtype), zero_grad=True)


def _range_values(b, shape, start: float, step: float, repeat: int, dtype):
    """start + (i // repeat) * step over the flat positions i of ``shape``, computed in the
    output dtype as MXNet's range_fwd (which casts start and step to it first)."""
    n = int(np.prod(shape))
    i = b.iota((n,), 0, "int32")
    if repeat > 1:
        i = b.div(i, repeat)
    if dtype.kind in "iu":
        start, step = int(start), int(step)
    if dtype.kind == "u":
        # unsigned: computed signed, then wrapped (MXNet's C++ casts a negative start or step)
        wide = np.dtype("int32" if dtype.itemsize < 4 else "int64")
        return b.convert(_range_values(b, shape, start, step, repeat, wide), dtype)
    return b.reshape(b.add(b.mul(b.convert(i, dtype), step), start), shape)


@lowers(arange)
def _arange_lower(ctx, p: ArangeParam, *_):
    return _range_values(ctx.b, ctx.out_shapes[0], p.bounds()[0], p.step, p.repeat, ctx.out_dtypes[0])


@dataclass(frozen=True)
class ArangeLikeParam:
    start: float = 0.0
    step: float = 1.0
    repeat: int = 1
    ctx: str = ""
    axis: Optional[int] = None


def _arange_like_shape(p: ArangeLikeParam, ins, outs):
    data = ins[0]
    if not known(data):
        return ins, outs
    return ins, [tuple(data) if p.axis is None else (data[norm_axis(p.axis, len(data), "arange_like")],)]


# the values of _arange over the input's shape (or one axis of it), in the input's dtype
arange_like = define("_contrib_arange_like", params=ArangeLikeParam, hint="arange_like", infer_shape=_arange_like_shape,
                     infer_type=same_dtype, shape_only_inputs=(0,), zero_grad=True)


@lowers(arange_like)
def _arange_like_lower(ctx, p: ArangeLikeParam, x):
    return _range_values(ctx.b, ctx.out_shapes[0], p.start, p.step, p.repeat, ctx.out_dtypes[0])


def _shape_of(name: str, values):
    """An int64 array of ``values(shape)`` (MXNet's kInt64); the input's value is never read."""
    op = define(name, infer_shape=lambda p, ins, outs: (ins, [(len(values(ins[0])),)] if known(ins[0]) else outs),
                infer_type=lambda p, ins, outs: (ins, [np.dtype("int64")]),
                shape_only_inputs=(0,), zero_grad=True)

    @lowers(op)
    def _lower(ctx, p, x):
        vals = np.array(values(x.shape), np.int64)
        return ctx.b.constant(vals, vals.shape, "int64")
    return op


shape_array = _shape_of("shape_array", lambda s: list(s))
size_array = _shape_of("size_array", lambda s: [int(np.prod(s))])
