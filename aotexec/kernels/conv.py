"""2-D f32 convolutions, channels-last, as calls of the AVX-512 kernel (``avx512_kernels.c``):
an implicit GEMM with the zero padding applied inside, no im2col copy and no padded input.

``Emitter.conv_nhwc`` asks ``call`` first when its module may use kernels. IREE 3.13's direct
convolutions ran at about half of this CPU's FMA peak (docs/PERFORMANCE.md); the kernel's
14-pixel x 32-channel tile is the matmul kernel's. What it gives up: IREE fuses neither the
input's padding nor an elementwise consumer (BatchNorm, ReLU) into an external dispatch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..mlir_values import Value
from ..symbolic import any_dynamic
from . import executable
from .matmul import MR, ceil_div, pack_columns, panels

if TYPE_CHECKING:
    from ..emitter import Emitter

# output pixels per workgroup (whole output rows) and 32-channel panels per workgroup
PIXELS_PER_GROUP = 8 * MR
PANELS_PER_GROUP = 2
# smaller or shallower convolutions stay with IREE, as do 1x1 ones (matmuls to IREE, with
# their epilogues fused)
MIN_MACS = 1 << 21
MIN_COLS = 16
MIN_DEPTH = 64
# ... and from this depth where IREE's form would compute extra output columns and slice them off
# (``ops.conv_forms.conv_nhwc_wide``: its bias / BatchNorm and ReLU then a pass of their own,
# folded into the kernel's epilogue instead). SqueezeNet's 3x3/2 stem (depth 27, 111 wide): b1 /
# b16 inference 0.866 / 0.962; every shallow layer (MobileNet's and VGG's stems, IREE fusing
# their BatchNorm and ReLU) 1.01-1.02 slower
MIN_DEPTH_SLICED = 27
# weight gradients: output pixels per chunk (a chunk of the packed gradient stays in L2 while
# every tile of a kernel row reads it)
WGRAD_CHUNK_PIXELS = 1024
# the kernel pads inside: leading pads up to 127 (signed bytes of ``geom``), inputs of at least
# PAD_INSIDE_CHANNELS (a border tile sets up a pointer per pixel and kernel offset: with 16
# channels that cost more than a padded copy of the input); False pads every input beforehand
PAD_INSIDE = True
PAD_INSIDE_CHANNELS = 32
MAX_PAD = 127


def takes(b: "Emitter", x: Value, wt_shape: Sequence[int], out_shape: Sequence[int], stride, lhs_dilation=(1, 1),
          rhs_dilation=(1, 1), groups: int = 1, batch_groups: int = 1, sliced: bool = False) -> bool:
    """Whether ``call`` takes the convolution of ``x`` with HWIO weights of ``wt_shape`` (the
    forms built for IREE's codegen, im2col and extra output columns, are then skipped).
    ``sliced``: IREE's form would compute extra output columns (``MIN_DEPTH_SLICED``)."""
    if b.kernels is None or x.dtype != np.float32 or groups != 1 or batch_groups != 1:
        return False
    if any(d != 1 for d in lhs_dilation) or any_dynamic((*x.shape, *wt_shape, *out_shape)):
        return False
    kh, kw, c, o = (int(d) for d in wt_shape)
    n, oh, ow, _ = (int(d) for d in out_shape)
    return ((kh, kw) != (1, 1) and max(kh, kw, *stride, *rhs_dilation) <= 255 and o >= MIN_COLS
            and kh * kw * c >= (MIN_DEPTH_SLICED if sliced else MIN_DEPTH) and n * oh * ow * o * kh * kw * c >= MIN_MACS)


def _geometry(kernel, stride, dilation, pad=(0, 0)) -> int:
    kh, kw = kernel
    return (kh | kw << 8 | stride[0] << 16 | stride[1] << 24 | dilation[0] << 32 | dilation[1] << 40
            | pad[0] << 48 | pad[1] << 56)


def _pads_inside(channels: int, pad) -> bool:
    """Whether the kernel applies these ((top, bottom), (left, right)) pads itself (the trailing
    ones are implied by the output's size)."""
    return (PAD_INSIDE and channels >= PAD_INSIDE_CHANNELS and all(0 <= q[0] <= MAX_PAD for q in pad)
            and all(q[1] >= 0 for q in pad))


def call(b: "Emitter", x: Value, wt: Value, out_shape: Sequence[int], stride, pad, lhs_dilation, rhs_dilation,
         groups: int, batch_groups: int, sliced: bool = False) -> Value | None:
    """The NHWC convolution of ``x`` with HWIO ``wt`` (``Emitter.conv_nhwc``'s arguments)
    through the kernel; None where the kernel does not take it."""
    if wt.dtype != x.dtype or not takes(b, x, wt.shape, out_shape, stride, lhs_dilation, rhs_dilation, groups,
                                        batch_groups, sliced):
        return None
    kh, kw, c, o = (int(d) for d in wt.shape)
    n, oh, ow, _ = (int(d) for d in out_shape)
    if _pads_inside(c, pad):
        lead = (pad[0][0], pad[1][0])
    else:
        x, lead = b.pad(x, 0.0, (0, pad[0][0], pad[1][0], 0), (0, pad[0][1], pad[1][1], 0)), (0, 0)
    _, h, w, _ = x.shape
    packed = pack_columns(b, b.reshape(wt, (kh * kw * c, o)), kh * kw * c, o)
    geom = _geometry((kh, kw), stride, rhs_dilation, lead)
    rows = max(1, PIXELS_PER_GROUP // ow)
    groups_xy = (ceil_div(panels(o), PANELS_PER_GROUP), ceil_div(n * oh, rows), 1)
    return executable.dispatch(b, "conv", groups_xy, [x, packed],
                               [n, h, w, c, oh, ow, o, geom, rows, PANELS_PER_GROUP, o, 0], (n, oh, ow, o))


def takes_weight_grad(b: "Emitter", x: Value, g: Value, kernel, stride, dilation) -> bool:
    """Whether ``weight_grad`` takes the weight gradient of this (ungrouped, NHWC) convolution:
    the kernel reads a kernel row's (kx, c) inputs as consecutive floats, so no column dilation."""
    if b.kernels is None or x.dtype != np.float32 or g.dtype != np.float32 or any_dynamic((*x.shape, *g.shape)):
        return False
    kh, kw = kernel
    n, oh, ow, o = (int(d) for d in g.shape)
    return ((kh, kw) != (1, 1) and dilation[1] == 1 and max(kh, kw, *stride, dilation[0]) <= 255
            and o >= MIN_COLS and n * oh * ow * o * kh * kw * int(x.shape[3]) >= MIN_MACS)


def weight_grad(b: "Emitter", xp: Value, g: Value, kernel, stride, dilation) -> Value:
    """d weight (KH, KW, C, O) of the NHWC convolution of the zero-padded input ``xp`` whose
    head gradient is ``g`` (N, OH, OW, O): ``g`` packed once, every kernel offset's product
    in the kernel (``aotexec_conv_wgrad_workgroup``)."""
    kh, kw = kernel
    n, hp, wp, c = (int(d) for d in xp.shape)
    _, oh, ow, o = (int(d) for d in g.shape)
    packed = pack_columns(b, b.reshape(g, (n * oh * ow, o)), n * oh * ow, o)
    rows = max(1, WGRAD_CHUNK_PIXELS // ow)
    return executable.dispatch(b, "conv_wgrad", (panels(o), kh, 1), [xp, packed],
                               [n, hp, wp, c, oh, ow, o, _geometry(kernel, stride, dilation), rows], (kh, kw, c, o))
