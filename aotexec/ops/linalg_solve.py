"""MXNet 1.9.1's triangular-solve and Cholesky operators (src/operator/tensor/la_op.h,
la_op-inl.h): trsm, potrf, potri, with la_op-inl.h's backward formulas.

IREE 3.13 has no ``stablehlo.cholesky`` / ``triangular_solve`` lowering, so both are one
``stablehlo.while`` over the matrix size (a row of forward substitution, a column of the
Cholesky factor per step): the module does not grow with the matrices, and every step works on
the whole batch of matrices at once.
"""
from __future__ import annotations

from dataclasses import dataclass

from .linalg import (EXPENSIVE, TrmmParam, identity, lead_zeros, square_rule, matmul, swap_last, triangle, triangular_factor_grad,
                     triangular_pair_shape, triangular_product)
from .loop import dynamic_slice, dynamic_update_slice, while_loop
from .registry import define, differentiable, lowers
from .rules import known, same_dtype


def _solve_lower(b, t, rhs):
    """X with t X = rhs for lower-triangular t (..., n, n) and rhs (..., n, m): forward
    substitution, one row per step (rows not yet solved are zero, so a whole-row product
    with X sums the solved ones only)."""
    n, m = t.shape[-1], rhs.shape[-1]
    batch = tuple(t.shape[:-2])

    def body(i, state):
        (x,) = state
        row = dynamic_slice(b, t, lead_zeros(t) + [i, 0], batch + (1, n))
        diag = dynamic_slice(b, t, lead_zeros(t) + [i, i], batch + (1, 1))
        r = dynamic_slice(b, rhs, lead_zeros(rhs) + [i, 0], batch + (1, m))
        xi = b.div(b.sub(r, matmul(b, row, x)), b.broadcast_in_dim(diag, batch + (1, m), list(range(t.ndim))))
        return [dynamic_update_slice(b, x, xi, lead_zeros(x) + [i, 0])]

    return while_loop(b, n, [b.full_like(rhs, 0.0)], body)[0]


def _solve(b, t, rhs, lower: bool):
    """X with t X = rhs, t triangular (lower or upper: the reversed system is lower)."""
    if lower:
        return _solve_lower(b, t, rhs)
    nd = t.ndim
    flip = lambda v, dims: b.reverse(v, dims)  # noqa: E731
    return flip(_solve_lower(b, flip(t, [nd - 2, nd - 1]), flip(rhs, [nd - 2])), [nd - 2])


def triangular_solve(b, a, rhs, alpha: float, rightside: bool, lower: bool, transpose: bool):
    """linalg_batch_trsm: X with op(tri(a)) X = alpha rhs (rightside: X op(tri(a)) = alpha rhs)."""
    t = triangle(b, a, lower)
    if transpose:
        t, lower = swap_last(b, t), not lower
    if rightside:               # X t = rhs  <=>  t^T X^T = rhs^T
        x = swap_last(b, _solve(b, swap_last(b, t), swap_last(b, rhs), not lower))
    else:
        x = _solve(b, t, rhs, lower)
    return b.mul(x, alpha) if alpha != 1.0 else x


def mirror_triangle(b, m, from_lower: bool):
    """CopyTriangularToOppositeSide: the symmetric matrix keeping ``m``'s lower (upper) triangle."""
    kept = triangle(b, m, from_lower)
    return b.add(kept, swap_last(b, triangle(b, m, from_lower, -1 if from_lower else 1)))


# --- trsm ------------------------------------------------------------------------------------
trsm = define("_linalg_trsm", "linalg_trsm", **EXPENSIVE, hint="trsm", params=TrmmParam, inputs=["A", "B"],
              infer_shape=triangular_pair_shape, infer_type=same_dtype)


@lowers(trsm)
def _trsm_lower(ctx, p: TrmmParam, a, c):
    return triangular_solve(ctx.b, a, c, p.alpha, p.rightside, p.lower, p.transpose)


@differentiable(trsm, ("ograd0", "in0", "out0"))
def _trsm_grad(ctx, p: TrmmParam, g, a, x):
    b = ctx.b
    db = triangular_solve(b, a, g, p.alpha, p.rightside, p.lower, not p.transpose)
    return [triangular_factor_grad(b, p, db, x, -1.0 / p.alpha), db]


# --- potrf (Cholesky factor) and potri (inverse from it) -------------------------------------
@dataclass(frozen=True)
class CholeskyParam:
    lower: bool = True


potrf = define("_linalg_potrf", "linalg_potrf", **EXPENSIVE, hint="potrf", params=CholeskyParam, inputs=["A"],
               infer_shape=square_rule(lambda a: [a]), infer_type=same_dtype)
potri = define("_linalg_potri", "linalg_potri", **EXPENSIVE, hint="potri", params=CholeskyParam, inputs=["A"],
               infer_shape=square_rule(lambda a: [a]), infer_type=same_dtype)


def cholesky_lower(b, a):
    """L (lower) with a = L L^T, from a's lower triangle: one column per step,
    column j = (a[:, j] - L L[j, :]^T) / sqrt(its j-th entry) on rows >= j."""
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    rows = b.broadcast_in_dim(b.iota((n, 1), 0), batch + (n, 1), [a.ndim - 2, a.ndim - 1])

    def body(j, state):
        (low,) = state
        lj = dynamic_slice(b, low, lead_zeros(low) + [j, 0], batch + (1, n))
        v = b.sub(dynamic_slice(b, a, lead_zeros(a) + [0, j], batch + (n, 1)), matmul(b, low, lj, False, True))
        d = b.sqrt(dynamic_slice(b, v, lead_zeros(v) + [j, 0], batch + (1, 1)))
        col = b.div(v, b.broadcast_in_dim(d, batch + (n, 1), list(range(a.ndim))))
        below = b.compare(rows, b.broadcast_in_dim(j, rows.shape, []), "GE")
        return [dynamic_update_slice(b, low, b.select(below, col, b.full_like(col, 0.0)), lead_zeros(low) + [0, j])]

    return while_loop(b, n, [b.full_like(a, 0.0)], body)[0]


@lowers(potrf)
def _potrf_lower(ctx, p: CholeskyParam, a):
    b = ctx.b
    return cholesky_lower(b, a) if p.lower else swap_last(b, cholesky_lower(b, swap_last(b, a)))


@differentiable(potrf, ("ograd0", "out0"))
def _potrf_grad(ctx, p: CholeskyParam, g, f):
    """dA = 0.5 F^-T copyLTU(F^T dF) F^-1 (lower F; the transposed forms for upper)."""
    b = ctx.b
    d = triangular_product(b, f, g, 1.0, not p.lower, p.lower, True)
    d = mirror_triangle(b, d, p.lower)
    d = triangular_solve(b, f, d, 1.0, False, p.lower, p.lower)
    return [triangular_solve(b, f, d, 0.5, True, p.lower, not p.lower)]


@lowers(potri)
def _potri_lower(ctx, p: CholeskyParam, f):
    """(F F^T)^-1 from the lower factor F, (F^T F)^-1 from the upper one."""
    b = ctx.b
    eye = identity(b, f.shape, f.dtype)
    inv = triangular_solve(b, f, eye, 1.0, False, p.lower, False)
    return matmul(b, inv, inv, True, False) if p.lower else matmul(b, inv, inv, False, True)


@differentiable(potri, ("ograd0", "in0", "out0"))
def _potri_grad(ctx, p: CholeskyParam, g, f, a):
    """dF = -tril(A (dA + dA^T) F^-T) (lower; the transposed forms for upper)."""
    b = ctx.b
    gs = b.add(g, swap_last(b, g))
    d = matmul(b, a, gs) if p.lower else matmul(b, gs, a)
    return [triangle(b, triangular_solve(b, f, d, -1.0, p.lower, p.lower, True), p.lower)]


# --- gelqf: A = L Q (L lower triangular, Q with orthonormal rows) ----------------------------
def _gelqf_shape(p, ins, outs):
    a = ins[0]
    if not known(a) or len(a) < 2:
        return ins, outs
    if a[-2] > a[-1]:
        raise ValueError("Input A shape wrong: Last dimension must be >= than second to last")
    return ins, [tuple(a), tuple(a[:-1]) + (a[-2],)]


gelqf = define("_linalg_gelqf", "linalg_gelqf", **EXPENSIVE, hint="gelqf", inputs=["A"], outputs=["output0", "output1"],
               infer_shape=_gelqf_shape, infer_type=same_dtype)


def lq(b, a):
    """(Q, L) by Householder reflections from the right, LAPACK gelqf's signs (dlarfg: L[i, i] =
    -sign(alpha) |row i from column i|, no reflection where that row is already zero past i)."""
    m, n = a.shape[-2], a.shape[-1]
    batch = tuple(a.shape[:-2])
    cols = b.broadcast_in_dim(b.iota((1, n), 1), batch + (1, n), [a.ndim - 2, a.ndim - 1])
    eye = identity(b, batch + (n, n), a.dtype)
    one = list(range(a.ndim))

    def body(i, state):
        r, acc = state
        ib = b.broadcast_in_dim(i, cols.shape, [])
        x = dynamic_slice(b, r, lead_zeros(r) + [i, 0], batch + (1, n))
        tail = b.select(b.compare(cols, ib, "GT"), x, b.full_like(x, 0.0))
        alpha = dynamic_slice(b, x, lead_zeros(x) + [0, i], batch + (1, 1))
        xnorm2 = b.reduce(b.mul(tail, tail), [a.ndim - 1])                       # (..., 1)
        xnorm2 = b.reshape(xnorm2, batch + (1, 1))
        norm = b.sqrt(b.add(b.mul(alpha, alpha), xnorm2))
        beta = b.select(b.compare(alpha, 0.0, "LT"), norm, b.mul(norm, -1.0))
        live = b.compare(xnorm2, 0.0, "GT")
        safe = b.select(live, b.sub(alpha, beta), b.full_like(alpha, 1.0))
        tau = b.select(live, b.div(b.sub(beta, alpha), b.select(live, beta, b.full_like(beta, 1.0))),
                       b.full_like(beta, 0.0))
        wide = lambda v: b.broadcast_in_dim(v, batch + (1, n), one)  # noqa: E731
        v = b.add(b.div(tail, wide(safe)), b.convert(b.compare(cols, ib, "EQ"), a.dtype))    # v[i] = 1
        tv = b.mul(v, wide(tau))
        r = b.sub(r, matmul(b, matmul(b, r, v, False, True), tv))             # R (I - tau v v^T)
        acc = b.sub(acc, matmul(b, matmul(b, acc, v, False, True), tv))
        return [r, acc]

    r, acc = while_loop(b, m, [a, eye], body)
    q = b.slice(swap_last(b, acc), [0] * a.ndim, batch + (m, n))
    low = triangle(b, b.slice(r, [0] * a.ndim, batch + (m, m)), True)
    return q, low


@lowers(gelqf)
def _gelqf_lower(ctx, p, a):
    return list(lq(ctx.b, a))


@differentiable(gelqf, ("ograd0", "ograd1", "out0", "out1"))
def _gelqf_grad(ctx, p, dq, dl, q, low):
    """dA = L^-T (dQ + copyLTU(M) Q), M = L^T dL - dQ Q^T."""
    b = ctx.b
    mm = b.sub(triangular_product(b, low, dl, 1.0, False, True, True), matmul(b, dq, q, False, True))
    d = b.add(dq, matmul(b, mirror_triangle(b, mm, True), q))
    return [triangular_solve(b, low, d, 1.0, False, True, True)]
