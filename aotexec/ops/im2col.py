"""im2col / col2im (MXNet 1.9.1 src/operator/nn/im2col.cc): the sliding blocks of an
(N, C, *spatial) array as columns (N, C * prod(kernel), L), L the convolution's output
positions, rows ordered channel-major then kernel offset; col2im sums columns back into the
image (overlaps add) and is im2col's gradient, and im2col col2im's. One strided slice (im2col)
or one interior-padded copy (col2im) per kernel offset: the ops grow with the kernel, never
with the image."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from .conv_forms import windows
from .params import Shape
from .registry import define, differentiable, lowers
from .rules import known, same_dtype


def _filled(p, name: str, default: int) -> tuple[int, ...]:
    v = getattr(p, name)
    return tuple(v) if v else (default,) * len(p.kernel)


def _check(p) -> None:
    if not 1 <= len(p.kernel) <= 3:
        raise ValueError(f"{len(p.kernel)}D convolution not supported")
    for name, what in (("stride", "Stride"), ("dilate", "Dilate"), ("pad", "Padding")):
        if getattr(p, name) and len(getattr(p, name)) != len(p.kernel):
            raise ValueError(f"{what} must have the same number of dimensions with kernel_size,but kernel_size is "
                             f"set to {tuple(p.kernel)} while {'padding' if name == 'pad' else name} is "
                             f"{tuple(getattr(p, name))}")


@dataclass(frozen=True)
class Im2colParam:
    kernel: Shape
    stride: Shape = ()
    dilate: Shape = ()
    pad: Shape = ()

    def check(self):
        _check(self)


@dataclass(frozen=True)
class Col2imParam:
    output_size: Shape
    kernel: Shape
    stride: Shape = ()
    dilate: Shape = ()
    pad: Shape = ()

    def check(self):
        _check(self)
        if len(self.output_size) != len(self.kernel):
            raise ValueError("Output size must have the same number of dimensions with kernel_size,but kernel_size "
                             f"is set to {tuple(self.kernel)} while output size is {tuple(self.output_size)}")


def _out_sizes(p, spatial, exceeded: str) -> tuple[int, ...]:
    sizes = []
    for x, k, s, d, q in zip(spatial, p.kernel, _filled(p, "stride", 1), _filled(p, "dilate", 1), _filled(p, "pad", 0)):
        span = d * (k - 1) + 1
        if span > x + 2 * q:
            raise ValueError(exceeded)
        sizes.append((x + 2 * q - span) // s + 1)
    return tuple(sizes)


def _im2col_shape(p: Im2colParam, ins, outs):
    data = ins[0]
    if not known(data):
        return ins, outs
    sizes = _out_sizes(p, data[2:], "kernel size exceed input")
    return ins, [(data[0], data[1] * math.prod(p.kernel), math.prod(sizes))]


def _col2im_shape(p: Col2imParam, ins, outs):
    col = ins[0]
    if not known(col):
        return ins, outs
    sizes = _out_sizes(p, p.output_size, "kernel size exceed output size")
    if col[2] != math.prod(sizes):
        raise ValueError("output size does not match convolution parameters")
    if col[1] % math.prod(p.kernel):
        raise ValueError("the second dim of input shape should be multiples of kernel size")
    return ins, [(col[0], col[1] // math.prod(p.kernel)) + tuple(p.output_size)]


im2col = define("im2col", params=Im2colParam, inputs=["data"], infer_shape=_im2col_shape, infer_type=same_dtype)
col2im = define("col2im", params=Col2imParam, inputs=["data"], infer_shape=_col2im_shape, infer_type=same_dtype)


def to_columns(b, p, x):
    """(N, C, *spatial) -> (N, C * K, L)."""
    n, c = x.shape[:2]
    nd = len(p.kernel)
    pad = _filled(p, "pad", 0)
    xp = b.pad(x, 0.0, (0, 0) + pad, (0, 0) + pad)
    sizes = _out_sizes(p, x.shape[2:], "kernel size exceed input")
    cols = windows(b, xp, p.kernel, _filled(p, "stride", 1), _filled(p, "dilate", 1), sizes, range(2, 2 + nd))
    k = len(cols)
    stacked = b.concatenate([b.reshape(w, (n, c, 1) + sizes) for w in cols], 2)       # (N, C, K, *sizes)
    return b.reshape(stacked, (n, c * k, math.prod(sizes)))


def from_columns(b, p, col, spatial):
    """(N, C * K, L) -> (N, C, *spatial), overlapping blocks summed."""
    n = col.shape[0]
    nd, k = len(p.kernel), math.prod(p.kernel)
    c = col.shape[1] // k
    stride, dilate, pad = _filled(p, "stride", 1), _filled(p, "dilate", 1), _filled(p, "pad", 0)
    sizes = _out_sizes(p, spatial, "kernel size exceed output size")
    padded = tuple(x + 2 * q for x, q in zip(spatial, pad))
    blocks = b.reshape(col, (n, c, k) + sizes)
    total = None
    for i, off in enumerate(itertools.product(*(range(kk) for kk in p.kernel))):
        part = b.reshape(b.slice(blocks, (0, 0, i) + (0,) * nd, (n, c, i + 1) + sizes), (n, c) + sizes)
        low = tuple(o * d for o, d in zip(off, dilate))
        high = tuple(pp - lo - (sz - 1) * s - 1 for pp, lo, sz, s in zip(padded, low, sizes, stride))
        placed = b.pad(part, 0.0, (0, 0) + low, (0, 0) + high, (0, 0) + tuple(s - 1 for s in stride))
        total = placed if total is None else b.add(total, placed)
    return b.slice(total, (0, 0) + pad, (n, c) + tuple(q + x for q, x in zip(pad, spatial)))


@lowers(im2col)
def _im2col_lower(ctx, p: Im2colParam, x):
    return to_columns(ctx.b, p, x)


@lowers(col2im)
def _col2im_lower(ctx, p: Col2imParam, col):
    return from_columns(ctx.b, p, col, tuple(p.output_size))


@differentiable(im2col, ("ograd0",))
def _im2col_grad(ctx, p: Im2colParam, g):
    return [from_columns(ctx.b, p, g, tuple(ctx.out_shapes[0][2:]))]


@differentiable(col2im, ("ograd0",))
def _col2im_grad(ctx, p: Col2imParam, g):
    return [to_columns(ctx.b, p, g)]
