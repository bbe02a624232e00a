"""BatchNorm's batch statistics of a channels-last value as a call of the AVX-512 kernel
(``aotexec_colstats_workgroup``): one pass over memory for the mean and the variance.

``ops.norm``'s own form sums x for the mean, then the squared deviations: IREE 3.13 stores the
deviations' squares (or the normalized output beside them) for a reduction of its own, so a
layer's statistics read and wrote its map four to five times. The kernel writes each row
block's mean and sum of squared deviations from it (the block stays in L2 between its two
passes), and a one-workgroup call combines the blocks with Chan et al.'s formula, which keeps
the centered sums' accuracy (IREE 3.13 failed to distribute that small reduction as StableHLO
in ResNet-18's forward: "write affecting operations on global resources").
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..mlir_values import Value
from ..symbolic import any_dynamic
from . import executable

if TYPE_CHECKING:
    from ..emitter import Emitter

# floats of a row block (it stays in L2 between the kernel's two passes over it)
BLOCK_FLOATS = 1 << 16
MIN_BLOCK_ROWS = 16
# smaller maps stay with IREE (its reductions are cheap there, a dispatch is not)
MIN_FLOATS = 1 << 16


def _blocks(b: "Emitter", *xs: Value) -> tuple[int, int, int, int] | None:
    """(rows, channels, rows per block, blocks) of same-shaped ``xs`` the kernels take, else None."""
    x = xs[0]
    if b.kernels is None or x.ndim < 2 or any(v.dtype != np.float32 or any_dynamic(v.shape) for v in xs):
        return None
    c = int(x.shape[-1])
    r = int(np.prod(x.shape[:-1]))
    if r * c < MIN_FLOATS:
        return None
    rows = min(r, max(MIN_BLOCK_ROWS, BLOCK_FLOATS // c))
    return r, c, rows, -(-r // rows)


def _two_rows(b: "Emitter", both: Value) -> tuple[Value, Value]:
    """The two rows of a (2, C) kernel result."""
    c = int(both.shape[1])
    return b.reshape(b.slice(both, (0, 0), (1, c)), (c,)), b.reshape(b.slice(both, (1, 0), (2, c)), (c,))


def batch_stats(b: "Emitter", x: Value) -> tuple[Value, Value] | None:
    """(mean, biased variance) over all axes but the last of ``x`` (rows x channels, row-major);
    None where the kernel does not take it (no kernels, not f32, dynamic or small)."""
    shape = _blocks(b, x)
    if shape is None:
        return None
    r, c, rows, groups = shape
    stats = executable.dispatch(b, "colstats", (1, groups, 1), [x], [r, c, rows], (groups, 2, c))
    return _two_rows(b, executable.dispatch(b, "colstats_combine", (1, 1, 1), [stats], [r, c, rows], (2, c)))


def grad_sums(b: "Emitter", g: Value, x: Value, mean: Value,
              relu: tuple[Value, Value] | None = None) -> tuple[Value, Value] | None:
    """BatchNorm's (sum g, sum g * (x - mean)) over all axes but the last of same-shaped ``g``
    and ``x``, in one pass over both (IREE 3.13 stored g * xhat beside g and xhat for two
    reductions of their own); None where the kernels do not take it. ``relu``: (scale, shift),
    ``g`` is the output gradient of the ReLU after the layer, which the kernel masks where
    (x - mean) * scale + shift is not positive (``ops.norm``'s BatchNorm-ReLU gradient)."""
    shape = _blocks(b, g, x)
    if shape is None:
        return None
    r, c, rows, groups = shape
    if relu is None:
        parts = executable.dispatch(b, "bngrad_sums", (1, groups, 1), [g, x, mean], [r, c, rows], (groups, 2 * c))
    else:
        affine = b.concatenate([b.reshape(v, (1, c)) for v in (mean, *relu)], 0)
        parts = executable.dispatch(b, "bnrelu_grad_sums", (1, groups, 1), [g, x, affine], [r, c, rows],
                                    (groups, 2 * c))
    return _two_rows(b, executable.dispatch(b, "sum_parts", (1, 1, 1), [parts], [groups, 2 * c], (2, c)))
