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
from .rules import dtype_of_first, fixed_dtype, forward, known, norm_axis, prod, same_dtype, shape_str


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


def _dot_shape(p: DotParam, ins, outs):
    """MXNet's DotShape (dot-inl.h): partial inputs give a partial output (unknown batch dims)."""
    a, c = ins
    if a is None or c is None:
        return ins, outs
    if not a or not c:
        raise ValueError("scalar tensor is not supported by this operator.")
    if len(a) == 1 and len(c) == 1:
        if p.transpose_a or p.transpose_b:
            raise ValueError("Cannot transpose vectors")
        if a[0] >= 0 and c[0] >= 0 and a[0] != c[0]:
            raise ValueError(f"dot shape error: {shape_str(a)} X {shape_str(c)}")
        return ins, [(1,)]
    # MXNet's transpose of an N-D operand keeps its leading / trailing block: only the
    # contracted block's size must agree
    ka = (a[0],) if p.transpose_a else a[-1:]
    kc = c[-1:] if p.transpose_b else (c[0],)
    if known(ka) and known(kc) and prod(ka) != prod(kc):
        raise ValueError(f"dot shape error: {shape_str(a)} X {shape_str(c)}")
    free_a = (tuple(a[1:]) if p.transpose_a else tuple(a[:-1])) if len(a) > 1 else ()
    free_c = (tuple(c[:-1]) if p.transpose_b else tuple(c[1:])) if len(c) > 1 else ()
    return ins, [free_a + free_c]


dot = define("dot", params=DotParam, inputs=["lhs", "rhs"], infer_shape=_dot_shape, infer_type=same_dtype,
             matmul_like=True)


def _dot_matrices(b, p: DotParam, a, c):
    """MXNet's dot views each operand as a matrix (dot-inl.h): lhs (rows, K) or, transposed,
    (K, rest); rhs (K, rest) or, transposed, (rest, K); 1-D operands are one row / column."""
    a2 = (a.shape[0], prod(a.shape[1:])) if p.transpose_a else (prod(a.shape[:-1]), a.shape[-1])
    c2 = (prod(c.shape[:-1]), c.shape[-1]) if p.transpose_b else (c.shape[0], prod(c.shape[1:]))
    return b.reshape(a, a2), b.reshape(c, c2)


@lowers(dot)
def _dot_lower(ctx, p: DotParam, a, c):
    b = ctx.b
    a2, c2 = _dot_matrices(b, p, a, c)
    y = b.dot_general(a2, c2, contract=([0 if p.transpose_a else 1], [1 if p.transpose_b else 0]))
    return b.reshape(y, ctx.out_shapes[0])


@differentiable(dot, ("ograd0", "in0", "in1"))
def _dot_grad(ctx, p: DotParam, g, a, c):
    b = ctx.b
    a2, c2 = _dot_matrices(b, p, a, c)
    m = a2.shape[1] if p.transpose_a else a2.shape[0]
    n = c2.shape[0] if p.transpose_b else c2.shape[1]
    g = b.reshape(g, (m, n))
    da = b.dot_general(g, c2, contract=([1], [0 if p.transpose_b else 1]))        # (M, K)
    dc = b.dot_general(a2, g, contract=([1 if p.transpose_a else 0], [0]))        # (K, N)
    da = b.transpose(da, [1, 0]) if p.transpose_a else da
    dc = b.transpose(dc, [1, 0]) if p.transpose_b else dc
    return [b.reshape(da, a.shape), b.reshape(dc, c.shape)]


def _batch_dot_shape(p: DotParam, ins, outs):
    """MXNet's BatchDotShape: N-D x N-D (N >= 3), leading dims are batch dims; partial only
    when lhs's last dim and rhs's second-to-last dim are known (as there)."""
    a, c = ins
    if a is None or c is None:
        return ins, outs
    nd = len(a)
    if nd < 3 or len(c) != nd:
        raise ValueError(f"batch_dot currently only support N-D*N-D array (N >= 3){shape_str(a)} v.s. {shape_str(c)}")
    if a[-1] < 0 or c[-2] < 0:
        return ins, outs
    if a[:-2] != c[:-2]:
        raise ValueError(f"batch_dot shape error (the leading batch dimensions must be equal): {shape_str(a)} X "
                         f"{shape_str(c)} trans_a={int(p.transpose_a)} trans_b={int(p.transpose_b)}")
    m, k = (a[-1], a[-2]) if p.transpose_a else (a[-2], a[-1])
    k2, n = (c[-1], c[-2]) if p.transpose_b else (c[-2], c[-1])
    if k != k2:
        raise ValueError(f"batch_dot shape error (shape mismatch): {shape_str(a)} X {shape_str(c)} "
                         f"trans_a={int(p.transpose_a)} trans_b={int(p.transpose_b)}")
    return ins, [tuple(a[:-2]) + (m, n)]


batch_dot = define("batch_dot", params=DotParam, inputs=["lhs", "rhs"], infer_shape=_batch_dot_shape,
                   infer_type=same_dtype, matmul_like=True)


def _swap_last(b, x):
    perm = list(range(x.ndim))
    perm[-2:] = perm[-1], perm[-2]
    return b.transpose(x, perm)


@lowers(batch_dot)
def _batch_dot_lower(ctx, p: DotParam, a, c):
    n, batch = a.ndim, list(range(a.ndim - 2))
    contract = ([n - 2 if p.transpose_a else n - 1], [n - 1 if p.transpose_b else n - 2])
    return ctx.b.dot_general(a, c, contract=contract, batch=(batch, batch))  # free dims: (m, n)


@differentiable(batch_dot, ("ograd0", "in0", "in1"))
def _batch_dot_grad(ctx, p: DotParam, g, a, c):
    # canonical a: (..., M, K), c: (..., K, N), g: (..., M, N)
    b, n = ctx.b, g.ndim
    batch = (list(range(n - 2)), list(range(n - 2)))
    da = b.dot_general(g, c, contract=([n - 1], [n - 2 if p.transpose_b else n - 1]), batch=batch)   # (.., M, K)
    dc = b.dot_general(a, g, contract=([n - 1 if p.transpose_a else n - 2], [n - 2]), batch=batch)   # (.., K, N)
    return [_swap_last(b, da) if p.transpose_a else da, _swap_last(b, dc) if p.transpose_b else dc]


@dataclass(frozen=True)
class TakeParam:
    axis: int = 0
    mode: Literal["raise", "wrap", "clip"] = "clip"


def _take_shape(p: TakeParam, ins, outs):
    """MXNet's TakeOpShape: needs the indices' shape; the data's may be partial."""
    a, idx = ins
    if a is None or not known(idx):
        return ins, outs
    if not -len(a) <= p.axis < len(a):
        raise ValueError("Axis should be in the range of [-r, r-1] where r is the rank of input tensor")
    ax = norm_axis(p.axis, len(a))
    return ins, [tuple(a[:ax]) + tuple(idx) + tuple(a[ax + 1:])]


take = define("take", params=TakeParam, inputs=["a", "indices"], no_grad_inputs=("indices",),
              infer_shape=_take_shape, infer_type=dtype_of_first,
              index_checks=lambda p: [(1, 0, p.axis)] if p.mode == "raise" else [])


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


def _reduce_axis_shape(shape: tuple, axis: Optional[int], keepdims: bool) -> tuple:
    """MXNet's ReduceAxisShapeImpl (partial shapes pass through)."""
    if axis is None or len(shape) == 1:
        return (1,) * len(shape) if keepdims else (1,)
    ax = norm_axis(axis, len(shape))
    if keepdims:
        return tuple(1 if i == ax else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i != ax)


def _pick_shape(p: PickParam, ins, outs):
    """MXNet's PickOpShape: the output and the index follow the data's (partial) shape."""
    data, idx = ins
    if data is None:
        return ins, outs
    out = _reduce_axis_shape(tuple(data), p.axis, p.keepdims)
    keep = idx is not None and len(idx) == len(data)
    return [data, _reduce_axis_shape(tuple(data), p.axis, keep)], [out]


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
                    infer_shape=_batch_take_shape, infer_type=dtype_of_first, no_fgradient=True)


@lowers(batch_take)
def _batch_take_lower(ctx, p, a, idx):
    # out[i] = a.flat[i * M + clip(idx[i])], M = a.size / idx.size
    b = ctx.b
    n = int(prod(idx.shape))
    a = b.reshape(a, (n, int(prod(a.shape)) // n))
    i = _int_index(b, b.reshape(idx, (n,)), a.shape[1], "clip")
    return b.reshape(_pick_along(b, a, i, 1), ctx.out_shapes[0])


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


# --- diag (src/operator/tensor/diag_op-inl.h): a 1-D input's diagonal matrix, or an N-D input's
# diagonal over (axis1, axis2) as its last axis; the k-th diagonal, above the main one for k > 0 ---
@dataclass(frozen=True)
class DiagParam:
    k: int = 0
    axis1: int = 0
    axis2: int = 1


def _diag_axes(p: DiagParam, nd: int) -> tuple[int, int]:
    a1, a2 = norm_axis(p.axis1, nd, "diag"), norm_axis(p.axis2, nd, "diag")
    if a1 == a2:
        raise ValueError(f"axis1 and axis2 cannot refer to the same axis {a1}")
    return a1, a2


@forward
def _diag_shape(p: DiagParam, x):
    if len(x) == 1:
        return (x[0] + abs(p.k),) * 2
    a1, a2 = _diag_axes(p, len(x))
    size = min(x[a1] + min(p.k, 0), x[a2] - max(p.k, 0))
    if size <= 0:
        raise ValueError("Diagonal does not exist.")
    return tuple(d for i, d in enumerate(x) if i not in (a1, a2)) + (size,)


diag = define("diag", params=DiagParam, infer_shape=_diag_shape, infer_type=same_dtype)


def _diag_start(p: DiagParam, cols: int) -> int:
    """Flat offset of the diagonal's first element in a (rows, cols) matrix; the next are cols + 1 on."""
    return max(-p.k, 0) * cols + max(p.k, 0)


def _diag_matrix(b, v, p: DiagParam, m: int):
    """(..., n) -> (..., m, m) with v on the k-th diagonal: interior padding puts m zeros between."""
    n = v.shape[-1]
    start = _diag_start(p, m)
    lead = [0] * (v.ndim - 1)
    flat = b.pad(v, 0.0, lead + [start], lead + [m * m - start - (n - 1) * (m + 1) - 1], lead + [m])
    return b.reshape(flat, v.shape[:-1] + (m, m))


def _diag_of(b, x, p: DiagParam, n: int):
    """(..., rows, cols) -> (..., n): every (cols + 1)-th element of the flattened matrix."""
    rows, cols = x.shape[-2:]
    flat = b.reshape(x, x.shape[:-2] + (rows * cols,))
    start = _diag_start(p, cols)
    lead = [0] * (x.ndim - 2)
    return b.slice(flat, lead + [start], list(x.shape[:-2]) + [start + (n - 1) * (cols + 1) + 1],
                   [1] * (x.ndim - 2) + [cols + 1])


def _to_last(x_ndim: int, a1: int, a2: int) -> list[int]:
    return [i for i in range(x_ndim) if i not in (a1, a2)] + [a1, a2]


@lowers(diag)
def _diag_lower(ctx, p: DiagParam, x):
    b = ctx.b
    if x.ndim == 1:
        return _diag_matrix(b, x, p, x.shape[0] + abs(p.k))
    a1, a2 = _diag_axes(p, x.ndim)
    return _diag_of(b, b.transpose(x, _to_last(x.ndim, a1, a2)), p, ctx.out_shapes[0][-1])


@differentiable(diag, ("ograd0",))
def _diag_grad(ctx, p: DiagParam, g):
    b, shape = ctx.b, ctx.fwd_in_shapes[0]
    if len(shape) == 1:
        return [_diag_of(b, g, p, shape[0])]
    a1, a2 = _diag_axes(p, len(shape))
    perm = _to_last(len(shape), a1, a2)
    rows, cols = shape[a1], shape[a2]
    n = g.shape[-1]
    lead = [0] * (g.ndim - 1)
    start = _diag_start(p, cols)
    flat = b.pad(g, 0.0, lead + [start], lead + [rows * cols - start - (n - 1) * (cols + 1) - 1], lead + [cols])
    moved = b.reshape(flat, g.shape[:-1] + (rows, cols))
    inverse = [perm.index(i) for i in range(len(shape))]
    return [b.transpose(moved, inverse)]


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
                   infer_shape=_gather_nd_shape, infer_type=dtype_of_first, index_checks=lambda p: [(1, 0, None)])


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
