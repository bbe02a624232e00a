"""Activations: Activation, LeakyReLU and Dropout (MXNet 1.9.1 src/operator/nn/activation.cc,
leaky_relu.cc, dropout.cc): parameters, shape rule, lowering and gradient per op, and the
random draws of Dropout and rrelu."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from ..base import AotexecError
from ..emitter import rng_bits
from . import libm
from .params import Shape
from .nhwc import TO_NCHW, TO_NHWC, ChannelsLast, LayoutQuery
from .registry import define, differentiable, lays_out, lowers
from .rules import merge, same_dtype, same_shape


# --- Activation ---
@dataclass(frozen=True)
class ActivationParam:
    act_type: Literal["relu", "sigmoid", "tanh", "softrelu", "softsign"]


Activation = define("Activation", params=ActivationParam, listed_inputs=False,
                    infer_shape=same_shape, infer_type=same_dtype, inplace=True, layout_agnostic=True)


def activation(b, act_type: str, x):
    """Shared by Activation and the unary ops of the same names."""
    if act_type == "relu":
        return b.max(x, 0.0)
    if act_type == "sigmoid":
        return b.logistic(x)
    if act_type == "tanh":
        return libm.tanh(b, x)
    if act_type == "softrelu":  # log(1 + exp(x)), stable for large |x|
        return b.add(b.max(x, 0.0), b.unary("log_plus_one", b.exp(b.neg(b.abs(x)))))
    if act_type == "softsign":
        return b.div(x, b.add(b.abs(x), 1.0))
    raise ValueError(f"unknown act_type {act_type}")


@lowers(Activation)
def _activation_lower(ctx, p: ActivationParam, x):
    return activation(ctx.b, p.act_type, x)


def activation_grad(b, act_type: str, g, y):
    """d act / d x from the output y (MXNet computes these from the output too)."""
    if act_type == "relu":
        return b.select(b.compare(y, 0.0, "GT"), g, b.full_like(g, 0.0))
    if act_type == "sigmoid":
        return b.mul(g, b.mul(y, b.sub(b.full_like(y, 1.0), y)))
    if act_type == "tanh":
        return b.mul(g, b.sub(b.full_like(y, 1.0), b.mul(y, y)))
    if act_type == "softrelu":   # y = log(1 + e^x): dy/dx = 1 - e^-y
        return b.mul(g, b.sub(b.full_like(y, 1.0), b.exp(b.neg(y))))
    raise ValueError(f"activation_grad: {act_type} needs the input")


@differentiable(Activation, lambda p: ["ograd0", "in0" if p.act_type == "softsign" else "out0"],
                inplace=True, layout_agnostic=True)
def _activation_grad(ctx, p: ActivationParam, g, v):
    b = ctx.b
    if p.act_type == "softsign":   # v is x: d/dx x/(1+|x|) = 1/(1+|x|)^2
        d = b.add(b.abs(v), 1.0)
        return [b.div(g, b.mul(d, d))]
    return [activation_grad(b, p.act_type, g, v)]


# --- random draws (Dropout, LeakyReLU rrelu) ---
_GOLDEN64 = 0x9E3779B97F4A7C15


def uniform(b, rng_state, node_index: int, shape, dtype):
    """U[0, 1) of ``shape`` from the (seed, counter) state: the state plus a per-node offset
    keys a first draw whose 128 bits seed the values' stream (so streams of consecutive
    counters do not overlap)."""
    # the offset is added as ui32 halves: IREE 3.13's Vulkan backend cannot legalize ui64 arithmetic
    h = (node_index + 1) * _GOLDEN64
    off = b.constant(np.asarray([[h & 0xFFFFFFFF, (h >> 32) & 0xFFFFFFFF], [0, 0]], dtype=np.uint32), (2, 2), "uint32")
    halves = b.op("stablehlo.bitcast_convert", [rng_state], (2, 2), "uint32")
    state = b.op("stablehlo.bitcast_convert", [b.add(halves, off)], (2,), "uint64")
    _, key = rng_bits(b, state, (2,), "uint64")
    _, bits = rng_bits(b, key, shape, "uint32")
    return b.mul(b.convert(b._bin("shift_right_logical", bits, 8), dtype), 1.0 / (1 << 24))   # [0, 1)


def dropout_mask(b, rng_state, node_index: int, shape, p: float, dtype):
    """Bernoulli(1 - p) / (1 - p) of ``shape``."""
    u = uniform(b, rng_state, node_index, shape, dtype)
    if p >= 1.0:        # MXNet: every element dropped, scaled by 1/0: 0 * inf = NaN
        return b.full_like(u, math.nan)
    keep = b.compare(u, float(p), "GE")
    return b.select(keep, b.full_like(u, 1.0 / (1.0 - p)), b.full_like(u, 0.0))


# --- LeakyReLU ---
@dataclass(frozen=True)
class LeakyReLUParam:
    act_type: Literal["elu", "gelu", "leaky", "prelu", "rrelu", "selu"] = "leaky"
    slope: float = 0.25
    lower_bound: float = 0.125
    upper_bound: float = 0.334


def _lrelu_shape(p: LeakyReLUParam, ins, outs):
    s = merge(ins[0], outs[0])
    res = [s]
    if p.act_type == "prelu":
        gamma = ins[1]
        if s is not None and s[1] >= 0 and gamma is None:
            gamma = (s[1],)
        res.append(gamma)
    return res, [s] * len(outs)   # rrelu's hidden mask has the data's shape


LeakyReLU = define(
    "LeakyReLU", params=LeakyReLUParam,
    inputs=lambda p: ["data", "gamma"] if p.act_type == "prelu" else ["data"],
    outputs=lambda p: ["output", "mask"] if p.act_type == "rrelu" else ["output"],
    num_visible=lambda p: 1, aux_init={"gamma": '["Constant", {"value": 0.25}]'},
    infer_shape=_lrelu_shape, infer_type=same_dtype, inplace=True,
    train_mode=True, random=True, random_when=lambda p, is_train: p.act_type == "rrelu" and is_train)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_LAMBDA = 1.0507009873554804934193349852946


@lowers(LeakyReLU)
def _leaky_relu_lower(ctx, p: LeakyReLUParam, x, gamma=None):
    b = ctx.b
    t = p.act_type
    if t == "gelu":  # erf form, as MXNet's mshadow_op::gelu
        return b.mul(b.mul(x, 0.5), b.add(b.op("chlo.erf", [b.mul(x, 1 / math.sqrt(2))], x.shape), 1.0))
    expm1 = lambda v: b.unary("exponential_minus_one", v)  # noqa: E731
    if t == "leaky":
        neg = b.mul(x, p.slope)
    elif t == "rrelu":
        if ctx.is_train:   # a slope ~ U(lower, upper) per element, kept in the hidden 'mask' output
            u = uniform(b, ctx.rng_state, ctx.node_index, x.shape, x.dtype)
            slope = b.add(b.mul(u, p.upper_bound - p.lower_bound), p.lower_bound)
            return [b.select(b.compare(x, 0.0, "GT"), x, b.mul(x, slope)), slope]
        neg = b.mul(x, (p.lower_bound + p.upper_bound) / 2)
    elif t == "prelu":
        neg = b.mul(x, _prelu_gamma(b, gamma, x.shape))
    elif t == "elu":
        neg = b.mul(expm1(x), p.slope)
    elif t == "selu":
        neg = b.mul(expm1(x), _SELU_ALPHA)
    else:
        raise ValueError(f"unknown act_type {t}")
    y = b.select(b.compare(x, 0.0, "GT"), x, neg)
    if t == "selu":
        y = b.mul(y, _SELU_LAMBDA)
    return [y, None] if t == "rrelu" else y


def _prelu_dims(gshape: tuple[int, ...], xshape: tuple[int, ...]) -> list[int]:
    """The data dims gamma's dims align with: MXNet's expand_shape (leaky_relu-inl.h) matches
    gamma's trailing dims against data dims 1 and 0 only (equal, or gamma's dim 1)."""
    dims, s = [], len(gshape) - 1
    for i in range(len(xshape) - 1, -1, -1):
        if s >= 0 and i <= 1 and (xshape[i] == gshape[s] or gshape[s] == 1):
            dims.insert(0, i)
            s -= 1
    if s != -1:
        raise AotexecError(f"Cannot broadcast gamma to data. gamma: {list(gshape)}, data: {list(xshape)}")
    return dims


def _prelu_gamma(b, gamma, xshape):
    return b.broadcast_in_dim(gamma, xshape, _prelu_dims(tuple(gamma.shape), tuple(xshape)))


@differentiable(LeakyReLU, lambda p: ["ograd0", "in0", "in1"] if p.act_type == "prelu" else
                ["ograd0", "in0", "out1"] if p.act_type == "rrelu" else
                ["ograd0", "out0"] if p.act_type == "selu" else ["ograd0", "in0"])
def _leaky_relu_grad(ctx, p: LeakyReLUParam, g, x, gamma=None):
    b = ctx.b
    t = p.act_type
    pos = b.compare(x, 0.0, "GT")
    zero = b.full_like(x, 0.0)
    if t == "rrelu":   # gamma: the slopes forward drew (its 'mask' output)
        return [b.select(pos, g, b.mul(g, gamma))]
    if t == "gelu":   # 0.5 (1 + erf(x/sqrt2)) + x exp(-x^2/2) / sqrt(2 pi)
        cdf = b.mul(b.add(b.op("chlo.erf", [b.mul(x, 1 / math.sqrt(2))], x.shape), 1.0), 0.5)
        pdf = b.mul(b.exp(b.mul(b.mul(x, x), -0.5)), 1 / math.sqrt(2 * math.pi))
        return [b.mul(g, b.add(cdf, b.mul(x, pdf)))]
    if t == "leaky":
        return [b.select(pos, g, b.mul(g, p.slope))]
    if t == "elu":
        return [b.select(pos, g, b.mul(g, b.mul(b.exp(x), p.slope)))]
    if t == "selu":   # MXNet 1.9.1's selu_grad from the output y: lambda (y > 0 ? 1 : alpha + y)
        return [b.mul(b.select(pos, g, b.mul(g, b.add(x, _SELU_ALPHA))), _SELU_LAMBDA)]
    if t == "prelu":
        dims = _prelu_dims(tuple(gamma.shape), tuple(x.shape))
        dx = b.select(pos, g, b.mul(g, _prelu_gamma(b, gamma, x.shape)))
        gx = b.mul(g, b.select(pos, zero, x))
        summed = [i for i in range(x.ndim) if i not in dims or gamma.shape[dims.index(i)] != x.shape[i]]
        dgamma = b.reduce(gx, summed, "add") if summed else gx
        return [dx, b.reshape(dgamma, gamma.shape)]
    raise AotexecError(f"LeakyReLU {t} has no gradient rule in aotexec (node '{ctx.node.name}')")


# --- hard_sigmoid (src/operator/tensor/elemwise_unary_op_basic.cc): max(0, min(1, alpha x + beta)) ---
@dataclass(frozen=True)
class HardSigmoidParam:
    alpha: float = 0.2
    beta: float = 0.5


hard_sigmoid = define("hard_sigmoid", params=HardSigmoidParam, infer_shape=same_shape, infer_type=same_dtype,
                      inplace=True, layout_agnostic=True)


@lowers(hard_sigmoid)
def _hard_sigmoid_lower(ctx, p: HardSigmoidParam, x):
    b = ctx.b
    return b.clamp(0.0, b.add(b.mul(x, p.alpha), p.beta), 1.0)


@differentiable(hard_sigmoid, ("ograd0", "in0"))
def _hard_sigmoid_grad(ctx, p: HardSigmoidParam, g, x):
    """alpha inside the linear part (0 < alpha x + beta < 1), 0 outside, as MXNet's backward."""
    b = ctx.b
    z = b.add(b.mul(x, p.alpha), p.beta)
    inside = b.op("stablehlo.and", [b.compare(z, 0.0, "GT"), b.compare(z, 1.0, "LT")], x.shape, "bool")
    return [b.select(inside, b.mul(g, p.alpha), b.full_like(g, 0.0))]


# --- Dropout ---
@dataclass(frozen=True)
class DropoutParam:
    p: float = 0.5
    mode: Literal["training", "always"] = "training"
    axes: Shape = ()
    cudnn_off: Optional[bool] = False


Dropout = define("Dropout", stateful=True, params=DropoutParam, outputs=["output", "mask"], num_visible=lambda p: 1,
                 infer_shape=same_shape, infer_type=same_dtype,
                 inplace=True, mirror_kept=True, train_mode=True, random=True,
                 random_when=lambda p, is_train: p.p > 0 and (is_train or p.mode == "always"),
                 inference_params=lambda p: p if p.mode == "always" else dataclasses.replace(p, p=0.0))


@lowers(Dropout)
def _dropout_lower(ctx, p: DropoutParam, x):
    """Training (or mode='always'): y = x * mask, mask = Bernoulli(1-p)/(1-p), shared along ``axes``;
    output 1 keeps the mask for the gradient."""
    if p.p <= 0 or not (ctx.is_train or p.mode == "always"):
        return [x, None]
    b = ctx.b
    axes = {a % x.ndim for a in p.axes}
    mshape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    mask = dropout_mask(b, ctx.rng_state, ctx.node_index, mshape, p.p, x.dtype)
    if axes:
        mask = b.broadcast_in_dim(b.reshape(mask, tuple(d for i, d in enumerate(mshape) if i not in axes)),
                                  x.shape, [i for i in range(x.ndim) if i not in axes])
    return [b.mul(x, mask), mask]


@lays_out(Dropout)
def _dropout_layout(q: LayoutQuery) -> ChannelsLast | None:
    """An NHWC input stays NHWC, the mask too (drawn in the logical NCHW order, so a seed
    gives the same mask in either layout); masks shared along ``axes`` keep the NCHW rule."""
    if q.params.axes or not (q.nhwc[0] and q.four_d(0)):
        return None
    return ChannelsLast("dropout", (True, True), lower=_dropout_nhwc_lower)


def _dropout_nhwc_lower(ctx, p: DropoutParam, x):
    if p.p <= 0 or not (ctx.is_train or p.mode == "always"):
        return [x, None]
    b = ctx.b
    logical = tuple(x.shape[i] for i in TO_NCHW)
    mask = b.transpose(dropout_mask(b, ctx.rng_state, ctx.node_index, logical, p.p, x.dtype), TO_NHWC)
    return [b.mul(x, mask), mask]


@differentiable(Dropout, lambda p: ["ograd0", "out1"] if p.p > 0 else ["ograd0"], layout_agnostic=True)
def _dropout_grad(ctx, p: DropoutParam, g, mask=None):
    return [g if mask is None else ctx.b.mul(g, mask)]
