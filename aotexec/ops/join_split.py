"""Joining and cutting along an axis: Concat, stack, SliceChannel, split_v2, slice, slice_axis,
slice_like (MXNet 1.9.1 src/operator/tensor/matrix_op*, slice_channel.cc, concat.cc): parameters, shape
rule, lowering and gradient per op."""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Optional

from .nhwc import TO_NHWC, ChannelsLast, LayoutQuery
from .params import Shape
from .registry import define, differentiable, lays_out, lowers
from .rules import dtype_of_first, known, merge, norm_axis, same_dtype, shape_str

SliceSpec = tuple[Optional[int], ...]


def _slice_axis(b, x, axis: int, begin: int, end: int):
    start, limit = [0] * x.ndim, list(x.shape)
    start[axis], limit[axis] = begin, end
    return b.slice(x, start, limit)


def _split(ctx, x, axis: int, bounds):
    b = ctx.b
    return [b.reshape(_slice_axis(b, x, axis, lo, hi), s) for (lo, hi), s in zip(bounds, ctx.out_shapes)]


@dataclass(frozen=True)
class ConcatParam:
    num_args: int
    dim: int = 1


def _concat_shape(p: ConcatParam, ins, outs):
    """MXNet's ConcatShape (concat.cc): every input agrees off the axis with the others and the
    output; the output's axis is the sum once every input's is known."""
    base, total, unknown, ax = None, 0, False, None
    for x in ins:
        if x is not None:
            ax = norm_axis(p.dim, len(x))
            unknown = unknown or x[ax] < 0
            total += x[ax]
            base = _merge_off_axis(base, x, ax)
    if outs[0] is not None:
        ax = norm_axis(p.dim, len(outs[0]))
        base = _merge_off_axis(base, outs[0], ax)
    if base is None:
        return ins, outs
    if not base:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    for what, x in [("input", x) for x in ins] + [("output", outs[0])]:
        try:
            merge(x, base)
        except ValueError:
            raise ValueError(f"Incompatible {what} shape: expected {shape_str(base)}, got {shape_str(x)}") from None
    out = tuple(total if i == ax and not unknown else d for i, d in enumerate(base))
    return [base] * len(ins), [out]


def _merge_off_axis(base, x, ax: int):
    """``base`` merged with ``x`` off the axis; a contradiction keeps ``base`` (MXNet ignores it
    here and reports it when assigning the merged shape back)."""
    try:
        return merge(base, tuple(-1 if i == ax else d for i, d in enumerate(x)))
    except ValueError:
        return base


Concat = define("Concat", "concat", params=ConcatParam, variadic="num_args",
                infer_shape=_concat_shape, infer_type=same_dtype, mirror_kept=True)


@lowers(Concat)
def _concat_lower(ctx, p: ConcatParam, *xs):
    return ctx.b.concatenate(xs, norm_axis(p.dim, xs[0].ndim))


@differentiable(Concat, ("ograd0",))
def _concat_grad(ctx, p: ConcatParam, g):
    # the gradients' shapes as stored (channels-last lowerings: physical) bound the slices
    ax = norm_axis(p.dim, g.ndim)
    ends = list(itertools.accumulate(s[ax] for s in ctx.out_shapes))
    return [_slice_axis(ctx.b, g, ax, hi - s[ax], hi) for s, hi in zip(ctx.out_shapes, ends)]


# --- Concat channels-last (passes.layout): joining NHWC maps along C is a join along axis 3,
# so DenseNet's feature concatenations keep the layout instead of transposing every map
def _channel_concat(q: LayoutQuery, four_d: bool) -> ChannelsLast | None:
    if four_d and norm_axis(q.params.dim, 4) == 1:
        return ChannelsLast("axis3", (True,) * q.num_outputs, params=dataclasses.replace(q.params, dim=3))
    return None


@lays_out(Concat)
def _concat_layout(q: LayoutQuery) -> ChannelsLast | None:
    return _channel_concat(q, all(q.nhwc) and all(q.four_d(k) for k in range(len(q.shapes))))


@lays_out(Concat.backward)
def _concat_grad_layout(q: LayoutQuery) -> ChannelsLast | None:
    """Gradients stored as the joined maps were, whatever the head gradient's layout (one
    transpose of an NCHW one, e.g. from a classifier, keeps every layer below channels-last)."""
    rule = _channel_concat(q, q.four_d(0) and all(q.fwd_in_nhwc or [False]))
    return rule and dataclasses.replace(rule, lower=_concat_grad_nhwc_lower)


def _concat_grad_nhwc_lower(ctx, p: ConcatParam, g):
    return _concat_grad(ctx, p, g if ctx.in_nhwc[0] else ctx.b.transpose(g, TO_NHWC))


@dataclass(frozen=True)
class StackParam:
    num_args: int
    axis: int = 0


def _stack_shape(p: StackParam, ins, outs):
    """MXNet's StackOpShape: the inputs' merged shape, once complete, with the new axis."""
    s = None
    for x in ins:
        s = merge(s, x)
    if not known(s):
        return ins, outs
    ax = p.axis + len(s) + 1 if p.axis < 0 else p.axis
    return ins, [tuple(s[:ax]) + (p.num_args,) + tuple(s[ax:])]


stack = define("stack", params=StackParam, variadic="num_args", infer_shape=_stack_shape, infer_type=same_dtype)


@lowers(stack)
def _stack_lower(ctx, p: StackParam, *xs):
    ax = p.axis + xs[0].ndim + 1 if p.axis < 0 else p.axis
    parts = [ctx.b.reshape(x, x.shape[:ax] + (1,) + x.shape[ax:]) for x in xs]
    return ctx.b.concatenate(parts, ax)


@differentiable(stack, ("ograd0",))
def _stack_grad(ctx, p: StackParam, g):
    ax = norm_axis(p.axis, g.ndim)
    return [ctx.b.reshape(_slice_axis(ctx.b, g, ax, i, i + 1), s) for i, s in enumerate(ctx.fwd_in_shapes)]


def _unsplit(ctx, gs, ax: int, bounds):
    """Concatenate the outputs' gradients (squeezed axes restored); zeros outside the bounds."""
    b, shape = ctx.b, ctx.fwd_in_shapes[0]
    parts = [b.reshape(g, shape[:ax] + (hi - lo,) + shape[ax + 1:]) for g, (lo, hi) in zip(gs, bounds)]
    low, high = [0] * len(shape), [0] * len(shape)
    low[ax], high[ax] = bounds[0][0], shape[ax] - bounds[-1][1]
    return [b.pad(b.concatenate(parts, ax), 0.0, low, high)]


@dataclass(frozen=True)
class SliceChannelParam:
    num_outputs: int
    axis: int = 1
    squeeze_axis: bool = False


def _split_shape(p: SliceChannelParam, ins, outs):
    """MXNet's SliceChannel InferShape: each output from the (partial) input, and the input back
    from each output."""
    data = ins[0]
    if data is None:
        return ins, outs
    if not -len(data) <= p.axis < len(data):
        raise ValueError(f"axis {p.axis} is out of range for an input of shape {shape_str(data)}")
    ax = norm_axis(p.axis, len(data))
    if _c_mod(data[ax], p.num_outputs):
        raise ValueError(f"You are trying to split the {ax}-th axis of input tensor with shape {shape_str(data)} into "
                         f"num_outputs={p.num_outputs} evenly sized chunks, but this is not possible because "
                         f"{p.num_outputs} does not evenly divide {data[ax]}")
    if p.squeeze_axis and data[ax] not in (-1, p.num_outputs):
        raise ValueError(f"If squeeze axis is True, the size of the sliced axis must be the same as num_outputs. "
                         f"Input shape={shape_str(data)}, axis={ax}, num_outputs={p.num_outputs}.")
    part = list(data)
    part[ax] = data[ax] // p.num_outputs if data[ax] >= 0 else -1
    squeezed = p.squeeze_axis and (part[ax] == 1 or data[ax] < 0)
    if squeezed:
        del part[ax]
    new_outs = [merge(o, tuple(part)) for o in outs]
    back = tuple(data)
    for o in new_outs:
        if squeezed:
            cand = tuple(o[:ax]) + (p.num_outputs,) + tuple(o[ax:])
        else:
            cand = tuple(d * p.num_outputs if i == ax and d >= 0 else d for i, d in enumerate(o))
        back = merge(back, cand)
    return [back], new_outs


def _c_mod(a: int, b: int) -> int:
    """C's ``%`` (MXNet checks ``dim % num_outputs == 0`` with an unknown dim of -1)."""
    return a - b * int(a / b)


SliceChannel = define("SliceChannel", "split", stateful=True, params=SliceChannelParam,
                      outputs=lambda p: [f"output{i}" for i in range(p.num_outputs)],
                      infer_shape=_split_shape, infer_type=same_dtype)


@lowers(SliceChannel)
def _slice_channel_lower(ctx, p: SliceChannelParam, x):
    ax = norm_axis(p.axis, x.ndim)
    step = x.shape[ax] // p.num_outputs
    return _split(ctx, x, ax, [(i * step, (i + 1) * step) for i in range(p.num_outputs)])


@differentiable(SliceChannel, lambda p: [f"ograd{i}" for i in range(p.num_outputs)])
def _slice_channel_grad(ctx, p: SliceChannelParam, *gs):
    n = ctx.fwd_in_shapes[0]
    ax = norm_axis(p.axis, len(n))
    step = n[ax] // p.num_outputs
    return _unsplit(ctx, gs, ax, [(i * step, (i + 1) * step) for i in range(p.num_outputs)])


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


split_v2 = define("_split_v2", "split_v2", params=SplitV2Param,
                  outputs=lambda p: [f"output{i}" for i in range(p.sections if p.sections > 0 else len(p.indices))],
                  infer_shape=_split_v2_shape, infer_type=same_dtype)


@lowers(split_v2)
def _split_v2_lower(ctx, p: SplitV2Param, x):
    ax = norm_axis(p.axis, x.ndim)
    return _split(ctx, x, ax, p.bounds(x.shape[ax]))


@differentiable(split_v2, lambda p: [f"ograd{i}" for i in range(len(split_v2.output_names(p)))])
def _split_v2_grad(ctx, p: SplitV2Param, *gs):
    n = ctx.fwd_in_shapes[0]
    ax = norm_axis(p.axis, len(n))
    return _unsplit(ctx, gs, ax, p.bounds(n[ax]))


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


def _slice_shape(p: SliceParam, ins, outs):
    """MXNet's SliceOpShape: unknown input dims stay unknown in the output."""
    data = ins[0]
    if data is None:
        return ins, outs
    if not data:
        raise ValueError("slice only works for ndim > 0")
    if len(p.begin) > len(data) or len(p.end) > len(data):
        raise ValueError("Slicing axis exceeds data dimensions")
    if len(p.begin) != len(p.end):
        raise ValueError("begin and end must have the same length")
    sizes = [len(range(*r)) for r in p.ranges(tuple(max(d, 0) for d in data))]
    return ins, [tuple(-1 if d < 0 else n for d, n in zip(data, sizes))]


slice_op = define("slice", "crop", params=SliceParam, infer_shape=_slice_shape, infer_type=same_dtype,
                  listed_inputs=False)


@lowers(slice_op)
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


@differentiable(slice_op, ("ograd0",))
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


@dataclass(frozen=True)
class SliceAxisParam:
    axis: int
    begin: int
    end: Optional[int]


def _slice_axis_shape(p: SliceAxisParam, ins, outs):
    """MXNet's SliceAxisShape: an unknown sliced axis leaves the input's shape as the output's."""
    data = ins[0]
    if data is None:
        return ins, outs
    ax = norm_axis(p.axis, len(data))
    if data[ax] < 0:
        return ins, [tuple(data)]
    b, e, _ = slice(p.begin, p.end).indices(data[ax])
    out = list(data)
    out[ax] = max(e - b, 0)
    return ins, [tuple(out)]


slice_axis = define("slice_axis", params=SliceAxisParam, infer_shape=_slice_axis_shape, infer_type=same_dtype,
                    listed_inputs=False)


@lowers(slice_axis)
def _slice_axis_lower(ctx, p: SliceAxisParam, x):
    ax = norm_axis(p.axis, x.ndim)
    lo, hi, _ = slice(p.begin, p.end).indices(x.shape[ax])
    return _slice_axis(ctx.b, x, ax, lo, max(lo, hi))


@differentiable(slice_axis, ("ograd0",))
def _slice_axis_grad(ctx, p: SliceAxisParam, g):
    shape = ctx.fwd_in_shapes[0]
    ax = norm_axis(p.axis, len(shape))
    lo, hi, _ = slice(p.begin, p.end).indices(shape[ax])
    if hi <= lo:
        return [None]
    low, high = [0] * len(shape), [0] * len(shape)
    low[ax], high[ax] = lo, shape[ax] - hi
    return [ctx.b.pad(g, 0.0, low, high)]


@dataclass(frozen=True)
class SliceLikeParam:
    axes: Shape = ()


def _slice_like_shape(p: SliceLikeParam, ins, outs):
    data, like = ins
    if not known(data) or not known(like):
        return ins, outs
    if not p.axes and len(data) != len(like):
        raise ValueError(f"By default slice_axis performs slice on all axes, but ndim mismatch for inputs: "
                         f"{len(data)} vs. {len(like)}")
    out = list(data)
    for a in p.axes or range(len(data)):
        ax = norm_axis(a, len(data), "slice_like")
        if ax >= len(like):
            raise ValueError(f"Slice axis: {ax} exceeds second input: {len(like)}")
        if like[ax] > data[ax]:
            raise ValueError(f"Slice axis {ax} with size {like[ax]} exceeds limit of input with size {data[ax]}")
        out[ax] = like[ax]
    return ins, [merge(outs[0], tuple(out))]


# shape_like is read for its shape only and gets a zero gradient, as MXNet's
slice_like = define("slice_like", params=SliceLikeParam, inputs=["data", "shape_like"],
                    no_grad_inputs=("shape_like",), shape_only_inputs=(1,), infer_shape=_slice_like_shape,
                    infer_type=dtype_of_first)


@lowers(slice_like)
def _slice_like_lower(ctx, p: SliceLikeParam, x, like):
    return ctx.b.slice(x, [0] * x.ndim, ctx.out_shapes[0])


@differentiable(slice_like, ("ograd0",))
def _slice_like_grad(ctx, p: SliceLikeParam, g):
    shape = ctx.fwd_in_shapes[0]
    return [ctx.b.pad(g, 0.0, [0] * g.ndim, [n - d for n, d in zip(shape, g.shape)]), None]
