"""A depthwise 3x3 convolution's weight gradient, channels-last, as a call of the AVX-512
kernel (``aotexec_dwgrad_workgroup``): one pass over the input and the output gradient.

``ops.conv``'s own form multiplies the output gradient with each of the nine input windows
and sums each product over batch and space: IREE 3.13 stores every product before summing it
(the window is a slice of the padded input, which it collapses differently from the
reduction), so a layer moved ~27 times its map (MobileNet v1 b16 training: 11% of the step).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..mlir_values import Value
from ..symbolic import any_dynamic
from . import executable

if TYPE_CHECKING:
    from ..emitter import Emitter

# row blocks per image: enough workgroups for the threads at small batches
MIN_WORKGROUPS = 8


def weight_grad(b: "Emitter", x: Value, g: Value, kernel: Sequence[int], stride: Sequence[int],
                dilate: Sequence[int], pad: Sequence[int]) -> Value | None:
    """d weight (C, 1, 3, 3) of the depthwise convolution of ``x`` (N, H, W, C) whose output
    gradient is ``g`` (N, OH, OW, C); None where the kernel does not take it (no kernels, not
    3x3, not f32, dynamic shapes)."""
    if b.kernels is None or tuple(kernel) != (3, 3) or x.dtype != np.float32 or g.dtype != np.float32 \
            or any_dynamic((*x.shape, *g.shape)):
        return None
    if max(*stride, *dilate, *pad) > 255 or min(*stride, *dilate) < 1 or min(pad) < 0:
        return None
    n, h, w, c = (int(d) for d in x.shape)
    _, oh, ow, _ = (int(d) for d in g.shape)
    blocks = min(oh, -(-MIN_WORKGROUPS // n))
    rows = -(-oh // blocks)
    blocks = -(-oh // rows)
    geom = stride[0] | stride[1] << 8 | dilate[0] << 16 | dilate[1] << 24 | pad[0] << 32 | pad[1] << 40
    parts = executable.dispatch(b, "dwgrad", (blocks, n, 1), [x, g], [n, h, w, c, oh, ow, geom, rows],
                                (n * blocks, 9, c))
    return b.reshape(b.transpose(b.reduce(parts, [0], "add"), (1, 0)), (c, 1, 3, 3))
