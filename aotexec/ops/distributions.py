"""Random samplers (MXNet 1.9.1 src/operator/random/sample_op.cc, multisample_op.cc):
_random_uniform / _random_normal (parameters as attributes, a ``shape``), their ``_like``
forms (the input's shape and dtype) and _sample_uniform / _sample_normal (one distribution per
element of the parameter arrays, ``shape`` draws each: output ``params.shape + shape``).

They draw from aotexec's counter-based generator (``ax.random.seed``; ops/activation.py's
``uniform``), in inference too, so values differ from MXNet's generator; the distributions
are MXNet's. Normal draws use the Box-Muller transform. No gradient (MXNet's is zero)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import libm
from .activation import uniform
from .params import Shape
from .registry import define, lowers
from .rules import known, same_shape


def _dtype(name: str, default) -> np.dtype:
    return np.dtype(default if name in ("None", "", None) else name)


@dataclass(frozen=True)
class UniformParam:
    low: float = 0.0
    high: float = 1.0
    shape: Shape = ()
    ctx: str = ""
    dtype: str = "None"


@dataclass(frozen=True)
class NormalParam:
    loc: float = 0.0
    scale: float = 1.0
    shape: Shape = ()
    ctx: str = ""
    dtype: str = "None"


@dataclass(frozen=True)
class SampleParam:
    shape: Shape = ()
    dtype: str = "None"


def _attr_shape(p, ins, outs):
    """The ``shape`` attribute; () leaves it to the consumers (MXNet's shape inference fails there)."""
    return ins, ([tuple(p.shape)] if p.shape else outs)


def _attr_type(p, ins, outs):
    return ins, [_dtype(p.dtype, "float32")]


def _sample_shape(p: SampleParam, ins, outs):
    base = next((s for s in ins if known(s)), None)
    if base is None:
        return ins, outs
    return [base] * len(ins), [tuple(base) + tuple(p.shape)]


def _sample_type(p: SampleParam, ins, outs):
    t = next((d for d in ins if d is not None), None)
    if t is None:
        return ins, outs
    return [t] * len(ins), [_dtype(p.dtype, t)]


def _like_type(p, ins, outs):
    return ins, [ins[0]] if ins[0] is not None else outs


_RANDOM = dict(zero_grad=True, random=True, random_when=lambda p, is_train: True)
random_uniform = define("_random_uniform", "random_uniform", "uniform", params=UniformParam, inputs=[],
                        infer_shape=_attr_shape, infer_type=_attr_type, **_RANDOM)
random_normal = define("_random_normal", "random_normal", "normal", params=NormalParam, inputs=[],
                       infer_shape=_attr_shape, infer_type=_attr_type, **_RANDOM)
uniform_like = define("_random_uniform_like", params=UniformParam, inputs=["data"], shape_only_inputs=(0,),
                      infer_shape=same_shape, infer_type=_like_type, **_RANDOM)
normal_like = define("_random_normal_like", params=NormalParam, inputs=["data"], shape_only_inputs=(0,),
                     infer_shape=same_shape, infer_type=_like_type, **_RANDOM)
sample_uniform = define("_sample_uniform", "sample_uniform", params=SampleParam, inputs=["low", "high"],
                        infer_shape=_sample_shape, infer_type=_sample_type, **_RANDOM)
sample_normal = define("_sample_normal", "sample_normal", params=SampleParam, inputs=["mu", "sigma"],
                       infer_shape=_sample_shape, infer_type=_sample_type, **_RANDOM)


def _standard_normal(b, rng, node_index: int, shape, dtype):
    """Box-Muller: sqrt(-2 log(1 - u1)) cos(2 pi u2), u1, u2 ~ U[0, 1)."""
    u = uniform(b, rng, node_index, (2,) + tuple(shape), dtype)
    n = len(shape)
    u1, u2 = (b.reshape(b.slice(u, (k,) + (0,) * n, (k + 1,) + tuple(shape)), tuple(shape)) for k in (0, 1))
    radius = b.sqrt(b.mul(b.log(b.sub(1.0, u1)), -2.0))
    return b.mul(radius, libm.unary(b, "cosine", b.mul(u2, 2.0 * math.pi)))


def _affine(b, x, scale, offset):
    """offset + scale * x, each a float or a value of x's leading axes."""
    def spread(v):
        return v if not hasattr(v, "shape") else b.broadcast_in_dim(v, x.shape, list(range(v.ndim)))
    return b.add(b.mul(x, spread(scale)), spread(offset))


@lowers(random_uniform, uniform_like)
def _uniform_lower(ctx, p: UniformParam, *_):
    u = uniform(ctx.b, ctx.rng_state, ctx.node_index, ctx.out_shapes[0], ctx.out_dtypes[0])
    return _affine(ctx.b, u, p.high - p.low, p.low)


@lowers(random_normal, normal_like)
def _normal_lower(ctx, p: NormalParam, *_):
    z = _standard_normal(ctx.b, ctx.rng_state, ctx.node_index, ctx.out_shapes[0], ctx.out_dtypes[0])
    return _affine(ctx.b, z, p.scale, p.loc)


@lowers(sample_uniform)
def _sample_uniform_lower(ctx, p: SampleParam, low, high):
    b = ctx.b
    u = uniform(b, ctx.rng_state, ctx.node_index, ctx.out_shapes[0], ctx.out_dtypes[0])
    low, high = b.convert(low, u.dtype), b.convert(high, u.dtype)
    return _affine(b, u, b.sub(high, low), low)


@lowers(sample_normal)
def _sample_normal_lower(ctx, p: SampleParam, mu, sigma):
    b = ctx.b
    z = _standard_normal(b, ctx.rng_state, ctx.node_index, ctx.out_shapes[0], ctx.out_dtypes[0])
    return _affine(b, z, b.convert(sigma, z.dtype), b.convert(mu, z.dtype))
