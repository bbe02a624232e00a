"""f32 matmuls as calls of the AVX-512 kernel (``avx512_kernels.c``) instead of IREE's codegen.

``Emitter.dot_general`` asks ``call`` first when its module may use kernels: 2-D contractions
and 3-D ones with a leading batch dimension, static and f32, big enough that the kernel's
speed pays for what it gives up (IREE fuses neither producers nor epilogues into an external
dispatch: an elementwise consumer becomes a pass of its own). The B operand is packed into
32-column panels with StableHLO ops, which IREE hoists into the module's initializer when B is
a resident weight; A is passed as it is (row-major or transposed).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..mlir_values import Value
from ..symbolic import any_dynamic
from . import executable
from .code import Kernels

if TYPE_CHECKING:
    from ..emitter import Emitter

MR, NR = 14, 32
# rows of C per workgroup (whole register tiles) and 32-column panels per workgroup
ROWS_PER_GROUP = 8 * MR
PANELS_PER_GROUP = 2
# smaller contractions stay with IREE: the dispatch costs more than the kernel saves there
MIN_MACS = 1 << 21
MIN_ROWS = 2 * MR
MIN_COLS = NR
MIN_DEPTH = 16
# a product whose elementwise consumers IREE would fuse (a 1x1 layer's BatchNorm and ReLU)
# pays a pass over it for the call: the kernel's gain grows with the depth K, that pass not
# (MobileNet v1 / v2 b16 inference 4% / 15% slower with every 1x1 layer through the kernel)
FUSED_MIN_DEPTH = 256
# ... and from this depth in inference functions, where BatchNorm / ReLU fold into the call
# (``epilogue``): ResNet-50 b16 inference 7-13% faster than with 256; in training (nothing
# folds: batch statistics, saved activations) 12% slower
FOLDED_MIN_DEPTH = 64


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def panels(n: int) -> int:
    """32-column panels of B for ``n`` columns (the last one zero-padded)."""
    return ceil_div(n, NR)


def fused_min_depth(kernels: Kernels) -> int:
    """The depth from which a product whose consumers IREE would fuse goes to the kernel."""
    return FOLDED_MIN_DEPTH if kernels.epilogues else max(FUSED_MIN_DEPTH, kernels.deep_min_depth)


def call(b: "Emitter", x: Value, y: Value, ca, cb, ba, bb, alone: bool = False) -> Value | None:
    """``x`` . ``y`` contracted as ``stablehlo.dot_general`` would, through the kernel; None
    where the kernel does not take this contraction. ``alone``: see ``Emitter.dot_general``."""
    if x.dtype != np.float32 or y.dtype != np.float32 or any_dynamic((*x.shape, *y.shape)):
        return None
    batched = list(ba) == [0] and list(bb) == [0]
    if not (batched or not (ba or bb)) or x.ndim != y.ndim or x.ndim != 2 + batched:
        return None
    r = int(batched)
    if list(ca) not in ([r], [r + 1]) or list(cb) not in ([r], [r + 1]):
        return None
    a_trans = ca[0] == r                     # A stored (K, M)
    k, m = (x.shape[r], x.shape[r + 1]) if a_trans else (x.shape[r + 1], x.shape[r])
    b_rows = cb[0] == r                      # B stored (K, N), else (N, K)
    n = y.shape[r + 1] if b_rows else y.shape[r]
    z = x.shape[0] if batched else 1
    if not takes(b, z, m, n, k, alone):
        return None
    packed = pack_columns(b, y, k, n, batched, b_rows)
    return _dispatch(b, x, packed, z, m, n, k, a_trans, batched)


def takes(b: "Emitter", z: int, m: int, n: int, k: int, alone: bool = False) -> bool:
    """Whether the kernel takes ``z`` static f32 (M x K) (K x N) products (``call``)."""
    if b.kernels is None or not alone and not (b.kernels.deep_products or b.kernels.epilogues):
        return False
    return not (m < MIN_ROWS or n < MIN_COLS or k < (MIN_DEPTH if alone else fused_min_depth(b.kernels))
                or z * m * n * k < MIN_MACS)


def packed_product(b: "Emitter", x: Value, packed: Value, n: int, a_trans: bool = False) -> Value:
    """The batched product (Z, M, K) x (Z, K, N) of ``x`` (stored (Z, K, M) with ``a_trans``)
    with B already as ``pack_columns`` lays it out (a producer that writes panels saves the
    packing pass); (Z, M, N)."""
    z, m, k = (int(d) for d in x.shape)
    if a_trans:
        k, m = m, k
    return _dispatch(b, x, packed, z, m, n, k, a_trans, True)


def pack_columns(b: "Emitter", y: Value, k: int, n: int, batched: bool = False, b_rows: bool = True) -> Value:
    """B (``y``: (.., K, N) when ``b_rows``, else (.., N, K)) as [Z][ceil(N/32)][K][32],
    zero-padded past N, flattened."""
    p = panels(n)
    lead = (y.shape[0],) if batched else ()
    r = len(lead)
    if b_rows:      # (.., K, N) -> (.., K, P, 32) -> (.., P, K, 32)
        padded = b.pad(y, 0.0, (0,) * (r + 2), (0,) * (r + 1) + (p * NR - n,))
        packed = b.transpose(b.reshape(padded, lead + (k, p, NR)), tuple(range(r)) + (r + 1, r, r + 2))
    else:           # (.., N, K) -> (.., P, 32, K) -> (.., P, K, 32)
        padded = b.pad(y, 0.0, (0,) * (r + 2), (0,) * r + (p * NR - n, 0))
        packed = b.transpose(b.reshape(padded, lead + (p, NR, k)), tuple(range(r)) + (r, r + 2, r + 1))
    return b.reshape(packed, (int(np.prod(packed.shape)),))


def _dispatch(b: "Emitter", x: Value, packed: Value, z: int, m: int, n: int, k: int, a_trans: bool,
              batched: bool) -> Value:
    rows = min(ROWS_PER_GROUP, ceil_div(m, MR) * MR)
    groups = (ceil_div(panels(n), PANELS_PER_GROUP), ceil_div(m, rows), z)
    return executable.dispatch(b, "sgemm", groups, [x, packed], [m, n, k, int(a_trans), rows, PANELS_PER_GROUP, n, 0],
                               ((z,) if batched else ()) + (m, n))
