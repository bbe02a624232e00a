"""MXNet 1.9.1's LU-based linear-algebra operators (src/operator/tensor/la_op.h, la_op-inl.h):
inverse, det, slogdet.

Elimination with partial pivoting as one ``stablehlo.while`` over the matrix size (IREE 3.13
has no LU lowering): ``lu`` gives LAPACK getrf's compact factors and 1-based row swaps (the
hidden ``LU`` / ``pivot`` outputs of det and slogdet), ``inverse`` Gauss-Jordan on [A | I].
The gradients are la_op-inl.h's: inverse -Y^T dY Y^T, det dY det A^-T, slogdet dY A^-T.
"""
from __future__ import annotations

import numpy as np

from .linalg import EXPENSIVE, extract_diagonal, identity, lead_zeros, matmul, square_rule, swap_last
from .loop import dynamic_slice, dynamic_update_slice, while_loop
from .registry import define, differentiable, lowers


def _float_check(t):
    if t is not None and np.dtype(t) not in (np.float32, np.float64):
        raise ValueError("This operation only supports 32-bit and 64-bit floating point")


def _pivot_row(b, m, k, rows):
    """Per matrix, the row >= k whose entry in column k is largest in magnitude (the first of
    equals, as LAPACK's idamax): int32 (..., 1, 1)."""
    n = m.shape[-2]
    batch = tuple(m.shape[:-2])
    col = b.abs(dynamic_slice(b, m, lead_zeros(m) + [0, k], batch + (n, 1)))
    kb = b.broadcast_in_dim(k, rows.shape, [])
    col = b.select(b.compare(rows, kb, "GE"), col, b.full_like(col, -1.0))
    best = b.broadcast_in_dim(b.reduce(col, [m.ndim - 2], "max"), col.shape, list(range(m.ndim - 2)) + [m.ndim - 1])
    at = b.convert(rows, m.dtype)
    first = b.select(b.compare(col, best, "EQ"), at, b.full_like(at, float(n)))
    return b.convert(b.reduce(first, [m.ndim - 2], "min"), "int32")    # (..., 1)


def _swap_rows(b, m, k, p):
    """``m`` with rows k and p (int32 (..., 1) per matrix) exchanged, as a one-hot permutation."""
    n = m.shape[-2]
    batch = tuple(m.shape[:-2])
    idx = b.broadcast_in_dim(b.iota((n,), 0), batch + (n,), [m.ndim - 2])
    kb, pb = b.broadcast_in_dim(k, idx.shape, []), b.broadcast_in_dim(b.reshape(p, batch), idx.shape,
                                                                    list(range(m.ndim - 2)))
    src = b.select(b.compare(idx, kb, "EQ"), pb, b.select(b.compare(idx, pb, "EQ"), kb, idx))   # row i reads src[i]
    cols = b.broadcast_in_dim(b.iota((n,), 0), batch + (n, n), [m.ndim - 1])
    perm = b.convert(b.compare(b.broadcast_in_dim(src, batch + (n, n), list(range(m.ndim - 1))), cols, "EQ"), m.dtype)
    return matmul(b, perm, m)


def lu(b, a):
    """(LU, pivot, sign): getrf's compact factors (unit L below the diagonal, U on and above),
    its 1-based row swaps (int32, ..., n) and the permutation's sign (..., 1)."""
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    rows = b.broadcast_in_dim(b.iota((n, 1), 0), batch + (n, 1), [a.ndim - 2, a.ndim - 1])

    def body(k, state):
        m, piv, sign = state
        p = _pivot_row(b, m, k, rows)
        m = _swap_rows(b, m, k, p)
        piv = dynamic_update_slice(b, piv, b.add(p, 1), [0] * (a.ndim - 2) + [k])
        sign = b.select(b.compare(p, b.broadcast_in_dim(k, p.shape, []), "EQ"), sign, b.mul(sign, -1.0))
        pivot = b.broadcast_in_dim(dynamic_slice(b, m, lead_zeros(m) + [k, k], batch + (1, 1)), batch + (n, 1),
                                   list(range(a.ndim)))
        below = b.compare(rows, b.broadcast_in_dim(k, rows.shape, []), "GT")
        lcol = b.select(below, b.div(dynamic_slice(b, m, lead_zeros(m) + [0, k], batch + (n, 1)), pivot),
                        b.full_like(pivot, 0.0))
        urow = dynamic_slice(b, m, lead_zeros(m) + [k, 0], batch + (1, n))
        cols = b.broadcast_in_dim(b.iota((1, n), 1), batch + (1, n), [a.ndim - 2, a.ndim - 1])
        urow = b.select(b.compare(cols, b.broadcast_in_dim(k, cols.shape, []), "GT"), urow, b.full_like(urow, 0.0))
        m = b.sub(m, matmul(b, lcol, urow))                         # eliminate right of column k
        keep = b.select(below, lcol, dynamic_slice(b, m, lead_zeros(m) + [0, k], batch + (n, 1)))
        return [dynamic_update_slice(b, m, keep, lead_zeros(m) + [0, k]), piv, sign]

    init = [a, b.full_like(a, 0, batch + (n,), "int32"), b.full_like(a, 1.0, batch + (1,))]
    return while_loop(b, n, init, body)


def inverse_matrix(b, a):
    """A^-1 by Gauss-Jordan elimination with partial pivoting on [A | I]."""
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    eye = identity(b, a.shape, a.dtype)
    rows = b.broadcast_in_dim(b.iota((n, 1), 0), batch + (n, 1), [a.ndim - 2, a.ndim - 1])

    def body(k, state):
        (m,) = state
        m = _swap_rows(b, m, k, _pivot_row(b, m, k, rows))
        pivot = dynamic_slice(b, m, lead_zeros(m) + [k, k], batch + (1, 1))
        row = b.div(dynamic_slice(b, m, lead_zeros(m) + [k, 0], batch + (1, 2 * n)),
                    b.broadcast_in_dim(pivot, batch + (1, 2 * n), list(range(a.ndim))))
        col = dynamic_slice(b, m, lead_zeros(m) + [0, k], batch + (n, 1))
        col = b.select(b.compare(rows, b.broadcast_in_dim(k, rows.shape, []), "EQ"), b.full_like(col, 0.0), col)
        m = b.sub(m, matmul(b, col, row))
        return [dynamic_update_slice(b, m, row, lead_zeros(m) + [k, 0])]

    (m,) = while_loop(b, n, [b.concatenate([a, eye], a.ndim - 1)], body)
    return b.slice(m, [0] * (a.ndim - 1) + [n], tuple(a.shape[:-1]) + (2 * n,))


# --- inverse ---------------------------------------------------------------------------------
_RANK = "Input A's dimension must be >= 2"


def _inverse_type(p, ins, outs):
    _float_check(ins[0])
    return (ins, [ins[0]]) if ins[0] is not None else (ins, outs)


inverse = define("_linalg_inverse", "linalg_inverse", **EXPENSIVE, hint="inverse", inputs=["A"], infer_shape=square_rule(lambda a: [a], rank_message=_RANK),
                 infer_type=_inverse_type)


@lowers(inverse)
def _inverse_lower(ctx, p, a):
    return inverse_matrix(ctx.b, a)


@differentiable(inverse, ("ograd0", "out0"))
def _inverse_grad(ctx, p, g, y):
    b = ctx.b
    yt = swap_last(b, y)
    return [b.mul(matmul(b, matmul(b, yt, g), yt), -1.0)]


# --- det, slogdet (hidden LU and pivot outputs, as MXNet's) ----------------------------------
def _det_shapes(visible: int):
    """The value(s) per matrix ((1,) for one matrix), then LU and the pivots."""
    return square_rule(lambda a: [a[:-2] or (1,)] * visible + [a, a[:-1]], rank_message=_RANK)


def _det_types(visible: int):
    def rule(p, ins, outs):
        _float_check(ins[0])
        if ins[0] is None:
            return ins, outs
        return ins, [ins[0]] * (visible + 1) + [np.dtype("int32")]
    return rule


det = define("_linalg_det", "linalg_det", **EXPENSIVE, hint="det", inputs=["A"],
             outputs=["output0", "output1", "output2"], num_visible=lambda p: 1,
             infer_shape=_det_shapes(1), infer_type=_det_types(1))
slogdet = define("_linalg_slogdet", "linalg_slogdet", **EXPENSIVE, hint="slogdet", inputs=["A"],
                 outputs=["output0", "output1", "output2", "output3"], num_visible=lambda p: 2,
                 infer_shape=_det_shapes(2), infer_type=_det_types(2))


def _per_matrix(b, v, shape):
    return b.reshape(v, shape)


@lowers(det)
def _det_lower(ctx, p, a):
    b = ctx.b
    factors, piv, sign = lu(b, a)
    value = b.mul(b.reduce(extract_diagonal(b, factors, 0), [a.ndim - 2], "mul"), b.reshape(sign, tuple(a.shape[:-2])))
    return [_per_matrix(b, value, ctx.out_shapes[0]), factors, piv]


@lowers(slogdet)
def _slogdet_lower(ctx, p, a):
    b = ctx.b
    factors, piv, sign = lu(b, a)
    d = extract_diagonal(b, factors, 0)
    signs = b.select(b.compare(d, 0.0, "GT"), b.full_like(d, 1.0),
                     b.select(b.compare(d, 0.0, "LT"), b.full_like(d, -1.0), b.full_like(d, 0.0)))
    s = b.mul(b.reduce(signs, [a.ndim - 2], "mul"), b.reshape(sign, tuple(a.shape[:-2])))
    logabs = b.reduce(b.log(b.abs(d)), [a.ndim - 2], "add")
    return [_per_matrix(b, s, ctx.out_shapes[0]), _per_matrix(b, logabs, ctx.out_shapes[1]), factors, piv]


def _per_matrix_grad(b, g, a):
    """(...,) or (1,) head gradient broadcast over each matrix."""
    return b.broadcast_in_dim(b.reshape(g, tuple(a.shape[:-2])), a.shape, list(range(a.ndim - 2)))


@differentiable(det, ("ograd0", "in0", "out0"))
def _det_grad(ctx, p, g, a, y):
    b = ctx.b
    return [b.mul(_per_matrix_grad(b, b.mul(g, y), a), swap_last(b, inverse_matrix(b, a)))]


@differentiable(slogdet, ("ograd1", "in0"))
def _slogdet_grad(ctx, p, g, a):
    b = ctx.b
    return [b.mul(_per_matrix_grad(b, g, a), swap_last(b, inverse_matrix(b, a)))]
