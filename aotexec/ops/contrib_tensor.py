"""Small ``_contrib_`` tensor ops MXNet 1.9.1's tests use: quadratic (quadratic_op-inl.h),
allclose (allclose_op-inl.h) and index_array (index_array.cc)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .params import Shape
from .registry import define, differentiable, lowers
from .rules import known, norm_axis, same_dtype, same_shape


# --- quadratic: a x^2 + b x + c, computed as MXNet's kernel: x (a x + b) + c
@dataclass(frozen=True)
class QuadraticParam:
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0


quadratic = define("_contrib_quadratic", hint="quadratic", params=QuadraticParam, infer_shape=same_shape,
                   infer_type=same_dtype, inplace=True, layout_agnostic=True)


@lowers(quadratic)
def _quadratic_lower(ctx, p: QuadraticParam, x):
    b = ctx.b
    return b.add(b.mul(x, b.add(b.mul(x, p.a), p.b)), p.c)


@differentiable(quadratic, ("ograd0", "in0"), layout_agnostic=True)
def _quadratic_grad(ctx, p: QuadraticParam, g, x):
    b = ctx.b
    return [b.mul(g, b.add(b.mul(x, 2.0 * p.a), p.b))]


# --- allclose: one uint8, 1 when every |a - b| <= atol + rtol |b| (NaNs equal when equal_nan)
@dataclass(frozen=True)
class AllCloseParam:
    rtol: float = 1e-05
    atol: float = 1e-08
    equal_nan: bool = True


def _allclose_shape(p, ins, outs):
    a, c = ins
    if known(a) and known(c) and tuple(a) != tuple(c):
        raise ValueError(f"allclose: the inputs' shapes differ: {tuple(a)} and {tuple(c)}")
    return ins, [()]


allclose = define("_contrib_allclose", hint="allclose", params=AllCloseParam, inputs=["a", "b"],
                  infer_shape=_allclose_shape, infer_type=lambda p, ins, outs: (ins, [np.dtype("uint8")]),
                  zero_grad=True)


@lowers(allclose)
def _allclose_lower(ctx, p: AllCloseParam, x, y):
    b = ctx.b
    # MXNet's parameters are C floats: their float32 values, in the inputs' precision
    atol, rtol = float(np.float32(p.atol)), float(np.float32(p.rtol))
    close = b.compare(b.abs(b.sub(x, y)), b.add(b.mul(b.abs(y), rtol), atol), "LE")
    close = b.op("stablehlo.or", [close, b.compare(x, y, "EQ")], x.shape, "bool")
    nx, ny = b.compare(x, x, "NE"), b.compare(y, y, "NE")
    either = b.op("stablehlo.or", [nx, ny], x.shape, "bool")
    if p.equal_nan:
        ok = b.select(either, b.op("stablehlo.and", [nx, ny], x.shape, "bool"), close)
    else:
        ok = b.op("stablehlo.and", [close, b.op("stablehlo.not", [either], x.shape, "bool")], x.shape, "bool")
    n = int(np.prod(x.shape))
    if not n:
        return b.constant(1, (), "uint8")
    return b.convert(b.reduce(b.reshape(b.convert(ok, "float32"), (n,)), [0], "min"), "uint8")


# --- index_array: each element's index (along ``axes``, default all), int64, as a last axis
@dataclass(frozen=True)
class IndexArrayParam:
    axes: Optional[Shape] = None


def _index_array_shape(p: IndexArrayParam, ins, outs):
    d = ins[0]
    if d is None:
        return ins, outs
    k = len(p.axes) if p.axes is not None else len(d)
    return ins, [tuple(d) + (k,)]


index_array = define("_contrib_index_array", hint="index_array", params=IndexArrayParam,
                     infer_shape=_index_array_shape, infer_type=lambda p, ins, outs: (ins, [np.dtype("int64")]),
                     zero_grad=True)


@lowers(index_array)
def _index_array_lower(ctx, p: IndexArrayParam, x):
    b = ctx.b
    axes = [norm_axis(a, x.ndim) for a in p.axes] if p.axes is not None else list(range(x.ndim))
    out = tuple(x.shape) + (len(axes),)
    if not axes or 0 in out:
        return b.full_like(x, 0, out, "int64")
    parts = [b.iota(tuple(x.shape) + (1,), a, "int64") for a in axes]
    return parts[0] if len(parts) == 1 else b.concatenate(parts, x.ndim)
