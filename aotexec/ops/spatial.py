"""Spatial rearrangements of NCHW images: Pad, Crop, depth_to_space, space_to_depth (MXNet 1.9.1
src/operator/pad.cc, crop-inl.h, tensor/matrix_op.cc): parameters, shape rule, lowering and
gradient per op.  Each lowers to a fixed number of ops whatever the image size: pads and slices,
one gather per padded axis (edge / reflect), a reshape-transpose-reshape."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from . import hlo
from .params import Shape
from .registry import define, differentiable, lowers
from ..util import is_np_shape
from .rules import dtype_of_first, forward, known, ranked, same_dtype


# --- Pad (src/operator/pad-inl.h): 4-D or 5-D, never the batch or channel axes
@dataclass(frozen=True)
class PadParam:
    mode: Literal["constant", "edge", "reflect"]
    pad_width: Shape
    constant_value: float = 0.0


@forward
def _pad_shape(p: PadParam, data):
    if len(data) not in (4, 5):
        raise ValueError("Current implementation only supports 4-D or 5-D input.")
    if len(p.pad_width) != 2 * len(data):
        raise ValueError("Input shape vs padding spec mismatch.")
    if any(p.pad_width[:4]):
        raise ValueError("Current implementation expects padding on the first two axes to be zero.")
    if p.mode == "reflect" and any(w >= data[i // 2] for i, w in enumerate(p.pad_width)):
        raise ValueError("Current implementation of reflection padding only supports padding sizes smaller "
                         "than the input size.")
    return tuple(d + p.pad_width[2 * i] + p.pad_width[2 * i + 1] for i, d in enumerate(data))


pad = define("Pad", "pad", stateful=True, params=PadParam, infer_shape=_pad_shape, infer_type=same_dtype)


def _source_rows(mode: str, n: int, lo: int, hi: int) -> np.ndarray:
    """For each padded position along an axis of size n, the input row it copies."""
    t = np.arange(-lo, n + hi)
    if mode == "edge":
        return np.clip(t, 0, n - 1).astype(np.int32)
    return np.where(t < 0, -t, np.where(t >= n, 2 * (n - 1) - t, t)).astype(np.int32)   # reflect


def _padded_axes(p: PadParam, shape) -> list[tuple[int, np.ndarray]]:
    return [(i, _source_rows(p.mode, n, p.pad_width[2 * i], p.pad_width[2 * i + 1]))
            for i, n in enumerate(shape) if p.pad_width[2 * i] or p.pad_width[2 * i + 1]]


@lowers(pad)
def _pad_lower(ctx, p: PadParam, x):
    b = ctx.b
    if p.mode == "constant":
        return b.pad(x, p.constant_value, p.pad_width[0::2], p.pad_width[1::2])
    for axis, rows in _padded_axes(p, x.shape):      # one gather of whole rows per padded axis
        x = b.gather_rows(x, b.constant(rows, rows.shape, "int32"), axis)
    return x


@differentiable(pad, ("ograd0",))
def _pad_grad(ctx, p: PadParam, g):
    """The slice of g inside (constant), plus every copied row's gradient added back to its
    source row (edge / reflect: the gathers' scatter-adds, last axis first)."""
    b, shape = ctx.b, tuple(ctx.fwd_in_shapes[0])
    if p.mode == "constant":
        lo = p.pad_width[0::2]
        return [b.slice(g, lo, [a + n for a, n in zip(lo, shape)])]
    axes = _padded_axes(p, shape)
    for axis, rows in reversed(axes):
        target = tuple(shape[i] if i == axis else g.shape[i] for i in range(g.ndim))
        g = hlo.scatter_add_along(b, target, b.constant(rows, rows.shape, "int32"), g, axis)
    return [g]


# --- Crop (src/operator/crop-inl.h): the legacy 4-D crop, to h_w or to a second input's H and W
@dataclass(frozen=True)
class CropParam:
    num_args: int
    offset: Shape = (0, 0)
    h_w: Shape = (0, 0)
    center_crop: bool = False


def _crop_shape(p: CropParam, ins, outs):
    data = ins[0]
    if not known(data) or (p.num_args > 1 and not known(ins[1])):
        return ins, outs
    if len(data) != 4:
        raise ValueError(f"Input data should be 4D in batch-num_filter-y-x, got {data}")
    h, w = (ins[1][2], ins[1][3]) if p.num_args > 1 else tuple(p.h_w)
    if p.num_args == 1 and not (1 <= h <= data[2] and 1 <= w <= data[3]):
        raise ValueError(f"the crop size h_w={p.h_w} must be at least 1 and at most the input's {data[2:]}")
    out = (data[0], data[1], h, w)
    _crop_offset(p, data, out)      # MXNet checks the offset at run time; here, once
    return ins, [out]


def _crop_offset(p: CropParam, data, out) -> tuple[int, int]:
    if data[2] < out[2] or data[3] < out[3]:
        raise ValueError(f"the crop {out[2:]} is larger than the input's {data[2:]}")
    if p.center_crop:
        return (data[2] - out[2]) // 2, (data[3] - out[3]) // 2
    y, x = p.offset
    if not (0 <= y <= data[2] - out[2] and 0 <= x <= data[3] - out[3]):
        raise ValueError(f"offset {p.offset} leaves the input {data[2:]} for a crop of {out[2:]}")
    return y, x


# a second input (crop_like) is read for its shape only and gets a zero gradient
Crop = define("Crop", stateful=True, params=CropParam, variadic="num_args", shape_only_inputs=(1,),
              infer_shape=_crop_shape, infer_type=dtype_of_first)


@lowers(Crop)
def _crop_lower(ctx, p: CropParam, x, *like):
    out = ctx.out_shapes[0]
    y, w = _crop_offset(p, x.shape, out)
    return ctx.b.slice(x, [0, 0, y, w], [out[0], out[1], y + out[2], w + out[3]])


@differentiable(Crop, ("ograd0",))
def _crop_grad(ctx, p: CropParam, g):
    shape = ctx.fwd_in_shapes[0]
    y, x = _crop_offset(p, shape, g.shape)
    high = [0, 0, shape[2] - y - g.shape[2], shape[3] - x - g.shape[3]]
    return [ctx.b.pad(g, 0.0, [0, 0, y, x], high)] + [None] * (p.num_args - 1)


# --- depth_to_space / space_to_depth (src/operator/tensor/matrix_op-inl.h, DCR order)
@dataclass(frozen=True)
class BlockParam:
    block_size: int


def _depth_to_space(b, x, k: int):
    """(N, C, H, W) -> (N, C/k^2, H k, W k): channel (i, j, c) moves to pixel offset (i, j)."""
    n, c, h, w = x.shape
    y = b.transpose(b.reshape(x, (n, k, k, c // (k * k), h, w)), [0, 3, 4, 1, 5, 2])
    return b.reshape(y, (n, c // (k * k), h * k, w * k))


def _space_to_depth(b, x, k: int):
    """The inverse of ``_depth_to_space``."""
    n, c, h, w = x.shape
    y = b.transpose(b.reshape(x, (n, c, h // k, k, w // k, k)), [0, 3, 5, 1, 2, 4])
    return b.reshape(y, (n, c * k * k, h // k, w // k))


def _zero(d) -> bool:
    """MXNet's checks read a legacy unknown dim (0, here -1) as the size 0."""
    return d == 0 or (d == -1 and not is_np_shape())


def _nonzero_dims(data, dims) -> None:
    for i in dims:
        if _zero(data[i]):
            raise ValueError("Depth dimension:1 cannot be 0" if i == 1 else
                             f"Operation requires a 4D tensor. Size of dimension:{i} cannot be 0")


def _scaled(d, f) -> int:
    return -1 if d == -1 else f(d)


def _block_prologue(p: BlockParam, data, name: str) -> int:
    """The first checks of both shape functions; the block size."""
    if len(data) != 4:
        raise ValueError(f"Operation {name} requires exactly 4D tensor")
    if p.block_size == 0:
        raise ValueError("block_size must be a positive integer value")
    return p.block_size


@ranked
def _d2s_shape(p: BlockParam, data):
    """MXNet's DepthToSpaceOpShape, its checks in its order."""
    k = _block_prologue(p, data, "Depth To Space")
    _nonzero_dims(data, (1,))
    if data[1] > 0 and data[1] % (k * k):
        raise ValueError("Cannot perform Depth To Space operation on the specified tensor. Dimension:1(depth "
                         "dimension) should be a multiple of 'block^2'")
    _nonzero_dims(data, (0, 2, 3))
    return (data[0], _scaled(data[1], lambda d: d // (k * k)), _scaled(data[2], lambda d: d * k),
            _scaled(data[3], lambda d: d * k))


@ranked
def _s2d_shape(p: BlockParam, data):
    """MXNet's SpaceToDepthOpShape (its messages say Depth To Space too)."""
    k = _block_prologue(p, data, "Space To Depth")
    _nonzero_dims(data, (0, 1, 2))
    if data[2] > 0 and data[2] % k:
        raise ValueError("Cannot perform Depth To Space operation on the specified tensor. Dimension:2(1st Space "
                         "dimension) should be a multiple of 'block' ")
    _nonzero_dims(data, (3,))
    if data[3] > 0 and data[3] % k:
        raise ValueError("Cannot perform Depth To Space operation on the specified tensor. Dimension:3(2nd space "
                         "dimension) should be a multiple of 'block' ")
    return (data[0], _scaled(data[1], lambda d: d * k * k), _scaled(data[2], lambda d: d // k),
            _scaled(data[3], lambda d: d // k))


depth_to_space = define("depth_to_space", params=BlockParam, infer_shape=_d2s_shape, infer_type=same_dtype)
space_to_depth = define("space_to_depth", params=BlockParam, infer_shape=_s2d_shape, infer_type=same_dtype)
lowers(depth_to_space)(lambda ctx, p, x: _depth_to_space(ctx.b, x, p.block_size))
lowers(space_to_depth)(lambda ctx, p, x: _space_to_depth(ctx.b, x, p.block_size))
differentiable(depth_to_space, ("ograd0",))(lambda ctx, p, g: [_space_to_depth(ctx.b, g, p.block_size)])
differentiable(space_to_depth, ("ograd0",))(lambda ctx, p, g: [_depth_to_space(ctx.b, g, p.block_size)])
