"""Broadcasts and repeats: broadcast_to, broadcast_axis, broadcast_like, tile, repeat
(MXNet 1.9.1 src/operator/tensor/broadcast_reduce_op*, matrix_op*): parameters, shape rule,
lowering and gradient per op."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..emitter import unbroadcast
from ..util import is_np_shape
from .params import Shape
from .registry import OpDef, define, differentiable, lowers
from .rules import dtype_of_first, flat_or_axis, forward, known, norm_axis, prod, ranked, same_dtype, shape_str


def _broadcast_lower(ctx, p, x, *like):
    return ctx.b.broadcast_to(x, ctx.out_shapes[0])


def _unbroadcast_grad(ctx, p, g):
    return [unbroadcast(ctx.b, g, ctx.fwd_in_shapes[0])] + [None] * (len(ctx.fwd_in_shapes) - 1)


def _broadcasting(op: OpDef) -> OpDef:
    """An op that only broadcasts its input: its gradient sums over the broadcast axes."""
    lowers(op)(_broadcast_lower)
    differentiable(op, ("ograd0",), name="_broadcast_backward")(_unbroadcast_grad)   # MXNet's shared name
    return op


@dataclass(frozen=True)
class BroadcastToParam:
    shape: Shape = ()


@forward
def _broadcast_to_shape(p: BroadcastToParam, data):
    if len(p.shape) != len(data):
        raise ValueError(f"broadcast_to: target shape {p.shape} has a different number of dims than {data}")
    out = []
    for d, t in zip(data, p.shape):
        t = d if t == 0 else t
        if d != t and d != 1:
            raise ValueError(f"Cannot broadcast input shape {data} to {p.shape}")
        out.append(t)
    return tuple(out)


broadcast_to = _broadcasting(define("broadcast_to", params=BroadcastToParam, infer_shape=_broadcast_to_shape,
                                   infer_type=same_dtype, listed_inputs=False))


@dataclass(frozen=True)
class BroadcastAxesParam:
    axis: Shape = ()
    size: Shape = ()


@forward
def _broadcast_axis_shape(p: BroadcastAxesParam, data):
    out = list(data)
    for a, s in zip(p.axis, p.size):
        out[norm_axis(a, len(data))] = s
    return tuple(out)


broadcast_axis = _broadcasting(define("broadcast_axis", "broadcast_axes", params=BroadcastAxesParam,
                                     infer_shape=_broadcast_axis_shape, infer_type=same_dtype, listed_inputs=False))


@dataclass(frozen=True)
class BroadcastLikeParam:
    lhs_axes: Optional[Shape] = None
    rhs_axes: Optional[Shape] = None


def _broadcast_like_shape(p: BroadcastLikeParam, ins, outs):
    """MXNet's BroadcastLikeShape: lhs to rhs's shape, or only ``lhs_axes`` to rhs's ``rhs_axes``."""
    lhs, rhs = ins
    if lhs is None or rhs is None:
        return ins, outs
    if p.lhs_axes is None or p.rhs_axes is None:
        if len(lhs) != len(rhs):
            raise ValueError(f"Operand of shape {shape_str(lhs)} cannot be broadcasted to {shape_str(rhs)}")
        for a, r in zip(lhs, rhs):
            if r >= 0 and a not in (r, 1):
                raise ValueError(f"Array cannot be broadcasted from {shape_str(lhs)} to {shape_str(rhs)}")
        return ins, [tuple(a if r < 0 else r for a, r in zip(lhs, rhs))]
    if len(p.lhs_axes) != len(p.rhs_axes) or not p.lhs_axes:
        raise ValueError("Input_axis and other_axis size does not match" if p.lhs_axes else
                         "Empty axes tuple is not allowed")
    out = list(lhs)
    for i, (la, ra) in enumerate(zip(p.lhs_axes, p.rhs_axes)):
        la, ra = norm_axis(la, len(lhs), "lhs_axes"), norm_axis(ra, len(rhs), "rhs_axes")
        if lhs[la] != 1:
            raise ValueError(f"Input axis {p.lhs_axes[i]} at dimension {i} cannot be broadcasted to {rhs[ra]}")
        out[la] = rhs[ra]
    return ins, [tuple(out)]


broadcast_like = _broadcasting(define("broadcast_like", params=BroadcastLikeParam, inputs=["lhs", "rhs"],
                                     no_grad_inputs=("rhs",), infer_shape=_broadcast_like_shape,
                                     infer_type=dtype_of_first))


@dataclass(frozen=True)
class TileParam:
    reps: Shape


@forward
def _tile_shape(p: TileParam, data):
    # a 0 rep gives a 0 dim, an unknown one outside numpy shape semantics (MXNet's TileOpShape)
    if any(r < 0 for r in p.reps) or (0 in p.reps and not is_np_shape()):
        raise ValueError(f"tile: reps {tuple(p.reps)} must be positive")
    nd = max(len(data), len(p.reps))
    d = (1,) * (nd - len(data)) + tuple(data)
    r = (1,) * (nd - len(p.reps)) + tuple(p.reps)
    return tuple(a * b for a, b in zip(d, r))


tile = define("tile", params=TileParam, infer_shape=_tile_shape, infer_type=same_dtype)


@lowers(tile)
def _tile_lower(ctx, p: TileParam, x):
    b = ctx.b
    nd = max(x.ndim, len(p.reps))
    d = (1,) * (nd - x.ndim) + x.shape
    r = (1,) * (nd - len(p.reps)) + tuple(p.reps)
    # (d0, d1..) -> (r0, d0, r1, d1..) -> (r0*d0, r1*d1..)
    x = b.reshape(x, d)
    wide = b.broadcast_in_dim(x, [v for pair in zip(r, d) for v in pair], [2 * i + 1 for i in range(nd)])
    return b.reshape(wide, ctx.out_shapes[0])


@differentiable(tile, ("ograd0",))
def _tile_grad(ctx, p: TileParam, g):
    # (r0*d0, r1*d1..) -> (r0, d0, r1, d1..) -> sum the r axes
    b, shape = ctx.b, ctx.fwd_in_shapes[0]
    nd = g.ndim
    d = (1,) * (nd - len(shape)) + tuple(shape)
    r = (1,) * (nd - len(p.reps)) + tuple(p.reps)
    wide = b.reshape(g, [v for pair in zip(r, d) for v in pair])
    return [b.reshape(b.reduce(wide, [2 * i for i in range(nd) if r[i] != 1]), shape)]


@dataclass(frozen=True)
class RepeatParam:
    repeats: int
    axis: Optional[int] = None


@ranked
def _repeat_shape(p: RepeatParam, data):
    """MXNet's RepeatOpShape (unknown dims stay unknown)."""
    if p.repeats == 0:
        return (0,)
    if p.axis is None:
        return (prod(data) * p.repeats if known(data) else -1,)
    ax = norm_axis(p.axis, len(data))
    out = list(data)
    out[ax] = out[ax] * p.repeats if out[ax] >= 0 else -1
    return tuple(out)


repeat = define("repeat", params=RepeatParam, infer_shape=_repeat_shape, infer_type=same_dtype)


@lowers(repeat)
def _repeat_lower(ctx, p: RepeatParam, x):
    b = ctx.b
    x, ax = flat_or_axis(b, x, p.axis)
    # (.., n, ..) -> (.., n, repeats, ..) -> (.., n*repeats, ..)
    shape = x.shape[:ax + 1] + (p.repeats,) + x.shape[ax + 1:]
    dims = [i if i <= ax else i + 1 for i in range(x.ndim)]
    return b.reshape(b.broadcast_in_dim(x, shape, dims), ctx.out_shapes[0])


@differentiable(repeat, ("ograd0",))
def _repeat_grad(ctx, p: RepeatParam, g):
    b, shape = ctx.b, ctx.fwd_in_shapes[0]
    flat = (prod(shape),) if p.axis is None else tuple(shape)
    ax = 0 if p.axis is None else norm_axis(p.axis, len(shape))
    wide = b.reshape(g, flat[:ax + 1] + (p.repeats,) + flat[ax + 1:])
    return [b.reshape(b.reduce(wide, [ax + 1]), shape)]
