"""Matrix products and indexing: dot, batch_dot, take, pick, one_hot, batch_take, gather_nd,
scatter_nd.

MXNet 1.9.1 src/operator/tensor/dot.cc, indexing_op.cc, broadcast_reduce_op_index.cc.
Index inputs are float ids by default (MXNet convention) and get no gradient.
Each op's parameters, shape rule, lowering and gradient stand together.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from ..emitter import scatter_add_rows
from . import hlo
from .params import Shape
from .registry import define, differentiable, lowers
from .rules import dtype_of_first, fixed_dtype, forward, known, norm_axis, prod, same_dtype


def _reverse_axes(b, x):
    return b.transpose(x, list(reversed(range(x.ndim))))


def _int_index(b, idx, n: int, mode: str):
    """Float ids -> in-range int32 (C cast truncates like MXNet; 'wrap' is a python-style mod)."""
    i = b.convert(idx, "int32")
    if mode == "wrap":
        r = b.rem(i, n)
        return b.select(b.compare(r, 0, "LT"), b.add(r, n), r)
    return b.clamp(0, i, n - 1)  # 'clip'; 'raise' cannot raise inside a compiled program


@dataclass(frozen=True)
class DotParam:
    transpose_a: bool = False
    transpose_b: bool = False
    forward_stype: Optional[str] = None


@forward
def _dot_shape(p: DotParam, a, b):
    a = tuple(reversed(a)) if p.transpose_a else tuple(a)
    b = tuple(reversed(b)) if p.transpose_b else tuple(b)
    if a[-1] != b[0]:
        raise ValueError(f"dot shape error: lhs {a} and rhs {b} do not agree on the contracted dim")
    out = a[:-1] + b[1:]
    return out or (1,)


dot = define("dot", params=DotParam, inputs=["lhs", "rhs"], infer_shape=_dot_shape, infer_type=same_dtype,
             matmul_like=True)


@lowers(dot)
def _dot_lower(ctx, p: DotParam, a, c):
    # MXNet's transpose of an N-D operand reverses all its axes; then last of a . first of c
    b = ctx.b
    a = _reverse_axes(b, a) if p.transpose_a else a
    c = _reverse_axes(b, c) if p.transpose_b else c
    return b.reshape(b.dot_general(a, c, contract=([a.ndim - 1], [0])), ctx.out_shapes[0])


@differentiable(dot, ("ograd0", "in0", "in1"))
def _dot_grad(ctx, p: DotParam, g, a, c):
    b = ctx.b
    A = _reverse_axes(b, a) if p.transpose_a else a
    C = _reverse_axes(b, c) if p.transpose_b else c
    g = b.reshape(g, A.shape[:-1] + C.shape[1:])
    na, nc = A.ndim - 1, C.ndim - 1                   # free dims of A (leading), of C (trailing)
    dA = b.dot_general(g, C, contract=(list(range(na, na + nc)), list(range(1, C.ndim))))
    dC = b.dot_general(A, g, contract=(list(range(na)), list(range(na))))
    return [_reverse_axes(b, dA) if p.transpose_a else dA, _reverse_axes(b, dC) if p.transpose_b else dC]


@forward
def _batch_dot_shape(p: DotParam, a, b):
    if len(a) != 3 or len(b) != 3:
        raise ValueError(f"batch_dot only supports 3D inputs, got {a} and {b}")
    m, k = (a[2], a[1]) if p.transpose_a else (a[1], a[2])
    k2, n = (b[2], b[1]) if p.transpose_b else (b[1], b[2])
    if a[0] != b[0] or k != k2:
        raise ValueError(f"batch_dot shape error: lhs {a} and rhs {b}")
    return (a[0], m, n)


batch_dot = define("batch_dot", params=DotParam, inputs=["lhs", "rhs"], infer_shape=_batch_dot_shape,
                   infer_type=same_dtype, matmul_like=True)


@lowers(batch_dot)
def _batch_dot_lower(ctx, p: DotParam, a, c):
    contract = ([1 if p.transpose_a else 2], [2 if p.transpose_b else 1])
    return ctx.b.dot_general(a, c, contract=contract, batch=([0], [0]))  # free dims: (m, n)


@differentiable(batch_dot, ("ograd0", "in0", "in1"))
def _batch_dot_grad(ctx, p: DotParam, g, a, c):
    # canonical a: (B, M, K), c: (B, K, N), g: (B, M, N)
    b = ctx.b
    da = b.dot_general(g, c, contract=([2], [1 if p.transpose_b else 2]), batch=([0], [0]))   # (B, M, K)
    dc = b.dot_general(a, g, contract=([2 if p.transpose_a else 1], [1]), batch=([0], [0]))   # (B, K, N)
    return [b.transpose(da, [0, 2, 1]) if p.transpose_a else da,
            b.transpose(dc, [0, 2, 1]) if p.transpose_b else dc]


@dataclass(frozen=True)
class TakeParam:
    axis: int = 0
    mode: Literal["raise", "wrap", "clip"] = "clip"


@forward
def _take_shape(p: TakeParam, a, idx):
    ax = norm_axis(p.axis, len(a))
    return tuple(a[:ax]) + tuple(idx) + tuple(a[ax + 1:])


take = define("take", params=TakeParam, inputs=["a", "indices"], no_grad_inputs=("indices",),
              infer_shape=_take_shape, infer_type=dtype_of_first)


@lowers(take)
def _take_lower(ctx, p: TakeParam, a, idx):
    ax = norm_axis(p.axis, a.ndim)
    return ctx.b.gather_rows(a, _int_index(ctx.b, idx, a.shape[ax], p.mode), ax)


@differentiable(take, ("ograd0", "in1"))
def _take_grad(ctx, p: TakeParam, g, idx):
    """Scatter-add the rows' gradients back to the (clipped / wrapped) ids; indices get none."""
    shape = ctx.fwd_in_shapes[0]
    ax = norm_axis(p.axis, len(shape))
    i = _int_index(ctx.b, idx, shape[ax], p.mode)
    return [scatter_add_rows(ctx.b, shape, i, g, ax), None]


def _pick_along(b, x, idx, ax: int):
    """x[..., idx[...], ...] along ``ax`` (idx shaped like x without ``ax``): mask + sum."""
    keep = [i for i in range(x.ndim) if i != ax]
    hit = b.compare(b.iota(x.shape, ax, "int32"), b.broadcast_in_dim(idx, x.shape, keep), "EQ")
    return b.reduce(b.select(hit, x, b.full_like(x, 0.0)), [ax])


def _unpick(b, g, idx, shape, ax: int):
    """Zeros of ``shape`` holding g at the picked positions (idx: int32 shaped like shape without ``ax``)."""
    keep = [i for i in range(len(shape)) if i != ax]
    hit = b.compare(b.iota(shape, ax, "int32"), b.broadcast_in_dim(idx, shape, keep), "EQ")
    gb = b.broadcast_in_dim(g, shape, keep)
    return b.select(hit, gb, b.full_like(gb, 0.0))


@dataclass(frozen=True)
class PickParam:
    axis: Optional[int] = -1
    keepdims: bool = False
    mode: Literal["wrap", "clip"] = "clip"


def _pick_shape(p: PickParam, ins, outs):
    data = ins[0]
    if not known(data):
        return ins, outs
    if p.axis is None:
        return ins, [(1,)]
    ax = norm_axis(p.axis, len(data))
    out = tuple(1 if i == ax else d for i, d in enumerate(data)) if p.keepdims else \
        tuple(d for i, d in enumerate(data) if i != ax)
    idx = tuple(d for i, d in enumerate(data) if i != ax) if not p.keepdims else out
    return [data, ins[1] if ins[1] is not None else idx], [out]


pick = define("pick", params=PickParam, inputs=["data", "index"], no_grad_inputs=("index",),
              infer_shape=_pick_shape, infer_type=dtype_of_first)


@lowers(pick)
def _pick_lower(ctx, p: PickParam, x, idx):
    b = ctx.b
    if p.axis is None:  # pick from the flattened input
        x, ax = b.reshape(x, (prod(x.shape),)), 0
    else:
        ax = norm_axis(p.axis, x.ndim)
    idx = b.reshape(idx, tuple(d for i, d in enumerate(x.shape) if i != ax))
    return b.reshape(_pick_along(b, x, _int_index(b, idx, x.shape[ax], p.mode), ax), ctx.out_shapes[0])


@differentiable(pick, ("ograd0", "in1"))
def _pick_grad(ctx, p: PickParam, g, idx):
    b, shape = ctx.b, ctx.fwd_in_shapes[0]
    flat = (prod(shape),) if p.axis is None else tuple(shape)
    ax = 0 if p.axis is None else norm_axis(p.axis, len(shape))
    rest = tuple(d for i, d in enumerate(flat) if i != ax)
    i = _int_index(b, b.reshape(idx, rest), flat[ax], p.mode)
    return [b.reshape(_unpick(b, b.reshape(g, rest), i, flat, ax), shape), None]


@forward
def _batch_take_shape(p, a, idx):
    return tuple(idx)


batch_take = define("batch_take", inputs=["a", "indices"], no_grad_inputs=("indices",),
                    infer_shape=_batch_take_shape, infer_type=dtype_of_first)


@lowers(batch_take)
def _batch_take_lower(ctx, p, a, idx):
    # out[i] = a.flat[i * M + clip(idx[i])], M = a.size / idx.size
    b = ctx.b
    n = int(prod(idx.shape))
    a = b.reshape(a, (n, int(prod(a.shape)) // n))
    i = _int_index(b, b.reshape(idx, (n,)), a.shape[1], "clip")
    return b.reshape(_pick_along(b, a, i, 1), ctx.out_shapes[0])


@differentiable(batch_take, ("ograd0", "in1"))
def _batch_take_grad(ctx, p, g, idx):
    b, shape = ctx.b, ctx.fwd_in_shapes[0]
    n = int(prod(idx.shape))
    m = int(prod(shape)) // n
    i = _int_index(b, b.reshape(idx, (n,)), m, "clip")
    return [b.reshape(_unpick(b, b.reshape(g, (n,)), i, (n, m), 1), shape), None]


@dataclass(frozen=True)
class OneHotParam:
    depth: int
    on_value: float = 1.0
    off_value: float = 0.0
    dtype: str = "float32"


@forward
def _one_hot_shape(p: OneHotParam, idx):
    return tuple(idx) + (p.depth,)


one_hot = define("one_hot", params=OneHotParam, inputs=["indices"], no_grad_inputs=("indices",),
                 infer_shape=_one_hot_shape, infer_type=fixed_dtype(lambda p: p.dtype), zero_grad=True)


@lowers(one_hot)
def _one_hot_lower(ctx, p: OneHotParam, idx):
    b = ctx.b
    shape, dtype = ctx.out_shapes[0], ctx.out_dtypes[0]
    i = b.convert(idx, "int32")  # out-of-range ids match no column: an all-off row
    hit = b.compare(b.iota(shape, idx.ndim, "int32"), b.broadcast_in_dim(i, shape, range(idx.ndim)), "EQ")
    on, off = (b.full_like(hit, v, dtype=dtype) for v in (p.on_value, p.off_value))
    return b.select(hit, on, off)


differentiable(one_hot, ())(lambda ctx, p: [None])


# --- gather_nd / scatter_nd: indices (M, Y...) address the first M dims of data / the output
def _index_tuples(b, idx, dims, wrap: bool):
    """(M, Y...) ids -> (Y..., M) int32 tuples; ``wrap``: gather_nd's (i + d) % d per dim, so
    -d <= i < 0 counts from the end."""
    i = b.convert(idx, "int32")
    i = b.transpose(i, list(range(1, idx.ndim)) + [0])
    if not wrap:
        return i
    d = b.broadcast_in_dim(b.constant(np.array(dims, np.int32), (len(dims),), "int32"), i.shape, [i.ndim - 1])
    return b.rem(b.add(i, d), d)


def _nd_check(what: str, idx, target) -> None:
    if len(idx) < 2:
        raise ValueError(f"{what} requires index tensor to have at least 2 dimensions")
    if idx[0] > len(target):
        raise ValueError(f"Number of indices exceeds {'data' if what == 'gather_nd' else 'output'} dimension "
                         f"in operator {what}")


@forward
def _gather_nd_shape(p, data, idx):
    _nd_check("gather_nd", idx, data)
    return tuple(idx[1:]) + tuple(data[idx[0]:])


gather_nd = define("gather_nd", inputs=["data", "indices"], no_grad_inputs=("indices",),
                   infer_shape=_gather_nd_shape, infer_type=dtype_of_first)


@lowers(gather_nd)
def _gather_nd_lower(ctx, p, data, idx):
    return hlo.gather_nd(ctx.b, data, _index_tuples(ctx.b, idx, data.shape[:idx.shape[0]], wrap=True))


@differentiable(gather_nd, ("ograd0", "in1"))
def _gather_nd_grad(ctx, p, g, idx):
    """_backward_gather_nd: g added at the gathered positions (repeats accumulate)."""
    shape = tuple(ctx.fwd_in_shapes[0])
    return [hlo.scatter_nd(ctx.b, shape, _index_tuples(ctx.b, idx, shape[:idx.shape[0]], wrap=True), g), None]


@dataclass(frozen=True)
class ScatterNDParam:
    shape: Shape


def _scatter_nd_shape(p: ScatterNDParam, ins, outs):
    data, idx = ins
    out = tuple(p.shape)
    if known(data) and known(idx):
        _nd_check("scatter_nd", idx, out)
        if tuple(data) != tuple(idx[1:]) + out[idx[0]:]:
            raise ValueError(f"scatter_nd: data {tuple(data)} does not fit indices {tuple(idx)} and shape {out}")
    return ins, [out]


scatter_nd = define("scatter_nd", params=ScatterNDParam, inputs=["data", "indices"], no_grad_inputs=("indices",),
                    infer_shape=_scatter_nd_shape, infer_type=dtype_of_first)


@lowers(scatter_nd)
def _scatter_nd_lower(ctx, p: ScatterNDParam, data, idx):
    """Zeros with data written at the index tuples (MXNet leaves repeated tuples unspecified;
    out-of-range ones are skipped here, where MXNet writes out of bounds)."""
    return hlo.scatter_nd(ctx.b, p.shape, _index_tuples(ctx.b, idx, (), wrap=False), data, combine="set")


@differentiable(scatter_nd, ("ograd0", "in1"))
def _scatter_nd_grad(ctx, p: ScatterNDParam, g, idx):
    return [hlo.gather_nd(ctx.b, g, _index_tuples(ctx.b, idx, tuple(p.shape)[:idx.shape[0]], wrap=True)), None]
