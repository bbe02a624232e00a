"""Reductions: sum, mean, max, min, prod, nansum, nanprod, norm, argmax, argmin.

MXNet 1.9.1 src/operator/tensor/broadcast_reduce_op*.  A reduction over every
axis without keepdims gives shape (1,), not ().  The axis reductions are one row
each in ``REDUCTIONS`` (lowering and gradient included).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Optional

from .params import Shape
from .registry import define, differentiable, lowers
from .rules import fixed_dtype, flat_or_axis, known, norm_axis, prod, ranked, same_dtype, shape_str


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


def _reduced(p: ReduceParam, data):
    return reduced_shape(tuple(data), p.axes(len(data)), p.keepdims)


_reduce_shape = ranked(_reduced)


@ranked
def _minmax_shape(p: ReduceParam, data):
    """ReduceMinMaxAxesShape: max / min of no elements have no value (whatever the axes)."""
    if known(data) and prod(data) == 0:
        raise ValueError(f"Check failed: (*in_attrs)[0].Size() > 0U (0 vs. 0) : Reduction input's size should > 0 "
                         f"{shape_str(data)}")
    return _reduced(p, data)


def _drop_nan(b, x, fill: float):
    return b.select(b.compare(x, x, "NE"), b.full_like(x, fill), x)


def _expand(b, v, shape, axes):
    """A reduced value (any keepdims / (1,) form) broadcast back over ``shape``."""
    keep = [i for i in range(len(shape)) if i not in axes]
    v = b.reshape(v, tuple(shape[i] for i in keep))
    return b.broadcast_in_dim(v, shape, keep)


def _nan(b, x):
    return b.compare(x, x, "NE")


def _at_extreme(b, g, x, y):
    """max / min: MXNet's ReduceAxesBackwardUseInOut<eq> gives the gradient to every tied element."""
    return b.select(b.compare(x, y, "EQ"), g, b.full_like(g, 0.0))


def _reduce_rule(pre, kind: str, mean: bool):
    def rule(ctx, p: ReduceParam, x):
        b = ctx.b
        axes = p.axes(x.ndim)
        y = b.reduce(pre(b, x) if pre else x, axes, kind)
        if mean:
            y = b.div(y, prod([x.shape[a] for a in axes]))
        return b.reshape(y, ctx.out_shapes[0])  # keepdims / the (1,) of a full reduction
    return rule


def _reduce_grad(fn, reads, mean: bool):
    def rule(ctx, p: ReduceParam, g, *vals):
        b, shape = ctx.b, ctx.fwd_in_shapes[0]
        axes = p.axes(len(shape))
        x = vals[0] if "in0" in reads else None
        y = _expand(b, vals[-1], shape, axes) if "out0" in reads else None
        gx = fn(b, _expand(b, g, shape, axes), x, y)
        if mean:
            gx = b.div(gx, prod([shape[a] for a in axes]))
        return [gx]
    return rule


@dataclass(frozen=True)
class Reduction:
    """One axis reduction: ``kind`` is the stablehlo reduction of the (``pre``-mapped) input;
    its gradient reads ``reads`` besides ograd0 and is ``grad(b, g, x, y)`` with g and the
    output y broadcast back to the input x's shape."""
    name: str
    kind: str
    grad: Callable
    reads: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    pre: Callable | None = None
    mean: bool = False          # divided by the number of reduced elements (and so is the gradient)


REDUCTIONS = (
    Reduction("sum", "add", lambda b, g, x, y: g, aliases=("sum_axis",)),
    Reduction("mean", "add", lambda b, g, x, y: g, mean=True),
    Reduction("max", "max", _at_extreme, ("in0", "out0"), aliases=("max_axis",)),
    Reduction("min", "min", _at_extreme, ("in0", "out0"), aliases=("min_axis",)),
    Reduction("prod", "mul", lambda b, g, x, y: b.mul(g, b.div(y, x)), ("in0", "out0")),
    Reduction("nansum", "add", lambda b, g, x, y: b.select(_nan(b, x), b.full_like(g, 0.0), g), ("in0",),
              pre=lambda b, x: _drop_nan(b, x, 0.0)),
    Reduction("nanprod", "mul", lambda b, g, x, y: b.select(_nan(b, x), b.full_like(g, 0.0), b.mul(g, b.div(y, x))),
              ("in0", "out0"), pre=lambda b, x: _drop_nan(b, x, 1.0)),
)
for _r in REDUCTIONS:
    _op = define(_r.name, *_r.aliases, params=ReduceParam, infer_type=same_dtype, listed_inputs=False,
                 infer_shape=_minmax_shape if _r.kind in ("max", "min") else _reduce_shape)
    lowers(_op)(_reduce_rule(_r.pre, _r.kind, _r.mean))
    differentiable(_op, ("ograd0",) + _r.reads)(_reduce_grad(_r.grad, _r.reads, _r.mean))


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


@ranked
def _norm_shape(p: NormParam, data):
    return reduced_shape(tuple(data), p.axes(len(data)), p.keepdims)


norm = define("norm", params=NormParam, infer_shape=_norm_shape, infer_type=same_dtype, listed_inputs=False)


@lowers(norm)
def _norm_lower(ctx, p: NormParam, x):
    b = ctx.b
    axes = p.axes(x.ndim)
    y = b.reduce(b.abs(x), axes) if p.ord == 1 else b.sqrt(b.reduce(b.mul(x, x), axes))
    return b.reshape(y, ctx.out_shapes[0])


@differentiable(norm, lambda p: ["ograd0", "in0"] + (["out0"] if p.ord == 2 else []))
def _norm_grad(ctx, p: NormParam, g, x, *out):
    """ord 1: sign(x) g; ord 2: x / norm g (MXNet's LpNormGradCompute)."""
    b = ctx.b
    axes = p.axes(x.ndim)
    g = _expand(b, g, x.shape, axes)
    if p.ord == 1:
        return [b.mul(g, b.unary("sign", x))]
    return [b.mul(g, b.div(x, _expand(b, out[0], x.shape, axes)))]


@dataclass(frozen=True)
class ArgReduceParam:
    axis: Optional[int] = None
    keepdims: bool = False


@ranked
def _arg_shape(p: ArgReduceParam, data):
    axes = tuple(range(len(data))) if p.axis is None else (norm_axis(p.axis, len(data)),)
    return reduced_shape(tuple(data), axes, p.keepdims)


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


for _name, _kind in (("argmax", "max"), ("argmin", "min")):
    _op = define(_name, params=ArgReduceParam, infer_shape=_arg_shape, infer_type=same_dtype, zero_grad=True,
                 listed_inputs=False)
    lowers(_op)(_arg_rule(_kind))
    differentiable(_op, ())(lambda ctx, p: [None])


@dataclass(frozen=True)
class ArgmaxChannelParam:
    """No parameters: MXNet's argmax_channel is argmax over the last axis (broadcast_reduce_op_index.cc)."""
    axis: ClassVar[int] = -1
    keepdims: ClassVar[bool] = False


argmax_channel = define("argmax_channel", params=ArgmaxChannelParam, infer_shape=_arg_shape, infer_type=same_dtype,
                        zero_grad=True, listed_inputs=False)
lowers(argmax_channel)(_arg_rule("max"))
differentiable(argmax_channel, ())(lambda ctx, p: [None])


# --- moments (src/operator/nn/moments-inl.h): mean and (biased) variance over ``axes`` ---
@dataclass(frozen=True)
class MomentsParam:
    axes: Optional[Shape] = None
    keepdims: bool = False

    def check(self):
        if not self.axes:
            raise ValueError("Empty axes is not supported, if you would like to do global moments, please pass "
                             "all axes to axes argument")

    def reduced(self, ndim: int) -> tuple[int, ...]:
        return tuple(sorted({norm_axis(a, ndim, "moments") for a in self.axes}))


@ranked
def _moments_shape(p: MomentsParam, data):
    s = reduced_shape(tuple(data), p.reduced(len(data)), p.keepdims)
    return [s, s]


moments = define("moments", params=MomentsParam, outputs=["output0", "output1"], infer_shape=_moments_shape,
                 infer_type=same_dtype)


@lowers(moments)
def _moments_lower(ctx, p: MomentsParam, x):
    b = ctx.b
    axes = p.reduced(x.ndim)
    n = prod(x.shape[a] for a in axes)
    mean = b.div(b.reduce(x, axes, "add"), n)
    d = b.sub(x, _expand(b, mean, x.shape, axes))
    var = b.div(b.reduce(b.mul(d, d), axes, "add"), n)
    return [b.reshape(mean, ctx.out_shapes[0]), b.reshape(var, ctx.out_shapes[1])]


@differentiable(moments, ("ograd0", "ograd1", "in0", "out0"))
def _moments_grad(ctx, p: MomentsParam, g_mean, g_var, x, mean):
    """(g_mean + 2 g_var (x - mean)) / n."""
    b = ctx.b
    axes = p.reduced(x.ndim)
    n = prod(x.shape[a] for a in axes)
    up = lambda v: _expand(b, v, x.shape, axes)  # noqa: E731
    return [b.div(b.add(up(g_mean), b.mul(b.mul(up(g_var), b.sub(x, up(mean))), 2.0)), n)]


# --- all_finite / multi_all_finite (src/operator/contrib/all_finite.cc): 1 when every element of
# every input is finite, else 0, as a (1,) float32 ---
@dataclass(frozen=True)
class AllFiniteParam:
    init_output: bool = True


@dataclass(frozen=True)
class MultiAllFiniteParam:
    num_arrays: int = 1
    init_output: bool = True


def _all_finite_shape(p, ins, outs):
    return ins, [(1,)]


def _all_finite_lower(ctx, p, *xs):
    b = ctx.b
    ok = None
    for x in xs:
        finite = b.compare(b.abs(x), float("inf"), "LT")         # false for inf and NaN
        bad = b.reduce(b.convert(b.op("stablehlo.not", [finite], x.shape, "bool"), "float32"),
                       list(range(x.ndim)), "max")
        ok = bad if ok is None else b.max(ok, bad)
    return b.reshape(b.sub(1.0, ok), (1,))


all_finite = define("all_finite", params=AllFiniteParam, infer_shape=_all_finite_shape,
                    infer_type=fixed_dtype("float32"), zero_grad=True)
multi_all_finite = define("multi_all_finite", params=MultiAllFiniteParam, variadic="num_arrays",
                          infer_shape=_all_finite_shape, infer_type=fixed_dtype("float32"), zero_grad=True)
lowers(all_finite, multi_all_finite)(_all_finite_lower)
