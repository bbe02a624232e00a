"""Shared shape and dtype rules (the common cases are one line per op).

Shapes are tuples with -1 for an unknown dimension, or None when nothing is
known.  A rule receives the current knowledge of every input and output and
returns what it can infer; the inference pass merges and reports conflicts.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..symbolic import Dim
from .registry import DTypeT, ShapeT


class IncompatibleAttr(ValueError):
    """MXNet's ElemwiseAttr failure (elemwise_op_common.h): input or output ``index`` contradicts
    what the earlier ones agreed on.  The inference pass adds the node's name."""

    def __init__(self, index: int, kind: str, expected: Any, got: Any):
        super().__init__(index, kind, expected, got)
        self.index, self.kind, self.expected, self.got = index, kind, expected, got

    def message(self, node: str) -> str:
        def fmt(v: Any) -> str:
            if isinstance(v, tuple):
                return "[" + ",".join(map(str, v)) + "]"
            return str(v)
        return (f"Incompatible attr in node {node} at {self.index}-th {self.kind}: expected {fmt(self.expected)}, "
                f"got {fmt(self.got)}")


def shape_str(s: ShapeT) -> str:
    """MXNet's TShape printing in messages: ``[2,-1]``."""
    return "[]" if s is None else "[" + ",".join(map(str, s)) + "]"


def known(s: ShapeT) -> bool:
    return s is not None and all(d >= 0 for d in s)


def merge(a: ShapeT, b: ShapeT) -> ShapeT:
    """Combine two partial shapes; ValueError when they contradict."""
    if a is None:
        return b
    if b is None:
        return a
    def conflict() -> ValueError:
        return ValueError("Shape inconsistent, Provided = [" + ",".join(map(str, a)) + "], inferred shape=("
                          + ",".join(map(str, b)) + ")")
    if len(a) != len(b):
        raise conflict()
    out = []
    for x, y in zip(a, b):
        if x < 0:
            out.append(y)
        elif y < 0 or x == y:
            out.append(y if isinstance(x, Dim) and not isinstance(y, Dim) and y >= 0 else x)   # a constant wins
        else:
            raise conflict()
    return tuple(out)


def prod(dims: Sequence[int]) -> int:
    """The product, symbolic where a dimension is (``symbolic.Dim``)."""
    p = math.prod(dims)
    return p if isinstance(p, Dim) else int(p)


def norm_axis(axis: int, ndim: int, op: str = "") -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{op} axis {axis} is out of range for an array of {ndim} dimensions")
    return axis + ndim if axis < 0 else axis


def same_shape(p: Any, ins: list[ShapeT], outs: list[ShapeT]):
    """Every input and output has one shape (elementwise ops); works both ways."""
    s: ShapeT = None
    for kind, values in (("input", ins), ("output", outs)):
        for i, x in enumerate(values):
            try:
                s = merge(s, x)
            except ValueError:
                raise IncompatibleAttr(i, kind, s, x) from None
    return [s] * len(ins), [s] * len(outs)


def first_input_shape(p: Any, ins: list[ShapeT], outs: list[ShapeT]):
    """Output 0 has the shape of input 0 and vice versa; other inputs are left alone."""
    s = merge(ins[0], outs[0])
    return [s] + list(ins[1:]), [s] + list(outs[1:])


def forward(fn: Callable[..., list[ShapeT] | ShapeT]):
    """A shape rule that needs every input fully known and computes the outputs."""
    def rule(p: Any, ins: list[ShapeT], outs: list[ShapeT]):
        if not all(known(s) for s in ins):
            return ins, outs
        res = fn(p, *ins)
        return ins, (res if isinstance(res, list) else [res])
    rule.__name__ = getattr(fn, "__name__", "rule")
    return rule


def ranked(fn: Callable[..., list[ShapeT] | ShapeT]):
    """A shape rule that needs every input's rank (MXNet's ``ndim_is_known`` guard) and keeps
    unknown dims (-1) unknown in the outputs it computes."""
    def rule(p: Any, ins: list[ShapeT], outs: list[ShapeT]):
        if any(s is None for s in ins):
            return ins, outs
        res = fn(p, *ins)
        return ins, (res if isinstance(res, list) else [res])
    rule.__name__ = getattr(fn, "__name__", "rule")
    return rule


def weighted_inputs(p: Any) -> list[str]:
    """FullyConnected / Convolution / Deconvolution: the bias input exists unless no_bias."""
    return ["data", "weight"] if p.no_bias else ["data", "weight", "bias"]


def same_dtype(p: Any, ins: list[DTypeT], outs: list[DTypeT]):
    t = None
    for kind, values in (("input", ins), ("output", outs)):
        for i, x in enumerate(values):
            if x is not None and t is not None and x != t:
                raise IncompatibleAttr(i, kind, t, x)
            t = t if t is not None else x
    if t is None:
        return ins, outs
    return [t] * len(ins), [t] * len(outs)


def dtype_of_first(p: Any, ins: list[DTypeT], outs: list[DTypeT]):
    """Output takes input 0's dtype; other inputs (indices, labels) keep their own."""
    t = ins[0] if ins[0] is not None else outs[0]
    if t is None:
        return ins, outs
    return [t] + list(ins[1:]), [t] * len(outs)


def fixed_dtype(dtype: str | Callable[[Any], str]):
    def rule(p: Any, ins: list[DTypeT], outs: list[DTypeT]):
        d = np.dtype(dtype(p) if callable(dtype) else dtype)
        return ins, [d] * len(outs)
    return rule


def flat_or_axis(b, x, axis: int | None):
    """MXNet's ``axis=None`` means the flattened array: (value, normalized axis)."""
    if axis is None:
        return b.reshape(x, (prod(x.shape),)), 0
    return x, norm_axis(axis, x.ndim)
