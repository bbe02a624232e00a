"""MXNet 1.9.1's deterministic image operators (src/operator/image/image_random-inl.h):
``_image_normalize``, ``_image_to_tensor``, ``_image_flip_left_right``, ``_image_flip_top_bottom``
(``mx.sym.image.<name>`` without the prefix). The random augmentations draw from MXNet's own
generator and are not registered."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .registry import define, differentiable, lowers
from .rules import known, same_dtype


def _image(name: str, **kw):
    return define(f"_image_{name}", f"_npx__image_{name}", hint=name, **kw)


# --- normalize: (x - mean[c]) / std[c] over the channel axis of (C, H, W) or (N, C, H, W)
@dataclass(frozen=True)
class NormalizeParam:
    mean: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)


def _normalize_shape(p: NormalizeParam, ins, outs):
    d = ins[0]
    if not known(d):
        return ins, outs
    if len(d) not in (3, 4):
        raise ValueError("Input tensor must have shape (channels, height, width), or "
                         f"(N, channels, height, width), but got {tuple(d)}")
    c = d[0] if len(d) == 3 else d[1]
    if c not in (1, 3):
        which = "first" if len(d) == 3 else "second"
        raise ValueError(f"The {which} dimension of input tensor must be the channel dimension with "
                         f"either 1 or 3 elements, but got input with shape {tuple(d)}")
    for name, v in (("mean", p.mean), ("std", p.std)):
        if len(v) not in (1, c):
            raise ValueError(f"Invalid {name} for input with shape {tuple(d)}. {name} must have either 1 or {c} "
                             f"elements, but got {v}")
    return ins, [tuple(d)]


normalize = _image("normalize", params=NormalizeParam, infer_shape=_normalize_shape, infer_type=same_dtype)


def _per_channel(b, x, values) -> object:
    axis = x.ndim - 3
    c = x.shape[axis]
    vals = np.asarray([values[i if len(values) > 1 else 0] for i in range(c)], dtype=x.dtype)
    return b.broadcast_in_dim(b.constant(vals, (c,), x.dtype), x.shape, [axis])


@lowers(normalize)
def _normalize_lower(ctx, p: NormalizeParam, x):
    b = ctx.b
    return b.div(b.sub(x, _per_channel(b, x, p.mean)), _per_channel(b, x, p.std))


@differentiable(normalize, ("ograd0",))
def _normalize_grad(ctx, p: NormalizeParam, g):
    return [ctx.b.div(g, _per_channel(ctx.b, g, p.std))]


# --- to_tensor: (H, W, C) or (N, H, W, C) of 0-255 values -> float32 (C, H, W) in [0, 1]
def _to_tensor_shape(p, ins, outs):
    d = ins[0]
    if not known(d):
        return ins, outs
    if len(d) not in (3, 4):
        raise ValueError("Input image must have shape (height, width, channels), or "
                         f"(N, height, width, channels) but got {tuple(d)}")
    return ins, [(d[2], d[0], d[1]) if len(d) == 3 else (d[0], d[3], d[1], d[2])]


to_tensor = _image("to_tensor", infer_shape=_to_tensor_shape,
                   infer_type=lambda p, ins, outs: (ins, [np.dtype("float32")]), zero_grad=True)


@lowers(to_tensor)
def _to_tensor_lower(ctx, p, x):
    b = ctx.b
    perm = (2, 0, 1) if x.ndim == 3 else (0, 3, 1, 2)
    return b.div(b.transpose(b.convert(x, "float32"), perm), 255.0)


# --- flips of (H, W, C) images (ImageShape: 3-D, 1 or 3 channels)
def _image_shape(p, ins, outs):
    d = ins[0]
    if not known(d):
        return ins, outs
    if len(d) != 3:
        raise ValueError(f"Input image must have shape (height, width, channels), but got {tuple(d)}")
    if d[-1] not in (1, 3):
        raise ValueError("The last dimension of input image must be the channel dimension with "
                         f"either 1 or 3 elements, but got input with shape {tuple(d)}")
    return ins, [tuple(d)]


def _flip(name: str, axis_from_end: int):
    op = _image(name, infer_shape=_image_shape, infer_type=same_dtype)
    lowers(op)(lambda ctx, p, x: ctx.b.reverse(x, [x.ndim - axis_from_end]))
    differentiable(op, ("ograd0",))(lambda ctx, p, g: [ctx.b.reverse(g, [g.ndim - axis_from_end])])
    return op


flip_left_right = _flip("flip_left_right", 2)
flip_top_bottom = _flip("flip_top_bottom", 3)
