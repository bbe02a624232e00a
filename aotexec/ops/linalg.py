"""MXNet 1.9.1's linear-algebra operators that need no factorization (src/operator/tensor/la_op.h,
la_op-inl.h): gemm, gemm2, syrk, trmm, sumlogdiag, extractdiag, makediag, extracttrian,
maketrian (``mx.sym.linalg.*``, registered as ``_linalg_*`` with MXNet's ``linalg_*`` aliases).

Matrices are the last two axes (gemm / gemm2: ``axis`` names the row axis, the last is the
column axis), every other axis a batch axis. Each op's parameters, shape rule, lowering and
gradient (la_op-inl.h's *_backward formulas) stand together.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..emitter import scatter_add_rows
from .registry import define, differentiable, lowers
from .rules import known, same_dtype, shape_str


def _linalg(name: str, **kw):
    return define(f"_linalg_{name}", f"linalg_{name}", hint=name, infer_type=same_dtype, **kw)


# products and factorizations are what backward keeps rather than recomputes (passes.mirror)
EXPENSIVE = dict(mirror_kept=True, matmul_like=True)


def square_rule(outputs, message: str = "Input A's last two dimension must be equal",
                rank_message: str | None = None):
    """The shape rule of an op on square matrices: ``outputs(a)`` lists its output shapes from the
    input's; ``rank_message`` (when given) rejects inputs of fewer than two axes."""
    def rule(p, ins, outs):
        a = ins[0]
        if not known(a):
            return ins, outs
        if len(a) < 2:
            if rank_message:
                raise ValueError(rank_message)
            return ins, outs
        if a[-2] != a[-1]:
            raise ValueError(message)
        return ins, outputs(tuple(a))
    return rule


def identity(b, shape, dtype):
    """Identity matrices of ``shape`` (..., n, n)."""
    n = shape[-1]
    eye = b.convert(b.compare(b.iota((n, n), 0), b.iota((n, n), 1), "EQ"), dtype)
    return b.broadcast_in_dim(eye, tuple(shape), [len(shape) - 2, len(shape) - 1])


def lead_zeros(x) -> list[int]:
    """Zero starts for the batch axes of a (..., rows, cols) value."""
    return [0] * (x.ndim - 2)


def swap_last(b, x):
    perm = list(range(x.ndim))
    perm[-2:] = perm[-1], perm[-2]
    return b.transpose(x, perm)


def matmul(b, x, y, tx: bool = False, ty: bool = False):
    """op(x) @ op(y) over the last two axes, the others batch axes."""
    n = x.ndim
    batch = list(range(n - 2))
    return b.dot_general(x, y, contract=([n - 2 if tx else n - 1], [n - 1 if ty else n - 2]), batch=(batch, batch))


# --- gemm (alpha op(A) op(B) + beta C) and gemm2 (alpha op(A) op(B)) --------------------------
@dataclass(frozen=True)
class GemmParam:
    transpose_a: bool = False
    transpose_b: bool = False
    alpha: float = 1.0
    beta: float = 1.0
    axis: int = -2


@dataclass(frozen=True)
class Gemm2Param:
    transpose_a: bool = False
    transpose_b: bool = False
    alpha: float = 1.0
    axis: int = -2


def _gemm_shape(p, ins, outs):
    """LaMatrixMultMacOpShape: batch axes equal, inner dimensions equal; gemm's C is the output's shape."""
    a, c = ins[0], ins[1]
    if not (known(a) and known(c)) or len(a) < 2 or len(a) != len(c):
        return ins, outs
    nd = len(a)
    axis = p.axis + nd if p.axis < 0 else p.axis
    if not 0 <= axis < nd - 1:
        raise ValueError(f"Invalid row axis ({p.axis})")
    if any(a[i] != c[i] for i in range(nd - 1) if i != axis):
        raise ValueError("Shapes of inputs 0, 1 must be the same, except on row/col axis")
    if (a[axis] if p.transpose_a else a[-1]) != (c[-1] if p.transpose_b else c[axis]):
        raise ValueError(f"Incompatible matrix dimensions for multiplication: {shape_str(a)} x {shape_str(c)}")
    out = list(a)
    out[axis] = a[-1] if p.transpose_a else a[axis]
    out[-1] = c[axis] if p.transpose_b else c[-1]
    out = tuple(out)
    return ([a, c, out] if len(ins) > 2 else [a, c]), [out]


def _rows_second_last(x_ndim: int, axis: int) -> list[int]:
    """The permutation moving row axis ``axis`` next to the last (column) axis."""
    return [i for i in range(x_ndim - 1) if i != axis] + [axis, x_ndim - 1]


def _canonical(b, p, xs):
    """``xs`` with the row axis second to last (a transpose when ``axis`` is not -2)."""
    nd = xs[0].ndim
    perm = _rows_second_last(nd, p.axis % nd)
    if perm == list(range(nd)):
        return xs, lambda y: y
    inverse = [perm.index(i) for i in range(nd)]
    return [b.transpose(x, perm) for x in xs], lambda y: b.transpose(y, inverse)


gemm = _linalg("gemm", **EXPENSIVE, params=GemmParam, inputs=["A", "B", "C"], infer_shape=_gemm_shape)
gemm2 = _linalg("gemm2", **EXPENSIVE, params=Gemm2Param, inputs=["A", "B"], infer_shape=_gemm_shape)


@lowers(gemm)
def _gemm_lower(ctx, p: GemmParam, a, c, d):
    b = ctx.b
    (a, c, d), back = _canonical(b, p, [a, c, d])
    return back(b.add(b.mul(matmul(b, a, c, p.transpose_a, p.transpose_b), p.alpha), b.mul(d, p.beta)))


@lowers(gemm2)
def _gemm2_lower(ctx, p: Gemm2Param, a, c):
    b = ctx.b
    (a, c), back = _canonical(b, p, [a, c])
    return back(b.mul(matmul(b, a, c, p.transpose_a, p.transpose_b), p.alpha))


def _gemm_input_grads(b, p, g, a, c):
    """gemm_backward's dA, dB (canonical layout)."""
    ta, tb = p.transpose_a, p.transpose_b
    da = matmul(b, c, g, tb, True) if ta else matmul(b, g, c, False, not tb)
    dc = matmul(b, g, a, True, ta) if tb else matmul(b, a, g, not ta, False)
    return b.mul(da, p.alpha), b.mul(dc, p.alpha)


@differentiable(gemm, ("ograd0", "in0", "in1"))
def _gemm_grad(ctx, p: GemmParam, g, a, c):
    b = ctx.b
    (g, a, c), back = _canonical(b, p, [g, a, c])
    da, dc = _gemm_input_grads(b, p, g, a, c)
    return [back(da), back(dc), back(b.mul(g, p.beta))]


@differentiable(gemm2, ("ograd0", "in0", "in1"))
def _gemm2_grad(ctx, p: Gemm2Param, g, a, c):
    b = ctx.b
    (g, a, c), back = _canonical(b, p, [g, a, c])
    return [back(v) for v in _gemm_input_grads(b, p, g, a, c)]


# --- syrk: alpha A A^T (transpose: alpha A^T A) ----------------------------------------------
@dataclass(frozen=True)
class SyrkParam:
    transpose: bool = False
    alpha: float = 1.0


def _syrk_shape(p: SyrkParam, ins, outs):
    a = ins[0]
    if not known(a) or len(a) < 2:
        return ins, outs
    n = a[-1] if p.transpose else a[-2]
    return ins, [tuple(a[:-2]) + (n, n)]


syrk = _linalg("syrk", **EXPENSIVE, params=SyrkParam, inputs=["A"], infer_shape=_syrk_shape)


@lowers(syrk)
def _syrk_lower(ctx, p: SyrkParam, a):
    return ctx.b.mul(matmul(ctx.b, a, a, p.transpose, not p.transpose), p.alpha)


@differentiable(syrk, ("ograd0", "in0"))
def _syrk_grad(ctx, p: SyrkParam, g, a):
    b = ctx.b
    sym = b.add(g, swap_last(b, g))
    return [b.mul(matmul(b, a, sym) if p.transpose else matmul(b, sym, a), p.alpha)]


# --- trmm: alpha op(tri(A)) B (rightside: alpha B op(tri(A))) --------------------------------
@dataclass(frozen=True)
class TrmmParam:
    transpose: bool = False
    rightside: bool = False
    lower: bool = True
    alpha: float = 1.0


def triangular_pair_shape(p: TrmmParam, ins, outs):
    a, c = ins
    if not (known(a) and known(c)) or len(a) < 2 or len(a) != len(c):
        return ins, outs
    if a[-2] != a[-1]:
        raise ValueError("First operand must be a tensor of square matrices")
    if a[:-2] != c[:-2]:
        raise ValueError("Shapes of inputs 0, 1 must be the same, except on last two dimensions")
    if (c[-1] if p.rightside else c[-2]) != a[-1]:
        raise ValueError(f"Incompatible matrix dimensions for multiplication: {shape_str(a)} x {shape_str(c)}")
    return ins, [tuple(c)]


trmm = _linalg("trmm", **EXPENSIVE, params=TrmmParam, inputs=["A", "B"], infer_shape=triangular_pair_shape)


def triangle(b, a, lower: bool, offset: int = 0):
    """``a`` with the entries off its lower (upper) triangle zeroed (ZeroTriangular)."""
    n = a.shape[-1]
    rows, cols = b.iota((n, n), 0), b.iota((n, n), 1)
    keep = b.compare(b.sub(cols, rows), offset, "LE" if lower else "GE")
    keep = b.broadcast_in_dim(keep, a.shape, [a.ndim - 2, a.ndim - 1])
    return b.select(keep, a, b.full_like(a, 0.0))


def triangular_product(b, a, c, alpha: float, rightside: bool, lower: bool, transpose: bool):
    """linalg_batch_trmm: alpha op(tri(a)) c (rightside: alpha c op(tri(a)))."""
    t = triangle(b, a, lower)
    y = matmul(b, c, t, False, transpose) if rightside else matmul(b, t, c, transpose, False)
    return b.mul(y, alpha) if alpha != 1.0 else y


def gemm_product(b, x, y, alpha: float, tx: bool, ty: bool):
    """la_op's gemm::op with beta 0: alpha op(x) op(y)."""
    return b.mul(matmul(b, x, y, tx, ty), alpha)


@lowers(trmm)
def _trmm_lower(ctx, p: TrmmParam, a, c):
    return triangular_product(ctx.b, a, c, p.alpha, p.rightside, p.lower, p.transpose)


def triangular_factor_grad(b, p: TrmmParam, g, c, scale: float):
    """d tri(A) of trmm / trsm from the head-side ``g`` and the other operand ``c`` (la_op-inl.h:
    g c^T-like on the side the triangle multiplies from), off-triangle entries zeroed."""
    if p.rightside == p.transpose:
        da = gemm_product(b, g, c, scale, p.transpose, not p.transpose)
    else:
        da = gemm_product(b, c, g, scale, not p.transpose, p.transpose)
    return triangle(b, da, p.lower)


@differentiable(trmm, ("ograd0", "in0", "in1"))
def _trmm_grad(ctx, p: TrmmParam, g, a, c):
    b = ctx.b
    return [triangular_factor_grad(b, p, g, c, p.alpha),
            triangular_product(b, a, g, p.alpha, p.rightside, p.lower, not p.transpose)]


# --- sumlogdiag: sum of the logs of the diagonal ---------------------------------------------
sumlogdiag = _linalg("sumlogdiag", inputs=["A"], infer_shape=square_rule(
    lambda a: [a[:-2] or (1,)], "sumlogdiag operator requires square matrices as input."))


def _diagonal_mask(b, shape, offset: int = 0):
    n, m = shape[-2], shape[-1]
    eq = b.compare(b.sub(b.iota((n, m), 1), b.iota((n, m), 0)), offset, "EQ")
    return b.broadcast_in_dim(eq, shape, [len(shape) - 2, len(shape) - 1])


@lowers(sumlogdiag)
def _sumlogdiag_lower(ctx, p, a):
    b = ctx.b
    s = b.reduce(extract_diagonal(b, b.log(a), 0), [a.ndim - 2])
    return b.reshape(s, ctx.out_shapes[0])


@differentiable(sumlogdiag, ("ograd0", "in0"))
def _sumlogdiag_grad(ctx, p, g, a):
    b = ctx.b
    gb = b.broadcast_in_dim(b.reshape(g, a.shape[:-2]), a.shape, list(range(a.ndim - 2)))
    return [b.select(_diagonal_mask(b, a.shape), b.div(gb, a), b.full_like(a, 0.0))]


# --- extractdiag / makediag ------------------------------------------------------------------
@dataclass(frozen=True)
class DiagParam:
    offset: int = 0


def _square_check(a, offset: int):
    if len(a) < 2:
        raise ValueError("Input operand must be a tensor of matrices")
    if a[-2] != a[-1]:
        raise ValueError("Input operand must be a tensor of square matrices")
    if a[-1] - abs(offset) <= 0:
        raise ValueError(f"Illegal offset {offset} for diag/trian extraction of matrix with dimension {len(a)}")


def _extractdiag_shape(p: DiagParam, ins, outs):
    a = ins[0]
    if not known(a):
        return ins, outs
    _square_check(a, p.offset)
    return ins, [tuple(a[:-2]) + (a[-1] - abs(p.offset),)]


def _makediag_shape(p: DiagParam, ins, outs):
    a = ins[0]
    if not known(a) or not a:
        return ins, outs
    n = a[-1] + abs(p.offset)
    return ins, [tuple(a[:-1]) + (n, n)]


extractdiag = _linalg("extractdiag", params=DiagParam, inputs=["A"], infer_shape=_extractdiag_shape)
makediag = _linalg("makediag", params=DiagParam, inputs=["A"], infer_shape=_makediag_shape)


def extract_diagonal(b, a, offset: int):
    """(..., n, n) -> (..., n - |offset|): entry i at row i - min(offset, 0), column i + max(offset, 0)."""
    n, m = a.shape[-1], a.shape[-1] - abs(offset)
    top = max(-offset, 0)
    rows = b.slice(a, [0] * a.ndim, tuple(a.shape[:-2]) + (top + m, n)) if top + m < n else a
    rows = b.slice(rows, [0] * (a.ndim - 2) + [top, 0], rows.shape) if top else rows
    kept = b.select(_diagonal_mask(b, rows.shape, max(offset, 0)), rows, b.full_like(rows, 0.0))
    return b.reduce(kept, [a.ndim - 1])


def make_diagonal(b, v, offset: int):
    """(..., m) -> (..., m + |offset|, m + |offset|) with ``v`` on diagonal ``offset``, zeros elsewhere."""
    m = v.shape[-1]
    n = m + abs(offset)
    col = b.pad(v, 0.0, [0] * (v.ndim - 1) + [max(-offset, 0)], [0] * (v.ndim - 1) + [max(offset, 0)])
    shape = tuple(v.shape[:-1]) + (n, n)
    rows = b.broadcast_in_dim(col, shape, list(range(v.ndim - 1)) + [v.ndim - 1])
    return b.select(_diagonal_mask(b, shape, offset), rows, b.full_like(rows, 0.0))


@lowers(extractdiag)
def _extractdiag_lower(ctx, p: DiagParam, a):
    return extract_diagonal(ctx.b, a, p.offset)


@lowers(makediag)
def _makediag_lower(ctx, p: DiagParam, v):
    return make_diagonal(ctx.b, v, p.offset)


@differentiable(extractdiag, ("ograd0",))
def _extractdiag_grad(ctx, p: DiagParam, g):
    return [make_diagonal(ctx.b, g, p.offset)]


@differentiable(makediag, ("ograd0",))
def _makediag_grad(ctx, p: DiagParam, g):
    return [extract_diagonal(ctx.b, g, p.offset)]


# --- extracttrian / maketrian: a triangle as a row-major vector (CopyTrian) ------------------
@dataclass(frozen=True)
class TrianParam:
    offset: int = 0
    lower: bool = True


def _trian_size(n: int, offset: int) -> int:
    k = n - abs(offset)
    return k * (k + 1) // 2


def _extracttrian_shape(p: TrianParam, ins, outs):
    a = ins[0]
    if not known(a):
        return ins, outs
    _square_check(a, p.offset)
    return ins, [tuple(a[:-2]) + (_trian_size(a[-1], p.offset),)]


def _maketrian_shape(p: TrianParam, ins, outs):
    a = ins[0]
    if not known(a) or not a:
        return ins, outs
    m = int((8 * a[-1] + 1) ** 0.5 - 1.0) // 2
    while (m + 1) * (m + 2) // 2 <= a[-1]:
        m += 1
    if m * (m + 1) // 2 != a[-1]:
        raise ValueError("Input tensor of maketrian has an invalid dimension for the last axis.")
    n = m + abs(p.offset)
    return ins, [tuple(a[:-1]) + (n, n)]


extracttrian = _linalg("extracttrian", params=TrianParam, inputs=["A"], infer_shape=_extracttrian_shape)
maketrian = _linalg("maketrian", params=TrianParam, inputs=["A"], infer_shape=_maketrian_shape)


def _trian_index(b, n: int, p: TrianParam):
    """(n, n) int32: each matrix entry's position in the triangle vector, or the vector's length
    (one past its end) off the triangle. CopyTrian: the upper triangle (offset > 0, or 0 and not
    lower) in transposed coordinates, rows shifted by |offset|, index row (row + 1) / 2 + col."""
    row, col = b.iota((n, n), 0), b.iota((n, n), 1)
    if p.offset > 0 or (p.offset == 0 and not p.lower):
        row, col = col, row
    row = b.sub(row, abs(p.offset))
    idx = b.add(b.div(b.mul(row, b.add(row, 1)), 2), col)
    size = _trian_size(n, p.offset)
    return b.select(b.compare(row, col, "GE"), idx, b.full_like(idx, size))


def make_triangle(b, v, p: TrianParam, n: int):
    """(..., m) -> (..., n, n): the triangle filled from ``v``, zeros elsewhere."""
    lead = v.ndim - 1
    padded = b.pad(v, 0.0, [0] * v.ndim, [0] * lead + [1])            # index m reads the zero
    return b.gather_rows(padded, _trian_index(b, n, p), lead)


def extract_triangle(b, a, p: TrianParam):
    """(..., n, n) -> (..., m): the triangle's entries in CopyTrian's order."""
    n, lead = a.shape[-1], a.ndim - 2
    size = _trian_size(n, p.offset)
    flat = b.reshape(a, tuple(a.shape[:-2]) + (n * n,))
    idx = b.reshape(_trian_index(b, n, p), (n * n,))
    out = scatter_add_rows(b, tuple(a.shape[:-2]) + (size + 1,), idx, flat, lead)
    return b.slice(out, [0] * (lead + 1), tuple(a.shape[:-2]) + (size,))


@lowers(extracttrian)
def _extracttrian_lower(ctx, p: TrianParam, a):
    return extract_triangle(ctx.b, a, p)


@lowers(maketrian)
def _maketrian_lower(ctx, p: TrianParam, v):
    return make_triangle(ctx.b, v, p, ctx.out_shapes[0][-1])


@differentiable(extracttrian, ("ograd0",))
def _extracttrian_grad(ctx, p: TrianParam, g):
    return [make_triangle(ctx.b, g, p, ctx.fwd_in_shapes[0][-1])]


@differentiable(maketrian, ("ograd0",))
def _maketrian_grad(ctx, p: TrianParam, g):
    return [extract_triangle(ctx.b, g, p)]
