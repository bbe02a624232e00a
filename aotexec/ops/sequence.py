"""Variable-length sequences: SequenceMask, SequenceLast, SequenceReverse (MXNet 1.9.1
src/operator/sequence_mask-inl.h, sequence_last-inl.h, sequence_reverse-inl.h): parameters,
shape rule, lowering and gradient per op.

``sequence_length`` (one length per batch element, float or integer ids as MXNet takes them)
is read only when ``use_sequence_length`` is set, and gets no gradient.  Positions at or past
a sequence's length are padding: SequenceMask fills them, SequenceLast reads the step before
the length, SequenceReverse reverses each sequence's valid prefix and leaves the padding.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..emitter import Value
from .registry import define, differentiable, lowers
from .rules import known, prod


@dataclass(frozen=True)
class SequenceParam:
    use_sequence_length: bool = False
    axis: int = 0

    def check(self):
        if self.axis not in (0, 1):
            raise ValueError("Current implementation expects axis to be 0 or 1.")


@dataclass(frozen=True)
class SequenceMaskParam(SequenceParam):
    value: float = 0.0


def _inputs(p: SequenceParam) -> list[str]:
    return ["data", "sequence_length"] if p.use_sequence_length else ["data"]


def _batch_axis(p: SequenceParam) -> int:
    return 1 - p.axis


def _lengths_shape(p: SequenceParam, ins):
    """The lengths are one per batch element (SHAPE_ASSIGN_CHECK in MXNet's rules)."""
    ins = list(ins)
    if p.use_sequence_length and ins[0] is not None and len(ins[0]) > 1:
        ins[1] = (ins[0][_batch_axis(p)],)
    return ins


def _check_rank(data) -> None:
    if data is not None and len(data) < 2:
        raise ValueError("The data array must be of rank 2 or greater.")


def _same_shape(p: SequenceParam, ins, outs):
    data = ins[0] if ins[0] is not None else outs[0]
    _check_rank(data)
    return _lengths_shape(p, [data] + list(ins[1:])), [data]


def _last_shape(p: SequenceParam, ins, outs):
    _check_rank(ins[0])
    if not known(ins[0]):
        return ins, outs
    return _lengths_shape(p, ins), [tuple(d for i, d in enumerate(ins[0]) if i != p.axis)]


def _type(p, ins, outs):
    """Every input untyped so far takes the data's dtype (MXNet's SequenceMaskProp::InferType)."""
    t = ins[0] if ins[0] is not None else outs[0]
    if t is None:
        return ins, outs
    return [t] + [x if x is not None else t for x in ins[1:]], [t]


def _valid(b, lengths: Value, shape, axis: int) -> Value:
    """i1 of ``shape``: position along ``axis`` (time) is before its sequence's length."""
    n = b.convert(lengths, "int32")
    return b.compare(b.iota(shape, axis, "int32"), b.broadcast_in_dim(n, shape, [1 - axis]), "LT")


def _grad_reads(p: SequenceParam) -> list[str]:
    """The head gradient, and the lengths when there are any."""
    return ["ograd0", "in1"] if p.use_sequence_length else ["ograd0"]


def _seq_define(name: str, params, infer_shape):
    return define(name, stateful=True, params=params, inputs=_inputs, no_grad_inputs=("sequence_length",),
                  infer_shape=infer_shape, infer_type=_type)


# --- SequenceMask: padding positions set to ``value``
SequenceMask = _seq_define("SequenceMask", SequenceMaskParam, _same_shape)


@lowers(SequenceMask)
def _mask_lower(ctx, p: SequenceMaskParam, x, lengths=None):
    if lengths is None:
        return x
    b = ctx.b
    return b.select(_valid(b, lengths, x.shape, p.axis), x, b.full_like(x, p.value))


@differentiable(SequenceMask, _grad_reads)
def _mask_grad(ctx, p: SequenceMaskParam, g, lengths=None):
    if lengths is None:
        return [g]
    b = ctx.b
    return [b.select(_valid(b, lengths, g.shape, p.axis), g, b.full_like(g, 0.0)), None]


# --- SequenceLast: the step at each sequence's length - 1 (the last step without lengths)
SequenceLast = _seq_define("SequenceLast", SequenceParam, _last_shape)


def _at_last(b, lengths: Value, shape, axis: int) -> Value:
    n = b.convert(lengths, "int32")
    n = b.sub(n, b.full_like(n, 1))
    return b.compare(b.iota(shape, axis, "int32"), b.broadcast_in_dim(n, shape, [1 - axis]), "EQ")


def _keep(shape, axis: int) -> list[int]:
    return [i for i in range(len(shape)) if i != axis]


@lowers(SequenceLast)
def _last_lower(ctx, p: SequenceParam, x, lengths=None):
    b = ctx.b
    if lengths is None:
        start = [0] * x.ndim
        start[p.axis] = x.shape[p.axis] - 1
        return b.reshape(b.slice(x, start, x.shape), ctx.out_shapes[0])
    # a masked sum over time picks one step per sequence (a select, so padding's inf / NaN stay out)
    hit = _at_last(b, lengths, x.shape, p.axis)
    return b.reduce(b.select(hit, x, b.full_like(x, 0.0)), [p.axis])


@differentiable(SequenceLast, _grad_reads)
def _last_grad(ctx, p: SequenceParam, g, lengths=None):
    b = ctx.b
    shape = tuple(ctx.fwd_in_shapes[0])
    gb = b.broadcast_in_dim(g, shape, _keep(shape, p.axis))
    if lengths is None:
        hit = b.compare(b.iota(shape, p.axis, "int32"), b.full_like(gb, shape[p.axis] - 1, dtype="int32"), "EQ")
        return [b.select(hit, gb, b.full_like(gb, 0.0))]
    return [b.select(_at_last(b, lengths, shape, p.axis), gb, b.full_like(gb, 0.0)), None]


# --- SequenceReverse: each sequence's valid prefix reversed in time (axis 0 only, as MXNet)
def _reverse_shape(p: SequenceParam, ins, outs):
    if p.axis != 0:
        raise ValueError("Current implementation expects axis to be 0.")
    return _same_shape(p, ins, outs)


SequenceReverse = _seq_define("SequenceReverse", SequenceParam, _reverse_shape)


def sequence_reverse(b, x: Value, lengths: Value | None) -> Value:
    """``x`` (T, N, ...) with x[:len_n, n] reversed for each n; the rest (padding) kept."""
    if lengths is None:
        return b.reverse(x, [0])
    t, n = x.shape[0], x.shape[1]
    rest = x.shape[2:]
    flat = b.reshape(x, (t, n, prod(rest)))
    ln = b.broadcast_in_dim(b.convert(lengths, "int32"), (t, n), [1])
    pos = b.iota((t, n), 0, "int32")
    src = b.select(b.compare(pos, ln, "LT"), b.sub(b.sub(ln, b.full_like(ln, 1)), pos), pos)
    batch = b.iota((t, n), 1, "int32")
    idx = b.concatenate([b.reshape(src, (t, n, 1)), b.reshape(batch, (t, n, 1))], 2)
    attrs = ("dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0, 1], "
             "start_index_map = [0, 1], index_vector_dim = 2>, "
             f"slice_sizes = array<i64: 1, 1, {flat.shape[2]}>, indices_are_sorted = false")
    out = b.op("stablehlo.gather", [flat, idx], flat.shape, x.dtype, attrs=attrs)
    return b.reshape(out, x.shape)


@lowers(SequenceReverse)
def _reverse_lower(ctx, p: SequenceParam, x, lengths=None):
    return sequence_reverse(ctx.b, x, lengths)


@differentiable(SequenceReverse, _grad_reads)
def _reverse_grad(ctx, p: SequenceParam, g, lengths=None):
    """The permutation is its own inverse (MXNet's backward reverses the head gradient)."""
    out = [sequence_reverse(ctx.b, g, lengths)]
    return out + [None] if lengths is not None else out
