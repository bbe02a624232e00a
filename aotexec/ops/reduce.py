"""Reductions: sum, mean, max, min, prod, nansum, nanprod, norm, argmax, argmin.

MXNet 1.9.1 src/operator/tensor/broadcast_reduce_op*.  A reduction over every
axis without keepdims gives shape (1,), not ().
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .params import Shape
from .registry import define
from .rules import flat_or_axis, forward, norm_axis, same_dtype


@dataclass(frozen=True)
class ReduceParam:
    axis: Optional[Shape] = None
    keepdims: bool = False
    exclude: bool = False

    def axes(self, ndim: int) -> tuple[int, ...]:
        """The reduced axes, normalized and sorted."""
        if self.axis is None or len(self.axis) == 0:
            return tuple(range(ndim)) if not self.exclude or self.axis is None else ()
        picked = {norm_axis(a, ndim, "reduce") for a in self.axis}
        if self.exclude:
            picked = set(range(ndim)) - picked
        return tuple(sorted(picked))


def reduced_shape(data: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(data))
    out = tuple(d for i, d in enumerate(data) if i not in axes)
    return out or (1,)


@forward
def _reduce_shape(p: ReduceParam, data):
    return reduced_shape(tuple(data), p.axes(len(data)), p.keepdims)


REDUCE = {"sum": ("sum_axis",), "mean": (), "max": ("max_axis",), "min": ("min_axis",),
          "prod": (), "nansum": (), "nanprod": ()}
for _name, _aliases in REDUCE.items():
    define(_name, *_aliases, params=ReduceParam, infer_shape=_reduce_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class NormParam:
    ord: int = 2
    axis: Optional[Shape] = None
    out_dtype: Optional[str] = None
    keepdims: bool = False

    def axes(self, ndim: int) -> tuple[int, ...]:
        if self.axis is None:
            return tuple(range(ndim))
        return tuple(sorted(norm_axis(a, ndim, "norm") for a in self.axis))

    def check(self):
        if self.ord not in (1, 2):
            raise ValueError(f"norm only supports ord=1 and ord=2, got {self.ord}")


@forward
def _norm_shape(p: NormParam, data):
    return reduced_shape(tuple(data), p.axes(len(data)), p.keepdims)


define("norm", params=NormParam, infer_shape=_norm_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class ArgReduceParam:
    axis: Optional[int] = None
    keepdims: bool = False


@forward
def _arg_shape(p: ArgReduceParam, data):
    axes = tuple(range(len(data))) if p.axis is None else (norm_axis(p.axis, len(data)),)
    return reduced_shape(tuple(data), axes, p.keepdims)


for _name in ("argmax", "argmin"):
    define(_name, params=ArgReduceParam, infer_shape=_arg_shape, infer_type=same_dtype)


# ---------------------------------------------------------------- lowering rules
from .registry import OPS, lowers  # noqa: E402
from .rules import prod  # noqa: E402


def _drop_nan(b, x, fill: float):
    return b.select(b.compare(x, x, "NE"), b.full_like(x, fill), x)


# op -> (pre-map of the input, reduction kind)
REDUCE_LOWER = {
    "sum": (None, "add"),
    "mean": (None, "add"),
    "max": (None, "max"),
    "min": (None, "min"),
    "prod": (None, "mul"),
    "nansum": (lambda b, x: _drop_nan(b, x, 0.0), "add"),
    "nanprod": (lambda b, x: _drop_nan(b, x, 1.0), "mul"),
}
assert REDUCE_LOWER.keys() == REDUCE.keys()


def _reduce_rule(pre, kind: str, mean: bool):
    def rule(ctx, p: ReduceParam, x):
        b = ctx.b
        axes = p.axes(x.ndim)
        y = b.reduce(pre(b, x) if pre else x, axes, kind)
        if mean:
            y = b.div(y, float(prod([x.shape[a] for a in axes])))
        return b.reshape(y, ctx.out_shapes[0])  # keepdims / the (1,) of a full reduction
    return rule


for _name, (_pre, _kind) in REDUCE_LOWER.items():
    lowers(OPS[_name])(_reduce_rule(_pre, _kind, _name == "mean"))


@lowers(OPS["norm"])
def _norm_lower(ctx, p: NormParam, x):
    b = ctx.b
    axes = p.axes(x.ndim)
    y = b.reduce(b.abs(x), axes) if p.ord == 1 else b.sqrt(b.reduce(b.mul(x, x), axes))
    return b.reshape(y, ctx.out_shapes[0])


def _arg_rule(kind: str):
    def rule(ctx, p: ArgReduceParam, x):
        """Index of the first extreme value, as a float (MXNet): min index among the ties."""
        b = ctx.b
        x, ax = flat_or_axis(b, x, p.axis)
        best = b.broadcast_in_dim(b.reduce(x, [ax], kind), x.shape, [i for i in range(x.ndim) if i != ax])
        idx = b.iota(x.shape, ax, "int32")
        cand = b.select(b.compare(x, best, "EQ"), idx, b.full_like(idx, x.shape[ax]))
        return b.reshape(b.convert(b.reduce(cand, [ax], "min"), x.dtype), ctx.out_shapes[0])
    return rule


lowers(OPS["argmax"])(_arg_rule("max"))
lowers(OPS["argmin"])(_arg_rule("min"))


# ---------------------------------------------------------------- gradient rules
from .registry import differentiable  # noqa: E402


def _expand(b, v, shape, axes):
    """A reduced value (any keepdims / (1,) form) broadcast back over ``shape``."""
    keep = [i for i in range(len(shape)) if i not in axes]
    v = b.reshape(v, tuple(shape[i] for i in keep))
    return b.broadcast_in_dim(v, shape, keep)


def _nan(b, x):
    return b.compare(x, x, "NE")


# op -> (forward values read besides ograd0, fn(b, g, x, y) -> gradient; g and y broadcast to x's shape)
# MXNet: ReduceAxesBackwardUseInOut<eq> gives max/min's gradient to every tied element.
REDUCE_GRADS = {
    "sum": ((), lambda b, g, x, y: g),
    "mean": ((), lambda b, g, x, y: g),  # scaled in the rule
    "max": (("in0", "out0"), lambda b, g, x, y: b.select(b.compare(x, y, "EQ"), g, b.full_like(g, 0.0))),
    "min": (("in0", "out0"), lambda b, g, x, y: b.select(b.compare(x, y, "EQ"), g, b.full_like(g, 0.0))),
    "prod": (("in0", "out0"), lambda b, g, x, y: b.mul(g, b.div(y, x))),
    "nansum": (("in0",), lambda b, g, x, y: b.select(_nan(b, x), b.full_like(g, 0.0), g)),
    "nanprod": (("in0", "out0"), lambda b, g, x, y: b.select(_nan(b, x), b.full_like(g, 0.0), b.mul(g, b.div(y, x)))),
}
assert REDUCE_GRADS.keys() == REDUCE.keys()


def _reduce_grad(fn, reads, mean: bool):
    def rule(ctx, p: ReduceParam, g, *vals):
        b, shape = ctx.b, ctx.fwd_in_shapes[0]
        axes = p.axes(len(shape))
        x = vals[0] if "in0" in reads else None
        y = _expand(b, vals[-1], shape, axes) if "out0" in reads else None
        gx = fn(b, _expand(b, g, shape, axes), x, y)
        if mean:
            gx = b.div(gx, float(prod([shape[a] for a in axes])))
        return [gx]
    return rule


for _name, (_reads, _fn) in REDUCE_GRADS.items():
    differentiable(OPS[_name], ("ograd0",) + _reads)(_reduce_grad(_fn, _reads, _name == "mean"))


@differentiable(OPS["norm"], lambda p: ["ograd0", "in0"] + (["out0"] if p.ord == 2 else []))
def _norm_grad(ctx, p: NormParam, g, x, *out):
    """ord 1: sign(x) g; ord 2: x / norm g (MXNet's LpNormGradCompute)."""
    b = ctx.b
    axes = p.axes(x.ndim)
    g = _expand(b, g, x.shape, axes)
    if p.ord == 1:
        return [b.mul(g, b.unary("sign", x))]
    return [b.mul(g, b.div(x, _expand(b, out[0], x.shape, axes)))]


for _name in ("argmax", "argmin"):
    differentiable(OPS[_name], ())(lambda ctx, p: [None])
