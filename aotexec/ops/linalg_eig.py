"""MXNet 1.9.1's symmetric eigendecomposition, ``linalg.syevd`` (src/operator/tensor/la_op.h,
la_op-inl.h): (U, L) with A = U^T diag(L) U, eigenvalues ascending, each eigenvector row signed
so that its largest-magnitude entry (the first of equals) is positive, as SyevdEigenVecSigns.

IREE 3.13 has no eigensolver: cyclic Jacobi rotations, one (p, q) pair per step of one
``stablehlo.while`` (a fixed number of sweeps, quadratic convergence: machine precision well
before the last at the sizes MXNet's tests use), each step rotating two rows and two columns of
the whole batch at once. The gradient is syevd_backward's.
"""
from __future__ import annotations

import numpy as np

from .hlo import sort
from .linalg import EXPENSIVE, extract_diagonal, identity, lead_zeros, matmul, square_rule, swap_last
from .linalg_solve import mirror_triangle
from .loop import dynamic_slice, dynamic_update_slice, while_loop
from .registry import define, differentiable, lowers
from .rules import same_dtype

SWEEPS = 12


syevd = define("_linalg_syevd", "linalg_syevd", **EXPENSIVE, hint="syevd", inputs=["A"], outputs=["output0", "output1"],
               infer_shape=square_rule(lambda a: [a, a[:-1]]), infer_type=same_dtype)


def _rotate(b, m, p, q, c, s, axis: int):
    """``m`` with its lines p and q along ``axis`` (-1: columns, -2: rows) replaced by
    c x_p - s x_q and s x_p + c x_q."""
    n = m.shape[-1]
    batch = tuple(m.shape[:-2])
    lead = lead_zeros(m)
    size = batch + ((n, 1) if axis == -1 else (1, n))
    at = lambda i: lead + ([0, i] if axis == -1 else [i, 0])  # noqa: E731
    xp, xq = dynamic_slice(b, m, at(p), size), dynamic_slice(b, m, at(q), size)
    cw, sw = (b.broadcast_in_dim(v, size, list(range(m.ndim))) for v in (c, s))
    m = dynamic_update_slice(b, m, b.sub(b.mul(cw, xp), b.mul(sw, xq)), at(p))
    return dynamic_update_slice(b, m, b.add(b.mul(sw, xp), b.mul(cw, xq)), at(q))


def _jacobi(b, a):
    """(D, V): a = V D V^T with D nearly diagonal after ``SWEEPS`` sweeps."""
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    lead = lead_zeros(a)
    eye = identity(b, a.shape, a.dtype)
    one = batch + (1, 1)

    def body(t, state):
        m, v = state
        p = b.rem(b.div(t, n), n)
        q = b.rem(t, n)
        app = dynamic_slice(b, m, lead + [p, p], one)
        aqq = dynamic_slice(b, m, lead + [q, q], one)
        apq = dynamic_slice(b, m, lead + [p, q], one)
        live = b.op("stablehlo.and", [b.broadcast_in_dim(b.compare(p, q, "LT"), one, []),
                                      b.compare(apq, 0.0, "NE")], one, "bool")
        theta = b.div(b.sub(aqq, app), b.mul(b.select(live, apq, b.full_like(apq, 1.0)), 2.0))
        sign = b.select(b.compare(theta, 0.0, "LT"), b.full_like(theta, -1.0), b.full_like(theta, 1.0))
        tan = b.div(sign, b.add(b.abs(theta), b.sqrt(b.add(b.mul(theta, theta), 1.0))))
        c = b.rsqrt(b.add(b.mul(tan, tan), 1.0))
        s = b.mul(tan, c)
        c = b.select(live, c, b.full_like(c, 1.0))
        s = b.select(live, s, b.full_like(s, 0.0))
        m = _rotate(b, _rotate(b, m, p, q, c, s, -1), p, q, c, s, -2)      # J^T m J
        return [m, _rotate(b, v, p, q, c, s, -1)]                          # v J

    return while_loop(b, SWEEPS * n * n, [a, eye], body)


def _one_hot_rows(b, idx, n: int, dtype):
    """(..., n) int32 -> (..., n, n) with row i one at column idx[i]."""
    nd = idx.ndim + 1
    cols = b.broadcast_in_dim(b.iota((n,), 0), tuple(idx.shape) + (n,), [nd - 1])
    return b.convert(b.compare(b.broadcast_in_dim(idx, cols.shape, list(range(nd - 1))), cols, "EQ"), dtype)


def eigh(b, a):
    """(U, L) of syevd from the lower triangle of ``a``."""
    n = a.shape[-1]
    m, v = _jacobi(b, mirror_triangle(b, a, True))
    lam = extract_diagonal(b, m, 0)
    order = b.broadcast_in_dim(b.iota((n,), 0), lam.shape, [lam.ndim - 1])
    lam, order = sort(b, [lam, order], lam.ndim - 1, descending=False)
    u = matmul(b, _one_hot_rows(b, order, n, a.dtype), swap_last(b, v))     # rows: eigenvectors, sorted
    mag = b.abs(u)
    top = b.broadcast_in_dim(b.reduce(mag, [u.ndim - 1], "max"), u.shape, list(range(u.ndim - 1)))
    cols = b.convert(b.broadcast_in_dim(b.iota((n,), 0), u.shape, [u.ndim - 1]), a.dtype)
    first = b.reduce(b.select(b.compare(mag, top, "EQ"), cols, b.full_like(cols, float(n))), [u.ndim - 1], "min")
    at_first = b.compare(cols, b.broadcast_in_dim(first, u.shape, list(range(u.ndim - 1))), "EQ")
    lead_value = b.reduce(b.select(at_first, u, b.full_like(u, 0.0)), [u.ndim - 1])
    flip = b.select(b.compare(lead_value, 0.0, "LT"), b.full_like(lead_value, -1.0), b.full_like(lead_value, 1.0))
    return b.mul(u, b.broadcast_in_dim(flip, u.shape, list(range(u.ndim - 1)))), lam


@lowers(syevd)
def _syevd_lower(ctx, p, a):
    return list(eigh(ctx.b, a))


@differentiable(syevd, ("ograd0", "ograd1", "out0", "out1"))
def _syevd_grad(ctx, p, du, dl, u, lam):
    """dA = U^T Y U, Y = SyevdBackHelper(dU U^T, L, dL): off the diagonal (X_ij - X_ji) /
    (2 max(L_i - L_j, eps)) for i > j, mirrored; dL on the diagonal."""
    b = ctx.b
    n = u.shape[-1]
    if n == 1:      # dA = dL (U = 1); the general form's 1x1 products hit an IREE 3.13 partitioning bug
        return [b.reshape(dl, u.shape)]
    x = matmul(b, du, u, False, True)
    nd = u.ndim
    li = b.broadcast_in_dim(lam, u.shape, list(range(nd - 2)) + [nd - 2])
    lj = b.broadcast_in_dim(lam, u.shape, list(range(nd - 2)) + [nd - 1])
    eps = 1e-30 if u.dtype == np.float32 else 1e-100
    gap = b.mul(b.max(b.sub(li, lj), eps), 2.0)
    below = b.broadcast_in_dim(b.compare(b.iota((n, n), 0), b.iota((n, n), 1), "GT"), u.shape, [nd - 2, nd - 1])
    low = b.select(below, b.div(b.sub(x, swap_last(b, x)), gap), b.full_like(x, 0.0))
    diag = b.broadcast_in_dim(b.compare(b.iota((n, n), 0), b.iota((n, n), 1), "EQ"), u.shape, [nd - 2, nd - 1])
    y = b.add(b.add(low, swap_last(b, low)), b.select(diag, b.broadcast_in_dim(dl, u.shape, list(range(nd - 1))),
                                                      b.full_like(x, 0.0)))
    return [matmul(b, matmul(b, u, y, True, False), u)]
