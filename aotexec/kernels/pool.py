"""Max pooling's input gradient, channels-last, as a call of the AVX-512 kernel
(``aotexec_maxpool_grad_workgroup``): one pass over the input and the gradient per window.

IREE 3.13 compiles neither select_and_scatter with overlapping windows nor a sum of
interior-padded slices, so ``ops.pool``'s own form takes a strided slice per window offset
and scatters the picks back one axis at a time: about twenty dispatches that move ~40 times
the input's bytes (ResNet-18's 3x3/2 pool at batch 16: 10% of a training step).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..mlir_values import Value
from ..symbolic import any_dynamic
from . import executable

if TYPE_CHECKING:
    from ..emitter import Emitter


def max_pool_grad(b: "Emitter", x: Value, g: Value, kernel: Sequence[int], stride: Sequence[int],
                  pad: Sequence[int]) -> Value | None:
    """d x (N, H, W, C) of the 2-D max pooling of ``x`` whose output gradient is ``g`` (N, OH, OW,
    C), windows of ``kernel`` every ``stride`` from ``-pad``; None where the kernel does not
    take it (no kernels, not f32, dynamic shapes)."""
    if b.kernels is None or x.dtype != np.float32 or g.dtype != np.float32 or any_dynamic((*x.shape, *g.shape)):
        return None
    if max(*kernel, *stride, *pad) > 255 or min(pad) < 0:
        return None
    n, h, w, c = (int(d) for d in x.shape)
    _, oh, ow, _ = (int(d) for d in g.shape)
    geom = kernel[0] | kernel[1] << 8 | stride[0] << 16 | stride[1] << 24 | pad[0] << 32 | pad[1] << 40
    return executable.dispatch(b, "maxpool_grad", (1, n, 1), [x, g], [n, h, w, c, oh, ow, geom],
                               (n, h, w, c))
