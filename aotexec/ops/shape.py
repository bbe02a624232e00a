"""Shape manipulation: Flatten, Reshape, transpose, expand_dims, squeeze,
Concat, SliceChannel, split_v2, slice, slice_axis, stack, tile, repeat,
broadcast_to, broadcast_like, reshape_like, SwapAxis.

Mirrors MXNet 1.9.1 src/operator/tensor/matrix_op*, slice_channel.cc, concat.cc.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .params import Shape
from .registry import alias, define
from .rules import dtype_of_first, flat_or_axis, forward, known, merge, norm_axis, prod, same_dtype

SliceSpec = tuple[Optional[int], ...]


@forward
def _flatten_shape(p, data):
    return (data[0], prod(data[1:])) if data else (1, 1)


define("Flatten", "flatten", infer_shape=_flatten_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class ReshapeParam:
    shape: Shape = ()
    reverse: bool = False
    target_shape: Shape = ()
    keep_highest: bool = False


def reshape_target(dshape: tuple[int, ...], spec: tuple[int, ...], reverse: bool = False) -> tuple[int, ...]:
    """MXNet's Reshape special codes 0, -1, -2, -3, -4 (matrix_op-inl.h, InferReshapeShape)."""
    if reverse:
        return tuple(reversed(reshape_target(tuple(reversed(dshape)), _reverse_spec(spec))))
    out: list[int] = []
    src, inf = 0, -1
    i = 0
    while i < len(spec):
        code = spec[i]
        if code == 0:
            out.append(dshape[src]); src += 1
        elif code == -1:
            if inf >= 0:
                raise ValueError("One and only one dim can be inferred")
            inf = len(out); out.append(1); src += 1
        elif code == -2:
            out.extend(dshape[src:]); src = len(dshape)
        elif code == -3:
            out.append(dshape[src] * dshape[src + 1]); src += 2
        elif code == -4:
            d0, d1, d2 = dshape[src], spec[i + 1], spec[i + 2]
            src += 1; i += 2
            if d1 == -1 and d2 == -1:
                raise ValueError("Split dims cannot both be -1.")
            d1 = d0 // d2 if d1 == -1 else d1
            d2 = d0 // d1 if d2 == -1 else d2
            if d1 * d2 != d0:
                raise ValueError(f"Split dims {d1}, {d2} do not divide original dim {d0}")
            out += [d1, d2]
        else:
            out.append(code); src += 1
        i += 1
    if inf >= 0:
        rest = prod(out)
        out[inf] = prod(dshape) // rest if rest else 0
    if prod(out) != prod(dshape):
        raise ValueError(f"Target shape size is different to source. Target: {tuple(out)}\nSource: {tuple(dshape)}")
    return tuple(out)


def _reverse_spec(spec: tuple[int, ...]) -> tuple[int, ...]:
    # -4 takes the two following values; keep those groups intact when reversing
    groups, i = [], 0
    while i < len(spec):
        if spec[i] == -4:
            groups.append((-4, spec[i + 2], spec[i + 1])); i += 3
        else:
            groups.append((spec[i],)); i += 1
    return tuple(v for g in reversed(groups) for v in ((g[0], g[1], g[2]) if g[0] == -4 else g))


def _reshape_shape(p: ReshapeParam, ins, outs):
    data = ins[0]
    if not known(data):
        return ins, outs
    spec = tuple(p.shape) if p.shape else tuple(p.target_shape)
    return ins, [reshape_target(tuple(data), spec, p.reverse)]


define("Reshape", "reshape", params=ReshapeParam, infer_shape=_reshape_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class TransposeParam:
    axes: Shape = ()


@forward
def _transpose_shape(p, data):
    axes = p.axes or tuple(reversed(range(len(data))))
    if sorted(norm_axis(a, len(data)) for a in axes) != list(range(len(data))):
        raise ValueError(f"transpose axes {p.axes} are not a permutation of a {len(data)}-D input")
    return tuple(data[norm_axis(a, len(data))] for a in axes)


define("transpose", params=TransposeParam, infer_shape=_transpose_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class ExpandDimsParam:
    axis: int


@forward
def _expand_dims_shape(p, data):
    ax = p.axis + len(data) + 1 if p.axis < 0 else p.axis
    return tuple(data[:ax]) + (1,) + tuple(data[ax:])


define("expand_dims", params=ExpandDimsParam, infer_shape=_expand_dims_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class SqueezeParam:
    axis: Optional[Shape] = None


@forward
def _squeeze_shape(p, data):
    if p.axis is None:
        out = tuple(d for d in data if d != 1)
    else:
        axes = {norm_axis(a, len(data)) for a in p.axis}
        for a in axes:
            if data[a] != 1:
                raise ValueError(f"cannot select an axis to squeeze out which has size={data[a]} not equal to one")
        out = tuple(d for i, d in enumerate(data) if i not in axes)
    return out or (1,)


define("squeeze", params=SqueezeParam, infer_shape=_squeeze_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class ConcatParam:
    num_args: int
    dim: int = 1


def _concat_shape(p: ConcatParam, ins, outs):
    if not all(known(s) for s in ins):
        return ins, outs
    ax = norm_axis(p.dim, len(ins[0]))
    base = list(ins[0])
    for s in ins[1:]:
        if len(s) != len(base) or any(a != b for i, (a, b) in enumerate(zip(s, base)) if i != ax):
            raise ValueError(f"Concat: incompatible input shapes {ins[0]} and {s} along dim {p.dim}")
    base[ax] = sum(s[ax] for s in ins)
    return ins, [tuple(base)]


define("Concat", "concat", params=ConcatParam, variadic="num_args",
       infer_shape=_concat_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class SliceChannelParam:
    num_outputs: int
    axis: int = 1
    squeeze_axis: bool = False


def _split_shape(p: SliceChannelParam, ins, outs):
    data = ins[0]
    if not known(data):
        return ins, outs
    ax = norm_axis(p.axis, len(data))
    if data[ax] % p.num_outputs:
        raise ValueError(f"num_outputs ({p.num_outputs}) does not divide the size of axis {p.axis} ({data[ax]})")
    part = list(data)
    part[ax] = data[ax] // p.num_outputs
    if p.squeeze_axis and part[ax] == 1:
        del part[ax]
    return ins, [tuple(part)] * p.num_outputs


define("SliceChannel", "split", params=SliceChannelParam,
       outputs=lambda p: [f"output{i}" for i in range(p.num_outputs)],
       infer_shape=_split_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class SplitV2Param:
    indices: Shape = ()
    axis: int = 1
    squeeze_axis: bool = False
    sections: int = 0

    def bounds(self, size: int) -> list[tuple[int, int]]:
        if self.sections > 0:
            step = size // self.sections
            return [(i * step, (i + 1) * step) for i in range(self.sections)]
        idx = list(self.indices) + [size]
        return [(idx[i], idx[i + 1]) for i in range(len(self.indices))]


def _split_v2_shape(p: SplitV2Param, ins, outs):
    data = ins[0]
    if not known(data):
        return ins, outs
    ax = norm_axis(p.axis, len(data))
    res = []
    for b, e in p.bounds(data[ax]):
        s = list(data)
        s[ax] = e - b
        if p.squeeze_axis and s[ax] == 1:
            del s[ax]
        res.append(tuple(s))
    return ins, res


define("_split_v2", params=SplitV2Param,
       outputs=lambda p: [f"output{i}" for i in range(p.sections if p.sections > 0 else len(p.indices))],
       infer_shape=_split_v2_shape, infer_type=same_dtype)
alias("split_v2", "_split_v2")


@dataclass(frozen=True)
class SliceParam:
    begin: SliceSpec
    end: SliceSpec
    step: SliceSpec = ()

    def ranges(self, shape: tuple[int, ...]) -> list[tuple[int, int, int]]:
        """(start, stop, step) per axis, normalized like MXNet's slice."""
        out = []
        for i, n in enumerate(shape):
            b = self.begin[i] if i < len(self.begin) else None
            e = self.end[i] if i < len(self.end) else None
            s = self.step[i] if i < len(self.step) and self.step[i] is not None else 1
            if s == 0:
                raise ValueError("slice step cannot be 0")
            start, stop, s = slice(b, e, s).indices(n)
            out.append((start, stop, s))
        return out


@forward
def _slice_shape(p: SliceParam, data):
    if len(p.begin) > len(data):
        raise ValueError(f"slice begin {p.begin} has more dims than the input {data}")
    return tuple(len(range(b, e, s)) for b, e, s in p.ranges(data))


define("slice", "crop", params=SliceParam, infer_shape=_slice_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class SliceAxisParam:
    axis: int
    begin: int
    end: Optional[int]


@forward
def _slice_axis_shape(p: SliceAxisParam, data):
    ax = norm_axis(p.axis, len(data))
    b, e, _ = slice(p.begin, p.end).indices(data[ax])
    out = list(data)
    out[ax] = max(e - b, 0)
    return tuple(out)


define("slice_axis", params=SliceAxisParam, infer_shape=_slice_axis_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class StackParam:
    num_args: int
    axis: int = 0


def _stack_shape(p: StackParam, ins, outs):
    s = None
    for x in ins:
        s = merge(s, x)
    if not known(s):
        return ins, outs
    ax = p.axis + len(s) + 1 if p.axis < 0 else p.axis
    return [s] * len(ins), [tuple(s[:ax]) + (p.num_args,) + tuple(s[ax:])]


define("stack", params=StackParam, variadic="num_args", infer_shape=_stack_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class TileParam:
    reps: Shape


@forward
def _tile_shape(p: TileParam, data):
    nd = max(len(data), len(p.reps))
    d = (1,) * (nd - len(data)) + tuple(data)
    r = (1,) * (nd - len(p.reps)) + tuple(p.reps)
    return tuple(a * b for a, b in zip(d, r))


define("tile", params=TileParam, infer_shape=_tile_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class RepeatParam:
    repeats: int
    axis: Optional[int] = None


@forward
def _repeat_shape(p: RepeatParam, data):
    if p.axis is None:
        return (prod(data) * p.repeats,)
    ax = norm_axis(p.axis, len(data))
    out = list(data)
    out[ax] *= p.repeats
    return tuple(out)


define("repeat", params=RepeatParam, infer_shape=_repeat_shape, infer_type=same_dtype)


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


define("broadcast_to", params=BroadcastToParam, infer_shape=_broadcast_to_shape, infer_type=same_dtype)


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


define("broadcast_axis", "broadcast_axes", params=BroadcastAxesParam,
       infer_shape=_broadcast_axis_shape, infer_type=same_dtype)


def _like_shape(p, ins, outs):
    return ins, [ins[1]] if known(ins[1]) else outs


define("broadcast_like", inputs=["lhs", "rhs"], no_grad_inputs=("rhs",),
       infer_shape=_like_shape, infer_type=dtype_of_first)
define("reshape_like", inputs=["lhs", "rhs"], no_grad_inputs=("rhs",),
       infer_shape=_like_shape, infer_type=dtype_of_first)


@dataclass(frozen=True)
class SwapAxisParam:
    dim1: int = 0
    dim2: int = 0


@forward
def _swapaxis_shape(p: SwapAxisParam, data):
    out = list(data)
    a, b = norm_axis(p.dim1, len(data)), norm_axis(p.dim2, len(data))
    out[a], out[b] = out[b], out[a]
    return tuple(out)


define("SwapAxis", "swapaxes", params=SwapAxisParam, infer_shape=_swapaxis_shape, infer_type=same_dtype)


# ---------------------------------------------------------------- lowering rules
from .registry import OPS, lowers  # noqa: E402


@lowers(OPS["Flatten"], OPS["Reshape"], OPS["expand_dims"], OPS["squeeze"], OPS["reshape_like"])
def _reshape_lower(ctx, p, x, *like):
    # the shape rule already resolved MXNet's special codes
    return ctx.b.reshape(x, ctx.out_shapes[0])


@lowers(OPS["transpose"])
def _transpose_lower(ctx, p: TransposeParam, x):
    perm = [norm_axis(a, x.ndim) for a in p.axes] if p.axes else list(reversed(range(x.ndim)))
    return ctx.b.transpose(x, perm)


@lowers(OPS["SwapAxis"])
def _swapaxis_lower(ctx, p: SwapAxisParam, x):
    perm = list(range(x.ndim))
    a, c = norm_axis(p.dim1, x.ndim), norm_axis(p.dim2, x.ndim)
    perm[a], perm[c] = perm[c], perm[a]
    return ctx.b.transpose(x, perm)


@lowers(OPS["Concat"])
def _concat_lower(ctx, p: ConcatParam, *xs):
    return ctx.b.concatenate(xs, norm_axis(p.dim, xs[0].ndim))


def _slice_axis(b, x, axis: int, begin: int, end: int):
    start, limit = [0] * x.ndim, list(x.shape)
    start[axis], limit[axis] = begin, end
    return b.slice(x, start, limit)


def _split(ctx, x, axis: int, bounds):
    b = ctx.b
    return [b.reshape(_slice_axis(b, x, axis, lo, hi), s) for (lo, hi), s in zip(bounds, ctx.out_shapes)]


@lowers(OPS["SliceChannel"])
def _slice_channel_lower(ctx, p: SliceChannelParam, x):
    ax = norm_axis(p.axis, x.ndim)
    step = x.shape[ax] // p.num_outputs
    return _split(ctx, x, ax, [(i * step, (i + 1) * step) for i in range(p.num_outputs)])


@lowers(OPS["_split_v2"])
def _split_v2_lower(ctx, p: SplitV2Param, x):
    ax = norm_axis(p.axis, x.ndim)
    return _split(ctx, x, ax, p.bounds(x.shape[ax]))


@lowers(OPS["slice"])
def _slice_lower(ctx, p: SliceParam, x):
    b = ctx.b
    ranges = p.ranges(x.shape)
    # a negative step walks the reversed axis forward: index j -> n - 1 - j
    neg = [i for i, (_, _, s) in enumerate(ranges) if s < 0]
    if neg:
        x = b.reverse(x, neg)
    start, limit, strides = [], [], []
    for n, (lo, hi, s) in zip(x.shape, ranges):
        count = len(range(lo, hi, s))
        first = lo if s > 0 else n - 1 - lo
        start.append(first if count else 0)
        limit.append(first + (count - 1) * abs(s) + 1 if count else 0)
        strides.append(abs(s))
    return b.slice(x, start, limit, strides)


@lowers(OPS["slice_axis"])
def _slice_axis_lower(ctx, p: SliceAxisParam, x):
    ax = norm_axis(p.axis, x.ndim)
    lo, hi, _ = slice(p.begin, p.end).indices(x.shape[ax])
    return _slice_axis(ctx.b, x, ax, lo, max(lo, hi))


@lowers(OPS["stack"])
def _stack_lower(ctx, p: StackParam, *xs):
    ax = p.axis + xs[0].ndim + 1 if p.axis < 0 else p.axis
    parts = [ctx.b.reshape(x, x.shape[:ax] + (1,) + x.shape[ax:]) for x in xs]
    return ctx.b.concatenate(parts, ax)


@lowers(OPS["tile"])
def _tile_lower(ctx, p: TileParam, x):
    b = ctx.b
    nd = max(x.ndim, len(p.reps))
    d = (1,) * (nd - x.ndim) + x.shape
    r = (1,) * (nd - len(p.reps)) + tuple(p.reps)
    # (d0, d1..) -> (r0, d0, r1, d1..) -> (r0*d0, r1*d1..)
    x = b.reshape(x, d)
    wide = b.broadcast_in_dim(x, [v for pair in zip(r, d) for v in pair], [2 * i + 1 for i in range(nd)])
    return b.reshape(wide, ctx.out_shapes[0])


@lowers(OPS["repeat"])
def _repeat_lower(ctx, p: RepeatParam, x):
    b = ctx.b
    x, ax = flat_or_axis(b, x, p.axis)
    # (.., n, ..) -> (.., n, repeats, ..) -> (.., n*repeats, ..)
    shape = x.shape[:ax + 1] + (p.repeats,) + x.shape[ax + 1:]
    dims = [i if i <= ax else i + 1 for i in range(x.ndim)]
    return b.reshape(b.broadcast_in_dim(x, shape, dims), ctx.out_shapes[0])


@lowers(OPS["broadcast_to"], OPS["broadcast_axis"], OPS["broadcast_like"])
def _broadcast_lower(ctx, p, x, *like):
    return ctx.b.broadcast_to(x, ctx.out_shapes[0])


# ---------------------------------------------------------------- gradient rules
from ..emitter import unbroadcast  # noqa: E402
from .registry import differentiable  # noqa: E402


def _reshape_back(ctx, p, g):
    return [ctx.b.reshape(g, ctx.fwd_in_shapes[0])] + [None] * (len(ctx.fwd_in_shapes) - 1)  # reshape_like: rhs


for _name in ("Flatten", "Reshape", "expand_dims", "squeeze", "reshape_like"):
    differentiable(OPS[_name], ("ograd0",))(_reshape_back)


def _inverse(perm):
    inv = [0] * len(perm)
    for i, a in enumerate(perm):
        inv[a] = i
    return inv


@differentiable(OPS["transpose"], ("ograd0",))
def _transpose_grad(ctx, p: TransposeParam, g):
    perm = [norm_axis(a, g.ndim) for a in p.axes] if p.axes else list(reversed(range(g.ndim)))
    return [ctx.b.transpose(g, _inverse(perm))]


@differentiable(OPS["SwapAxis"], ("ograd0",))
def _swapaxis_grad(ctx, p: SwapAxisParam, g):
    return [_swapaxis_lower(ctx, p, g)]  # a swap is its own inverse


@differentiable(OPS["Concat"], ("ograd0",))
def _concat_grad(ctx, p: ConcatParam, g):
    ax = norm_axis(p.dim, g.ndim)
    out, lo = [], 0
    for s in ctx.fwd_in_shapes:
        out.append(_slice_axis(ctx.b, g, ax, lo, lo + s[ax]))
        lo += s[ax]
    return out


def _unsplit(ctx, gs, ax: int, bounds):
    """Concatenate the outputs' gradients (squeezed axes restored); zeros outside the bounds."""
    b, shape = ctx.b, ctx.fwd_in_shapes[0]
    parts = [b.reshape(g, shape[:ax] + (hi - lo,) + shape[ax + 1:]) for g, (lo, hi) in zip(gs, bounds)]
    low, high = [0] * len(shape), [0] * len(shape)
    low[ax], high[ax] = bounds[0][0], shape[ax] - bounds[-1][1]
    return [b.pad(b.concatenate(parts, ax), 0.0, low, high)]


@differentiable(OPS["SliceChannel"], lambda p: [f"ograd{i}" for i in range(p.num_outputs)])
def _slice_channel_grad(ctx, p: SliceChannelParam, *gs):
    n = ctx.fwd_in_shapes[0]
    ax = norm_axis(p.axis, len(n))
    step = n[ax] // p.num_outputs
    return _unsplit(ctx, gs, ax, [(i * step, (i + 1) * step) for i in range(p.num_outputs)])


@differentiable(OPS["_split_v2"], lambda p: [f"ograd{i}" for i in range(len(OPS["_split_v2"].output_names(p)))])
def _split_v2_grad(ctx, p: SplitV2Param, *gs):
    n = ctx.fwd_in_shapes[0]
    ax = norm_axis(p.axis, len(n))
    return _unsplit(ctx, gs, ax, p.bounds(n[ax]))


@differentiable(OPS["slice"], ("ograd0",))
def _slice_grad(ctx, p: SliceParam, g):
    """Scatter g into zeros: pad (interior padding for the strides), undo the reversal of negative steps."""
    b, shape = ctx.b, ctx.fwd_in_shapes[0]
    ranges = p.ranges(shape)
    if any(len(range(*r)) == 0 for r in ranges):
        return [None]
    low, high, interior = [], [], []
    for n, (lo, hi, s) in zip(shape, ranges):
        count = len(range(lo, hi, s))
        first = lo if s > 0 else n - 1 - lo
        last = first + (count - 1) * abs(s)
        low.append(first)
        high.append(n - 1 - last)
        interior.append(abs(s) - 1)
    gx = b.pad(g, 0.0, low, high, interior)
    neg = [i for i, (_, _, s) in enumerate(ranges) if s < 0]
    return [b.reverse(gx, neg) if neg else gx]


@differentiable(OPS["slice_axis"], ("ograd0",))
def _slice_axis_grad(ctx, p: SliceAxisParam, g):
    shape = ctx.fwd_in_shapes[0]
    ax = norm_axis(p.axis, len(shape))
    lo, hi, _ = slice(p.begin, p.end).indices(shape[ax])
    if hi <= lo:
        return [None]
    low, high = [0] * len(shape), [0] * len(shape)
    low[ax], high[ax] = lo, shape[ax] - hi
    return [ctx.b.pad(g, 0.0, low, high)]


@differentiable(OPS["stack"], ("ograd0",))
def _stack_grad(ctx, p: StackParam, g):
    ax = norm_axis(p.axis, g.ndim)
    return [ctx.b.reshape(_slice_axis(ctx.b, g, ax, i, i + 1), s) for i, s in enumerate(ctx.fwd_in_shapes)]


@differentiable(OPS["tile"], ("ograd0",))
def _tile_grad(ctx, p: TileParam, g):
    # (r0*d0, r1*d1..) -> (r0, d0, r1, d1..) -> sum the r axes
    b, shape = ctx.b, ctx.fwd_in_shapes[0]
    nd = g.ndim
    d = (1,) * (nd - len(shape)) + tuple(shape)
    r = (1,) * (nd - len(p.reps)) + tuple(p.reps)
    wide = b.reshape(g, [v for pair in zip(r, d) for v in pair])
    return [b.reshape(b.reduce(wide, [2 * i for i in range(nd) if r[i] != 1]), shape)]


@differentiable(OPS["repeat"], ("ograd0",))
def _repeat_grad(ctx, p: RepeatParam, g):
    b, shape = ctx.b, ctx.fwd_in_shapes[0]
    flat = (prod(shape),) if p.axis is None else tuple(shape)
    ax = 0 if p.axis is None else norm_axis(p.axis, len(shape))
    wide = b.reshape(g, flat[:ax + 1] + (p.repeats,) + flat[ax + 1:])
    return [b.reshape(b.reduce(wide, [ax + 1]), shape)]


def _unbroadcast_grad(ctx, p, g):
    return [unbroadcast(ctx.b, g, ctx.fwd_in_shapes[0])] + [None] * (len(ctx.fwd_in_shapes) - 1)


for _name in ("broadcast_to", "broadcast_axis", "broadcast_like"):
    differentiable(OPS[_name], ("ograd0",))(_unbroadcast_grad)
